"""Privacy against an observer who knows which rounds a user took part in.

User-level sub-sampling (ULDP-FL Algorithm 4, Remark 1) amplifies privacy only against observers
who do not learn the sample: those who see the released models. The server draws the sample
itself, so for it (and anyone it tells) a round without the user carries no information about
the user, and a round with the user is a plain Gaussian with noise multiplier sigma. The number
of such rounds K ~ Binomial(T, q) is random but known to that observer.

RDP of that view, at order alpha (joint convexity of exp((alpha - 1) D_alpha) over the mixture
of "user in the round" and "user not in the round", round by round, then composition):

    rho(alpha) = T / (alpha - 1) * ln(1 - q + q exp((alpha - 1) alpha / (2 sigma^2)))

It is the same formula as rPDP-FL's untrusted-clients model (slides ch. 3 II) with tau rho the
Gaussian's alpha / (2 sigma^2), and it is never smaller than the sub-sampled Gaussian's RDP.
"""
from __future__ import annotations

from uldp.errors import InvalidParameter
import math

import numpy as np

from .conversion import Conversion, rdp_to_dp
from .orders import best_over_stages, resolve_orders


def known_participation_rdp(orders: np.ndarray, sigma: float, q: float, rounds: int) -> np.ndarray:
    """rho(alpha) above, computed in log space (large alpha / small sigma stay finite)."""
    if not sigma > 0:
        raise InvalidParameter(f"sigma must be > 0, got {sigma}")
    if not 0 < q <= 1:
        raise InvalidParameter(f"q must be in (0, 1], got {q}")
    alphas = np.asarray(orders, dtype=float)
    if q >= 1.0:
        return rounds * alphas / (2.0 * sigma**2)
    return rounds * log_poisson_mixture(q, (alphas - 1.0) * alphas / (2.0 * sigma**2)) / (alphas - 1.0)


def log_poisson_mixture(rate: float, x: np.ndarray) -> np.ndarray:
    """ln(1 - rate + rate e^x), elementwise, for rate in (0, 1) and x >= 0.

    log1p keeps full precision when x is tiny; for large x the same quantity as a log-sum-exp,
    which cannot overflow ((alpha - 1) tau rho can be in the tens of thousands).
    """
    with np.errstate(over="ignore"):
        moderate = np.log1p(rate * np.expm1(np.minimum(x, 30.0)))
        large = np.logaddexp(math.log1p(-rate), math.log(rate) + x)
    return np.where(x <= 30.0, moderate, large)


def known_participation_epsilon(sigma: float, q: float, rounds: int, delta: float, *,
                                conversion: str = "improved",
                                orders: str | np.ndarray = "default") -> Conversion:
    """Epsilon at `delta` for an observer who knows the rounds the user took part in."""
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    return best_over_stages(resolve_orders(orders), orders, lambda grid: rdp_to_dp(
        grid, known_participation_rdp(grid, sigma, q, rounds), math.log(delta), conversion))
