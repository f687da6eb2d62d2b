"""The accounting side of an algorithm: the `Plan` it compiles into, and DP-SGD's schedule.

Each ULDP-FL algorithm (ULDP-FL §3) compiles its hyper-parameters into a `Plan`: the mechanism
it releases plus the assumptions the guarantee rests on; any accountant then accounts that
mechanism. The algorithms and their plans live in `uldp.trainers.algorithms` (one module each,
registered by name; `plan_algorithm` there compiles one); this module keeps what is pure
accounting, and imports nothing from the trainers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .events import Mechanism


@dataclass(frozen=True)
class Plan:
    """An algorithm's run as an accounted mechanism, with what the guarantee assumes."""

    algorithm: str
    mechanism: Mechanism
    group_k: int | None  # ULDP-GROUP-k needs group privacy for k records; None: user level directly
    assumptions: dict[str, str] = field(default_factory=dict)


def dp_sgd_rate(batch_size: int, silo_size: int) -> float:
    """ULDP-GROUP-k's record sampling rate gamma_s = min(1, batch / |D'_s|) (Algorithm 2)."""
    return min(1.0, batch_size / silo_size)


def dp_sgd_steps(local_epochs: int, rate: float) -> int:
    """DP-SGD steps per round for Q local epochs at sampling rate gamma: ceil(Q / gamma)."""
    return math.ceil(local_epochs / rate - 1e-9)  # the tolerance keeps Q / 0.1 = 10 at 10
