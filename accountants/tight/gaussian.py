"""The exact privacy curve of composed plain Gaussian mechanisms (no sub-sampling).

A Gaussian mechanism of l2-sensitivity 1 and noise multiplier m is mu-GDP with mu = 1/m, and
composing such mechanisms is again Gaussian: mu = sqrt(sum_t 1/m_t^2) (Dong, Roth & Su 2022,
Cor. 3.3; equivalently the RDP curves alpha / (2 m_t^2) add). Its privacy profile is exact,
not a bound (Balle & Wang 2018, Thm. 8):

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),

so epsilon(delta) is that curve inverted, here by bisection, returning the upper end of the
bracket (never below the exact epsilon). RDP, minimised over any set of orders and converted,
is always above it: this is the tightest valid figure for such a composition, and the commands
whose views are plain Gaussians (`uldp dropout` and `dp-fedavg-robust` at user-q = 1, rPDP's
capped tier at q = 1) use it, keeping their accountant's figure as the cross-check.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from scipy.special import ndtr

from uldp.errors import InvalidParameter

from ..events import Composed, Event, KnownParticipation, SubsampledGaussian
from ..rdp.participation import gaussian_delta, smallest_epsilon

#: Relative rounding error allowed for each term of delta(eps) (a few ulps of ndtr and exp).
ROUNDING = 1e-15
#: Relative width of the final bisection bracket: far below every printed digit.
BISECT_RELATIVE = 1e-12
#: Part of delta kept back besides the rounding allowance (`ROUNDING`): a second guard against
#: the profile's evaluation error, which moves epsilon by far less than a printed digit.
DELTA_MARGIN = 1e-9


def composed_mu(multipliers: Iterable[tuple[float, int]]) -> float:
    """mu = sqrt(sum count / m^2) of plain Gaussian mechanisms given as (multiplier m, count)."""
    total = 0.0
    for multiplier, count in multipliers:
        if not (multiplier > 0 and math.isfinite(multiplier)):
            raise InvalidParameter(f"noise multiplier must be > 0, got {multiplier}")
        if count < 0:
            raise InvalidParameter(f"a count of mechanisms must be >= 0, got {count}")
        total += count / multiplier**2
    return math.sqrt(total)


def gaussian_delta_at(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP (Balle & Wang 2018, Thm. 8); 0 at mu = 0."""
    return float(gaussian_delta(eps, np.asarray(mu, dtype=float)))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact epsilon of mu-GDP at `delta`, rounded up (bisection's upper end).

    0 when delta(0) = Phi(mu/2) - Phi(-mu/2) is already within `delta`.
    """
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    if not (mu >= 0 and math.isfinite(mu)):
        raise InvalidParameter(f"mu must be finite and >= 0, got {mu}")
    target = delta * (1.0 - DELTA_MARGIN)

    def excess(eps: float) -> float:
        # plus the rounding error the difference of the two terms can carry (both are at most
        # the first, Phi(-eps/mu + mu/2), each to about 1e-16 of itself), so the sign is never
        # wrong on the unsafe side, however small mu makes the terms' ratio to delta
        first = float(ndtr(-eps / mu + mu / 2)) if mu > 0 else 0.0
        return gaussian_delta_at(eps, mu) + ROUNDING * first - target

    # delta(eps) <= Phi(-eps/mu + mu/2) < target once eps >= mu^2/2 + mu z, z = Phi^{-1}(1 - target)
    start = max(1.0, mu * mu / 2.0 + mu * _upper_quantile(target))
    return smallest_epsilon(excess, start=start, relative=BISECT_RELATIVE)


def plain_gaussian_mu(event: Event) -> float | None:
    """mu of `event` if it is a composition of plain Gaussians (sub-sampling rate 1), else None.

    `SubsampledGaussian(sigma, 1, steps)` and `KnownParticipation(sigma, 1, rounds)` are `steps`
    (`rounds`) plain Gaussians of multiplier sigma; a `Composed` of such events composes them.
    Anything else (a rate below 1, silos, groups) has no such closed form here.
    """
    parts = event.events if isinstance(event, Composed) else (event,)
    pairs: list[tuple[float, int]] = []
    for part in parts:
        if isinstance(part, SubsampledGaussian) and part.q >= 1.0:
            pairs.append((part.sigma, part.steps))
        elif isinstance(part, KnownParticipation) and part.q >= 1.0:
            pairs.append((part.sigma, part.rounds))
        else:
            return None
    return composed_mu(pairs)


def exact_gaussian_epsilon(event: Event, delta: float) -> float | None:
    """The exact epsilon of `event` at `delta` when it is a composition of plain Gaussians
    (`plain_gaussian_mu`), else None."""
    mu = plain_gaussian_mu(event)
    return None if mu is None else gaussian_epsilon(mu, delta)


def gaussian_max_count(multiplier: float, budget: float, delta: float, most: int = 10**9) -> int:
    """The most plain Gaussians of this multiplier, up to `most`, whose composition stays within
    `budget`.

    mu-GDP's epsilon grows with mu, so the answer is floor((mu* m)^2) for the mu* whose epsilon
    is the budget; it is re-accounted (and lowered while over the budget) so the returned count
    is checked, not derived. `most` (the generic calibrator's `MAX_STEPS`) keeps the counts
    where a double still tells n from n + 1.
    """
    if gaussian_epsilon(1.0 / multiplier, delta) > budget:
        return 0
    if gaussian_epsilon(math.sqrt(most) / multiplier, delta) <= budget:
        return most
    lo, hi = 1.0 / multiplier, 2.0 / multiplier
    while gaussian_epsilon(hi, delta) <= budget:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gaussian_epsilon(mid, delta) <= budget:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    count = math.floor((lo * multiplier) ** 2 * (1.0 + 1e-12)) + 1
    while count > 0 and gaussian_epsilon(math.sqrt(count) / multiplier, delta) > budget:
        count -= 1
    return count


def _upper_quantile(p: float) -> float:
    from scipy.special import ndtri

    return float(-ndtri(p))
