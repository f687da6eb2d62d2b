"""Mechanisms broken on purpose, to show that `uldp audit` catches them (issue 18).

An accountant cannot see an implementation bug: it accounts the mechanism the code was meant to
run. `uldp audit --break-mechanism FAULT` (a hidden, test-only switch) makes the trainers run one
of these faults so that a test can check the audit reports a lower bound above the claimed upper
bound. No other command sets `TrainConfig.fault`; a run with a fault says so in its output.

- noise: every silo's noise std is divided by 10 (per-user clipping, DP-SGD).
- clip: silo 0 skips clipping (per-user clipping: its users' deltas; DP-SGD: its records'
  gradients), so one user moves that silo's message by its whole update.
- weights: every silo weights a user by 1 instead of w_{s,u} (1/|S| or n_{s,u}/N_u), so a user
  held by several silos is counted in each at full weight: weights sum to the user's silo count,
  not 1 (per-user clipping).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch

FAULTS: dict[str, str] = {
    "noise": "noise std divided by 10",
    "clip": "silo 0 skips clipping",
    "weights": "every silo weights a user 1 (weights sum to its silo count, not 1)",
}
NOISE_DIVISOR = 10.0
UNCLIPPED_SILO = 0


def noise_std(std: float, fault: str | None) -> float:
    """The noise std a silo draws with: `std`, unless the noise fault divides it."""
    return std / NOISE_DIVISOR if fault == "noise" else std


def clip_factors(factors: torch.Tensor, fault: str | None, silo: int) -> torch.Tensor:
    """The clipping factors min(1, C / ||row||) a silo applies: all 1 in the clip fault's silo."""
    if fault == "clip" and silo == UNCLIPPED_SILO:
        return factors.new_ones(factors.shape)
    return factors


def weights(w: np.ndarray, fault: str | None) -> np.ndarray:
    """The weights w_{s,u} a round uses: 1 wherever w > 0 under the weights fault."""
    return (w > 0).astype(float) if fault == "weights" else w
