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

The same view has an exact privacy profile (`known_participation_delta`): given K = k the view is
one Gaussian at distance sqrt(k) / sigma, and the observed K splits the outputs, so
delta(eps) = E_K[delta_Gauss(eps; sqrt(K) / sigma)] (Balle & Wang 2018, Thm. 8, per K). The
tight accountants (pld, prv) account `KnownParticipation` events with it
(`known_participation_exact_epsilon`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import log_ndtr, ndtr

from uldp.errors import InvalidParameter

from ..events import KnownParticipation

#: Participation counts K whose upper tail is lighter than this get delta 1 in
#: `known_participation_delta`: a bound that costs nothing at any delta worth asking for.
TAIL_MASS = 1e-20


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


def gaussian_delta(eps: float, mu: np.ndarray) -> np.ndarray:
    """delta(eps) of a Gaussian pair at distance mu (multiplier 1/mu): Balle & Wang 2018, Thm. 8.

    Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2); 0 at mu = 0.
    """
    mu = np.asarray(mu, dtype=float)
    safe = np.where(mu > 0, mu, 1.0)
    value = ndtr(-eps / safe + safe / 2) - np.exp(eps + log_ndtr(-eps / safe - safe / 2))
    return np.where(mu > 0, np.maximum(value, 0.0), 0.0)


def known_participation_delta(eps: float, multiplier: float, q: float, rounds: int) -> float:
    """Exact delta(eps) against an observer who knows the participation count K ~ Bin(T, q).

    Given K = k the view is k Gaussian rounds, i.e. one Gaussian at distance sqrt(k)/m, and the
    observed K splits the outputs, so delta(eps) = E_K[delta_Gauss(eps; sqrt(K)/m)]. K beyond a
    point whose upper tail has mass below 1e-20 are counted with delta 1 (an upper bound).
    """
    from scipy.stats import binom  # scipy.stats costs 0.4 s of start-up; only this path needs it

    KnownParticipation(multiplier, q, rounds)  # the same checks as the RDP accounting
    top = participation_range(rounds, q)[1]
    ks = np.arange(top + 1)
    weights = binom.pmf(ks, rounds, q)
    tail = 0.0 if top >= rounds else float(binom.sf(top, rounds, q))
    return float(np.sum(weights * gaussian_delta(eps, np.sqrt(ks) / multiplier)) + tail)


def known_participation_exact_epsilon(event: KnownParticipation, delta: float) -> float:
    """The exact `known_participation_delta` inverted by bisection at `delta`.

    The upper end of the bracket is returned, so the figure is never below the exact epsilon.
    """
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")

    def excess(eps: float) -> float:
        return known_participation_delta(eps, event.sigma, event.q, event.rounds) - delta

    return smallest_epsilon(excess)


def smallest_epsilon(
    excess: Callable[[float], float], *, start: float = 1.0, relative: float = 1e-10
) -> float:
    """The smallest epsilon >= 0 with `excess(epsilon) <= 0`, for an `excess` (delta(eps) less
    the target) that decreases in epsilon: 0 if `excess(0) <= 0`, else the upper end of a
    bisection bracket `relative` wide, doubled from `start` until it holds, so that the figure
    returned is never below the exact one."""
    if excess(0.0) <= 0:
        return 0.0
    lo, hi = 0.0, start
    while excess(hi) > 0:  # checked, not assumed: the bracket is doubled until it holds
        lo, hi = hi, 2.0 * hi
    while hi - lo > relative * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if excess(mid) > 0:
            lo = mid
        else:
            hi = mid
    return hi


def participation_range(n: int, q: float) -> tuple[int, int]:
    """[low, top]: the participation counts outside which each tail of Binomial(n, q) has mass
    below TAIL_MASS, searched within 15 standard deviations (+ 50) of the mean.

    Directly, not by binom.isf / ppf: scipy's isf(1e-20, 1e5, 0.01) returns 1e5, which would
    sum 1e5 counts where 900 carry the mass (0.7 s for one exact epsilon at the Fig. 2 setting).
    Any range is valid, as the callers count the tails beyond it pessimistically (delta 1 above,
    the smallest count kept below); this one only keeps the sum short.
    """
    from scipy.stats import binom

    if q >= 1.0:
        return n, n
    spread = 15.0 * math.sqrt(n * q * (1.0 - q)) + 50.0
    ks = np.arange(max(0, math.floor(n * q - spread)), min(n, math.ceil(n * q + spread)) + 1)
    light_above = np.flatnonzero(binom.sf(ks, n, q) < TAIL_MASS)
    heavy_below = np.flatnonzero(binom.cdf(ks, n, q) >= TAIL_MASS)
    top = int(ks[light_above[0]]) if light_above.size else n
    low = int(ks[heavy_below[0]]) if heavy_below.size else int(ks[0])
    return min(low, top), top
