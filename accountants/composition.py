"""Epsilon, by RDP, of a sequential composition of Poisson-subsampled Gaussian mechanisms.

RDP composes by addition (ULDP-FL Lemma 1), so a run of T steps is T times the one-step curve.
The one-step curves are cached (`accountants.rdp.step_rdp`): searching for the most rounds under a budget, or accounting a
table of round counts, asks for the same mechanism at many T, and the one-step RDP (binomial
sums of Mironov et al. 2019) is the whole cost. Orders and conversion are handled exactly as in
`accountants.account.record_level`, so a single mechanism gets the same epsilon.
"""
from __future__ import annotations

from uldp.errors import InvalidParameter
import math
from typing import Sequence

import numpy as np

from .conversion import rdp_to_dp
from .mechanism import SubsampledGaussian
from .orders import best_over_stages, resolve_orders
from .rdp import step_rdp


def rdp_epsilon(parts: Sequence[tuple[float, float, int]], delta: float, conversion: str = "improved",
                orders="default") -> float:
    """Epsilon at `delta` of the composition of `steps` Poisson-subsampled Gaussian steps per part.

    parts: (sigma, q, steps) triples, composed sequentially.
    """
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    mechanisms = [SubsampledGaussian(sigma, q, steps) for sigma, q, steps in parts]

    def at(grid: np.ndarray):
        rdp = sum((m.steps * step_rdp(m, grid) for m in mechanisms), np.zeros(grid.size))
        return rdp_to_dp(grid, rdp, math.log(delta), conversion)

    conv = best_over_stages(resolve_orders(orders), orders, at)
    return conv.epsilon
