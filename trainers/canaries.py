"""Canaries for `uldp audit`: planted users whose update is a Dirac vector on a coordinate of their own.

Gradient canaries (Nasr, Hayes, Steinke, Balle, Tramer, Jagielski, Carlini, Terzis, "Tight
Auditing of Differentially Private Machine Learning", USENIX Security 2023: the "Dirac
canary", a gradient that is zero except on one coordinate; Steinke, Nasr, Jagielski 2023 use
the same in their white-box one-run audit). A canary's update does not depend on the model, so
its effect is the largest a user (or record) can have after clipping, and nothing else moves its
coordinate:

- `CanaryBlock` appends m parameters to the model that its output never reads: a real record's
  gradient there is exactly 0, so canary i's coordinate carries only canary i's clipped update and
  the mechanism's noise (no other user interferes, whatever the data or model).
- Canary i's update is CANARY_NORM * C along its coordinate: a correct mechanism clips it to C;
  one that skips clipping lets all of it through.
- `plant` adds the canary users to the data with probability 1/2 each (the inclusion bits the
  audit then tests), with the records the algorithm needs for a canary to reach its full
  weight: one record in every silo for the per-user algorithms (w_{s,u} = 1/|S| in each, so
  the sum of a user's weights is 1), k records for ULDP-GROUP-k (all kept by the flags), one
  record of the smallest budget, at its rate, for rPDP-FL's record-level algorithms.
  A canary's records are copies of random training records: their content is never trained on
  (the canary's update replaces it), they only make the canary a user of those silos.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from .algorithms.dirac_rows import DiracRows

if TYPE_CHECKING:
    from .algorithms.base import SiloData
    from .data.federated import FederatedData

#: A canary's update is this many times the clipping bound long, so that clipping matters.
CANARY_NORM = 100.0

#: The parameter name of the canary block in the model's parameters.
CANARY_PARAMETER = "canaries.weight"


class _Block(nn.Module):
    def __init__(self, m: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(m))


class CanaryBlock(nn.Module):
    """`inner`, with m extra parameters that its output never reads, last in the flat order (a
    submodule registered after `inner`: a module lists its own parameters before its children's).

    The output adds 0 * sum(canaries) so that every gradient path (torch.func, autograd) sees the
    block and returns an exact zero gradient for it, rather than failing on an unused input."""

    def __init__(self, inner: nn.Module, m: int) -> None:
        super().__init__()
        self.inner = inner
        self.canaries = _Block(m)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + 0.0 * self.canaries.weight.sum()


@dataclass(frozen=True)
class Canaries:
    """The planted canaries: m users appended after the data's own (ids n .. n + m - 1)."""

    m: int
    first_user: int  # the data's own user count n: canary i is user n + i
    included: np.ndarray  # (m,) bool: canary i's records are in the training data
    records_each: int  # records an included canary holds
    layout: str  # in words, where a canary's records are

    @property
    def users(self) -> np.ndarray:
        return np.arange(self.first_user, self.first_user + self.m)


def plant(
    data: FederatedData,
    m: int,
    records_each: int,
    layout: str,
    rng: np.random.Generator,
    record_rate: tuple[float, float] | None = None,
) -> tuple[FederatedData, Canaries, np.ndarray]:
    """`data` with m canary users, each included with probability 1/2 (drawn from `rng`).

    Returns the planted data, the canaries, and for every training record of the planted data its
    canary's index (-1 for the data's own records). Canary i's j-th record goes to silo
    (start_i + j) mod |S|, start_i random, so a canary with |S| records is in every silo.
    `record_rate` (q, budget): the sampling rate and budget of every canary record, for data that
    carries per-record rates (rPDP-FL)."""
    included = rng.random(m) < 0.5
    chosen = np.flatnonzero(included)
    owners = np.repeat(chosen, records_each)
    starts = rng.integers(0, data.n_silos, size=m)
    silos = (starts[owners] + np.tile(np.arange(records_each), len(chosen))) % data.n_silos
    copies = rng.integers(0, len(data.y_train), size=len(owners))
    planted = dataclasses.replace(
        data,
        x_train=np.concatenate([data.x_train, data.x_train[copies]]),
        y_train=np.concatenate([data.y_train, data.y_train[copies]]),
        user_train=np.concatenate([data.user_train, data.n_users + owners]).astype(data.user_train.dtype),
        silo_train=np.concatenate([data.silo_train, silos]).astype(data.silo_train.dtype),
        n_users=data.n_users + m,
        record_index=None,
    )
    if data.record_q is not None or data.record_budget is not None:
        if record_rate is None or data.record_q is None or data.record_budget is None:
            raise ValueError("data with per-record rates needs the canaries' rate and budget")
        q, budget = record_rate
        planted = dataclasses.replace(
            planted,
            record_q=np.concatenate([data.record_q, np.full(len(owners), q)]),
            record_budget=np.concatenate([data.record_budget, np.full(len(owners), budget)]),
        )
    canary_of_record = np.concatenate([np.full(len(data.y_train), -1, dtype=np.int64), owners])
    return planted, Canaries(m, data.n_users, included, records_each, layout), canary_of_record


def mark_silos(silos: list[SiloData], data: FederatedData, canary_of_record: np.ndarray, offset: int) -> None:
    """Give each silo its records' canary coordinates (offset + canary index; -1 for real
    records), in the order `runner.build_silos` put the records."""
    for silo in silos:
        idx = np.flatnonzero(data.silo_train == silo.silo)
        marks = canary_of_record[idx]
        silo.canary = np.where(marks >= 0, offset + marks, -1)


def split_canaries(
    silo: SiloData, users: np.ndarray, clip: float, like: torch.Tensor
) -> tuple[np.ndarray, DiracRows]:
    """(the real users among `users`, the canary users' Dirac rows: CANARY_NORM * C on the
    canary's coordinate, a local update that raises its parameter). Canary users are not
    trained: their update does not depend on the model."""
    users = np.asarray(users, dtype=np.int64)
    if silo.canary is None:
        return users, DiracRows(users[:0], users[:0], like.new_zeros(0))
    coordinate = np.full(silo.n_users, -1, dtype=np.int64)
    coordinate[silo.users] = silo.canary
    of = coordinate[users]
    planted = of >= 0
    values = like.new_full((int(planted.sum()),), CANARY_NORM * clip)
    return users[~planted], DiracRows(users[planted], of[planted], values)


def plant_gradients(grads: torch.Tensor, coordinates: np.ndarray, clip: float) -> torch.Tensor:
    """Per-record gradients with every canary record's row replaced (in place) by
    -CANARY_NORM * C on its coordinate, so that a descent step raises the canary's parameter.
    `coordinates` holds each row's canary coordinate, -1 for real records."""
    rows = np.flatnonzero(coordinates >= 0)
    if len(rows):
        index = torch.as_tensor(rows, device=grads.device)
        grads[index] = 0.0
        grads[index, torch.as_tensor(coordinates[rows], device=grads.device)] = -CANARY_NORM * clip
    return grads
