"""Epsilon, by RDP, of a sequential composition of Poisson-subsampled Gaussian mechanisms.

RDP composes by addition (ULDP-FL Lemma 1): the registry's RDP accountant adds the curves of a
`Composed` event, each a cached one-step curve (`accountants.rdp.step_rdp`) times its steps.
"""

from __future__ import annotations

from collections.abc import Sequence

from .events import Composed, SubsampledGaussian
from .orders import OrdersSpec
from .registry import account_event


def rdp_epsilon(
    parts: Sequence[tuple[float, float, int]],
    delta: float,
    conversion: str = "improved",
    orders: OrdersSpec = "default",
) -> float:
    """Epsilon at `delta` of the composition of `steps` Poisson-subsampled Gaussian steps per part.

    parts: (sigma, q, steps) triples, composed sequentially.
    """
    event = Composed(tuple(SubsampledGaussian(sigma, q, steps) for sigma, q, steps in parts))
    return account_event(event, delta, "rdp", conversion=conversion, orders=orders).epsilon
