"""Rows that are zero but for one coordinate each, kept sparse: `uldp audit`'s canary updates.

A canary user's update is a Dirac vector (trainers/canaries.py: CANARY_NORM * C on a coordinate of
its own); a silo sends its canaries' rows beside its users' dense ones (`base.SiloUserDeltas.dirac`),
and the server clips, weights and sums them as it would dense rows. They live apart from
canaries.py (which names `base.SiloData`) because the message type `base.SiloUserDeltas` names
them: both import them from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class DiracRows:
    """Per-user rows that are zero but for one coordinate each (the canaries' updates), kept as
    (user, coordinate, value) instead of dense rows of the model's width: clipped, weighted and
    summed exactly as dense rows would be (`dense` is that row matrix), at none of the cost of
    writing thousands of rows of zeros every round."""

    users: np.ndarray  # (k,)
    coordinates: np.ndarray  # (k,) each row's non-zero coordinate
    values: torch.Tensor  # (k,) its value

    def __len__(self) -> int:
        return len(self.users)

    def scaled(self, factors: torch.Tensor) -> DiracRows:
        """Each row times its factor (a clipping factor, a weight)."""
        return DiracRows(self.users, self.coordinates, self.values * factors)

    def add_sum_to(self, total: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        """total += sum_k weights_k row_k (in place), the rows' part of a weighted sum."""
        values = self.values if weights is None else self.values * weights
        return total.index_add_(0, torch.as_tensor(self.coordinates, device=total.device), values)

    def dense(self, width: int) -> torch.Tensor:
        """The (k, width) row matrix (tests)."""
        out = self.values.new_zeros((len(self), width))
        out[torch.arange(len(self)), torch.as_tensor(self.coordinates)] = self.values
        return out
