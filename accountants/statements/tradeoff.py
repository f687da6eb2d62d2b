"""What an (epsilon, delta) guarantee means to a membership-inference attacker.

Hypothesis-testing view of DP (Wasserman & Zhou 2010; Kairouz, Oh, Viswanath 2015, "The
composition theorem for differential privacy", Thm. 2.1). An attacker who sees the output and
guesses whether the unit (record, group, user) was in the data is a test between the output
distributions with and without it. At false-positive rate a (guessing "in" when it was out) its
true-positive rate is bounded by the trade-off curve f of the mechanism: TPR <= 1 - f(a).

- One (epsilon, delta) pair (Kairouz et al. 2015, Thm. 2.1; Dong, Roth, Su 2019, "Gaussian
  Differential Privacy", the trade-off function f_{eps,delta} of (epsilon, delta)-DP):
      TPR <= min(1, e^eps a + delta, 1 - e^-eps (1 - delta - a))          (`tpr_from_dp`)
- A privacy profile, delta(eps) for every eps >= 0 with both directions of the adjacency: every
  pair holds, so the bound is the minimum over the pairs (Dong, Roth, Su 2019, Prop. 2.12:
  f = sup_eps f_{eps,delta(eps)}, the trade-off curve as the convex conjugate of the profile,
  delta(eps) = 1 + f*(-e^eps)), which is tight when the profile is exact (`tpr_from_profile`).
- mu-GDP, the plain Gaussian with sensitivity / noise mu (Dong, Roth, Su 2019, the trade-off
  function G_mu(a) = Phi(Phi^-1(1 - a) - mu) that defines mu-GDP):
      TPR <= Phi(Phi^-1(a) + mu)                                            (`gaussian_tpr`)

Profiles by accountant (`privacy_profile`), each an upper bound on delta(eps) at every eps:
- rdp: the conversion (ULDP-FL Lemma 2 / Mironov 2017 Prop. 3, `accountants.conversion`) solved
  for delta at each order, minimised over the orders, and the total-variation rule
  delta <= sqrt(1 - e^-rho) at every eps (Bretagnolle-Huber, as in `conversion.py`). Groups: the
  Lemma 6 group curve (`group.lemma6_orders`, rho_k(a / 2^c) = 3^c rho(a)) or, for Lemma 5
  (`group_method="normal"`), each record-level pair (e, delta(e)) turned into the group pair
  (k e, k e^((k-1) e) delta(e)) (Kasiviswanathan & Smith; `group.normal_group` picks one of them).
- pld: dp-accounting's `get_delta_for_epsilon` of the composed PLDs `pld.pld_epsilon` builds
  (pessimistic, larger of the two directions): the worst silo, or the worst split of a group.
- prv: prv-accountant's upper bound delta(eps - eps_error) + delta_error (Gopi, Lee, Wutschitz
  2021, Thm. 5.5; PRVAccountant.compute_delta's third value) of the compositions `prv.prv_epsilon`
  builds, both directions, worst silo.
- pld and prv, `KnownParticipation`: the exact mixture profile (`participation`).
Under pld and prv, a silo whose (sigma, q, steps) is dominated by another's (sigma no smaller,
q and steps no larger) is skipped at record level: its privacy pair is a post-processing of the
other's in every step (convexity of the hockey-stick divergence in q, added noise in sigma), so
its profile is no larger (Blackwell; Dong, Roth, Su 2019, Thm. 2.10).

Epsilon grid (`attack_bound`, `roc_bound`). The minimum is taken over GRID_POINTS = 2000
epsilons evenly spaced from 0 to the epsilon where the profile comes within GRID_DELTA = 1e-12
of its floor (its value at large epsilon: dp-accounting's truncated tail mass, prv's
delta_error, 0 for rdp), found on a geometric probe of [1e-4, 500] (so the top is at most 14%
past it). Why that suffices: at FPR a the best epsilon is the (1 - a)-quantile of the privacy
loss without the unit (where delta'(eps) = -e^eps a), where delta is still of the order of a
times the loss's spread, far above 1e-12; and between grid points the bound at the optimum rises
only quadratically, by about h^2 / 8 times e^eps times the loss's density (h the spacing).
Measured against the Gaussian's closed form (mu 0.003 to 40): the grid bound is at most 1e-5
relative above Phi(Phi^-1(a) + mu) at FPRs 1e-8 to 1 (3e-4 at 1e-10, 5% at 1e-12), and never
below it (tests/accountants/test_tradeoff.py checks FPRs 1e-5 to 1). For several PLDs or PRVs
(silos, splits, directions) each is evaluated on its own grid and their maximum is taken on the
common one by linear interpolation in e^eps, which bounds each from above because delta is
convex in e^eps (delta = E[(e^L - e^eps)_+], L the privacy loss without the unit).

Accuracy of the prv profile: its upper bound is the estimate shifted by eps_error in epsilon and
delta_error in delta. Given the delta a guarantee was accounted at (`attack_bound(...,
delta=...)`, as `uldp report` calls it), these are `prv_epsilon`'s own (0.01, delta / 1000): the
composition `prv_epsilon` built is reused (prv.silo_composition remembers it), so the curve costs
nothing more. Without a delta, PRV_EPS_ERROR 0.03 and PRV_DELTA_ERROR 1e-9: a coarser mesh keeps
a profile of 1e5 steps under a second (0.8 s a distinct silo, against 2 s at 0.01), with a TPR
bound at most e^0.03 (3%) + 1e-9 above the estimate's.

dp_accounting and prv_accountant are imported inside the functions that need them (import cost).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

import numpy as np
from scipy.special import ndtr, ndtri

from uldp.errors import InvalidParameter

from ..conversion import CONVERSIONS
from ..events import (
    Composed,
    Event,
    Group,
    KnownParticipation,
    ParallelSilos,
    SubsampledGaussian,
    check_tight_sigma,
    describe,
    silos_of,
)
from ..orders import Orders, OrdersSpec
from ..rdp.accountant import RDP_GROUP_METHODS
from ..rdp.curves import event_rdp
from ..rdp.group import doubling_exponent, lemma6_orders
from ..rdp.participation import gaussian_delta, participation_range
from ..rdp.profile import RdpProfile
from ..registry import accountant_named
from ..tight.prv import DEFAULT_EPS_ERROR

#: The false-positive rates a report shows: 0.1%, 1%, 10%.
FPRS: tuple[float, ...] = (1e-3, 1e-2, 1e-1)

#: Epsilons in the grid the TPR bound is minimised over (module docstring: accuracy).
GRID_POINTS = 2000
#: The grid ends where the profile is this close to its floor.
GRID_DELTA = 1e-12
#: The largest epsilon tried: exp(eps) stays finite in every formula below.
EPS_CAP = 500.0
_PROBE = np.concatenate([[0.0], np.geomspace(1e-4, EPS_CAP, 122)])

#: prv-accountant's errors for a profile: Thm. 5.5's epsilon shift and additive delta.
PRV_EPS_ERROR = 0.03
PRV_DELTA_ERROR = 1e-9

SOURCES = {
    "pld": "pld trade-off curve",
    "prv": "prv privacy profile",
    "rdp": "rdp privacy profile",
}
POINT_SOURCE = "(epsilon, delta) point"

# Elements per block of the (epsilons x FPRs) and (epsilons x participation counts) matrices.
_BLOCK = 1 << 22

DeltaAt = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class AttackBound:
    """Upper bounds on a membership-inference attacker's TPR at each FPR, and how they were had."""

    fprs: tuple[float, ...]
    tprs: tuple[float, ...]  # upper bound on the attacker's TPR at each FPR, in [fpr, 1]
    # How: "pld trade-off curve", "prv privacy profile", "rdp privacy profile" (SOURCES), or
    # "(epsilon, delta) point" (POINT_SOURCE) where the accountant gave no profile of the event.
    source: str

    def as_dict(self) -> dict:
        return {"fpr": list(self.fprs), "tpr": list(self.tprs), "source": self.source}


# --- From (epsilon, delta) to TPR -----------------------------------------------------------


def _fpr_array(fprs: Iterable[float] | np.ndarray) -> np.ndarray:
    a = np.atleast_1d(np.asarray(fprs, dtype=float))
    if a.ndim != 1 or a.size == 0 or not np.all((a >= 0) & (a <= 1)):
        raise InvalidParameter("false-positive rates must be a non-empty list of numbers in [0, 1]")
    return a


def tpr_from_dp(epsilon: float, delta: float, fprs: Iterable[float] | np.ndarray) -> np.ndarray:
    """The largest TPR at each FPR a test can have against an (epsilon, delta)-DP mechanism:
    min(1, e^eps a + delta, 1 - e^-eps (1 - delta - a)) (Kairouz, Oh, Viswanath 2015, Thm. 2.1).

    Both inequalities are needed: add-or-remove DP bounds the test in both orders of the pair.
    epsilon = inf gives 1.
    """
    a = _fpr_array(fprs)
    if not (epsilon >= 0 and 0 <= delta <= 1):  # also refuses NaN
        raise InvalidParameter(f"need epsilon >= 0 and delta in [0, 1], got ({epsilon}, {delta})")
    if math.isinf(epsilon):
        return np.ones_like(a)
    return tpr_from_profile(np.array([epsilon]), np.array([delta]), a)


def tpr_from_profile(
    epsilons: np.ndarray, deltas: np.ndarray, fprs: Iterable[float] | np.ndarray
) -> np.ndarray:
    """The minimum over the pairs (epsilons[i], deltas[i]) of `tpr_from_dp`, at each FPR.

    Each pair is a valid guarantee, so the minimum is one (Dong, Roth, Su 2019, Prop. 2.12: with
    the whole profile it is the trade-off curve). Vectorised over pairs and FPRs, in blocks.
    """
    a = _fpr_array(fprs)
    eps = np.asarray(epsilons, dtype=float).ravel()
    dlt = np.asarray(deltas, dtype=float).ravel()
    if eps.shape != dlt.shape or eps.size == 0:
        raise InvalidParameter("epsilons and deltas must be non-empty and of the same length")
    if np.any(np.isnan(eps)) or np.any(eps < 0) or np.any(np.isnan(dlt)) or np.any(dlt < 0):
        raise InvalidParameter("epsilons and deltas must be >= 0")
    finite = np.isfinite(eps)
    eps, dlt = eps[finite], np.minimum(dlt[finite], 1.0)  # epsilon = inf bounds nothing
    out = np.ones_like(a)
    if eps.size == 0:
        return out
    grow, shrink = np.exp(np.minimum(eps, 700.0))[:, None], np.exp(-eps)[:, None]
    step = max(1, _BLOCK // eps.size)
    for start in range(0, a.size, step):
        block = a[None, start : start + step]
        with np.errstate(over="ignore", invalid="ignore"):
            tpr = np.minimum(grow * block + dlt[:, None], 1.0 - shrink * (1.0 - dlt[:, None] - block))
        out[start : start + step] = np.min(tpr, axis=0)
    # Each pair's bound is >= a mathematically (a + delta, a + delta + ...); rounding aside.
    return np.clip(out, a, 1.0)


def gaussian_tpr(mu: float, fprs: Iterable[float] | np.ndarray) -> np.ndarray:
    """The trade-off of mu-GDP as a TPR bound: Phi(Phi^-1(a) + mu) = 1 - G_mu(a), with
    G_mu(a) = Phi(Phi^-1(1 - a) - mu) the trade-off between N(0, 1) and N(mu, 1) that defines
    mu-GDP (Dong, Roth, Su 2019). Exact for the plain Gaussian mechanism with sensitivity / noise
    mu (`steps` compositions at multiplier sigma: mu = sqrt(steps) / sigma).
    """
    a = _fpr_array(fprs)
    if not mu >= 0:
        raise InvalidParameter(f"mu must be >= 0, got {mu}")
    if math.isinf(mu):
        return np.ones_like(a)
    return np.clip(ndtr(ndtri(a) + mu), a, 1.0)


# --- Privacy profiles by accountant ---------------------------------------------------------


def privacy_profile(
    event: Event,
    accountant: str,
    epsilons: np.ndarray,
    *,
    conversion: str = "improved",
    orders: OrdersSpec = "default",
    group_method: str = "rdp",
) -> np.ndarray:
    """An upper bound on delta(eps) at each of `epsilons` (finite, >= 0) for `event`, by the named
    accountant, under add-or-remove adjacency (the larger of the two directions).

    Raises InvalidParameter when the accountant gives no profile of the event (the reason says
    why: an event it does not account, or one of its own limits).
    """
    eps = np.asarray(epsilons, dtype=float)
    if eps.ndim != 1 or not np.all(np.isfinite(eps) & (eps >= 0)):
        raise InvalidParameter("epsilons must be a list of finite numbers >= 0")
    name = accountant_named(accountant).name
    parts = _components(event, name, conversion, _orders(name, orders), group_method)
    out = np.zeros(eps.size)
    for delta_at in parts:  # one silo, split or direction at a time (each may be a large PLD)
        out = np.maximum(out, delta_at(eps))
    return np.clip(out, 0.0, 1.0)


def attack_bound(
    event: Event,
    accountant: str,
    fprs: Iterable[float] | np.ndarray = FPRS,
    *,
    conversion: str = "improved",
    orders: OrdersSpec = "default",
    group_method: str = "rdp",
    epsilon: float | None = None,
    delta: float | None = None,
) -> AttackBound:
    """Upper bounds on the TPR of any membership-inference attack on `event` at each FPR, from
    the named accountant's privacy profile (`tpr_from_profile` over the module's epsilon grid).

    When the accountant gives no profile of the event, the (epsilon, delta) it was accounted at
    is used instead (`tpr_from_dp`, source "(epsilon, delta) point"); InvalidParameter when
    that is not given either.
    """
    a = _fpr_array(fprs)
    tprs, source = _bound(event, accountant, a, conversion, orders, group_method, epsilon, delta)
    return AttackBound(tuple(float(x) for x in a), tuple(float(t) for t in tprs), source)


def roc_bound(
    event: Event,
    accountant: str,
    fprs: Iterable[float] | np.ndarray,
    *,
    conversion: str = "improved",
    orders: OrdersSpec = "default",
    group_method: str = "rdp",
    epsilon: float | None = None,
    delta: float | None = None,
) -> np.ndarray:
    """`attack_bound`'s TPRs at many FPRs (an ROC curve's upper bound); the profile is computed
    once per event and options and reused (`attack_bound` then `roc_bound` cost one)."""
    a = _fpr_array(fprs)
    return _bound(event, accountant, a, conversion, orders, group_method, epsilon, delta)[0]


def _bound(
    event: Event,
    accountant: str,
    fprs: np.ndarray,
    conversion: str,
    orders: OrdersSpec,
    group_method: str,
    epsilon: float | None,
    delta: float | None,
) -> tuple[np.ndarray, str]:
    name = accountant_named(accountant).name
    _check_options(name, event, conversion, group_method)
    try:
        # With the delta a guarantee was accounted at, prv's profile takes `prv_epsilon`'s errors,
        # so it is the same composition (remembered, prv.silo_composition), built once.
        errors = (DEFAULT_EPS_ERROR, delta / 1000) if delta is not None else (PRV_EPS_ERROR, PRV_DELTA_ERROR)
        eps, deltas = _grid_profile(event, name, conversion, _orders(name, orders), group_method, errors)
    except InvalidParameter:
        if epsilon is None or delta is None:
            raise
        # The accountant bounded epsilon at delta but gives no curve: that point still holds.
        return tpr_from_dp(epsilon, delta, fprs), POINT_SOURCE
    return tpr_from_profile(eps, deltas, fprs), SOURCES[name]


def _orders(accountant: str, orders: OrdersSpec) -> Orders:
    """The order set, parsed (and refused when wrong) for rdp; the tight accountants ignore it."""
    return Orders.parse(orders if accountant == "rdp" else "default")


def _check_options(accountant: str, event: Event, conversion: str, group_method: str) -> None:
    """The RDP options are refused when wrong even where a point would be used instead."""
    if accountant != "rdp":
        return  # the tight accountants ignore them, as `registry.account_event` does
    if conversion not in CONVERSIONS:
        raise InvalidParameter(f"conversion must be one of {', '.join(CONVERSIONS)}, got {conversion!r}")
    if isinstance(event, Group) and group_method not in RDP_GROUP_METHODS:
        raise InvalidParameter(
            f"the rdp accountant's group method must be one of {', '.join(RDP_GROUP_METHODS)}, "
            f"got {group_method!r}"
        )


def _grid_profile(
    event: Event,
    accountant: str,
    conversion: str,
    orders: Orders,
    group_method: str,
    prv_errors: tuple[float, float] = (PRV_EPS_ERROR, PRV_DELTA_ERROR),
) -> tuple[np.ndarray, np.ndarray]:
    """(epsilons, deltas): the profile on the epsilon grid, remembered per event and options (a
    report asks for the three FPRs, then the ROC curve, of the same event)."""
    if accountant != "rdp":
        conversion, orders, group_method = "improved", Orders.parse("default"), "rdp"  # unused
    elif not isinstance(event, Group):
        group_method = "rdp"
    if accountant != "prv":
        prv_errors = (PRV_EPS_ERROR, PRV_DELTA_ERROR)  # unused
    try:
        hash((event, orders))
    except TypeError:  # e.g. a Composed given a list: computed, not remembered
        return _grid_profile_uncached(event, accountant, conversion, orders, group_method, prv_errors)
    return _grid_profile_cached(event, accountant, conversion, orders, group_method, prv_errors)


def _grid_profile_uncached(
    event: Event,
    accountant: str,
    conversion: str,
    orders: Orders,
    group_method: str,
    prv_errors: tuple[float, float] = (PRV_EPS_ERROR, PRV_DELTA_ERROR),
) -> tuple[np.ndarray, np.ndarray]:
    parts = list(map(_table, _components(event, accountant, conversion, orders, group_method, prv_errors)))
    if not parts:  # nothing is released: delta is 0 at every epsilon
        return np.zeros(1), np.zeros(1)
    if len(parts) == 1:
        eps, deltas, _ = parts[0]
    else:
        eps = np.linspace(0.0, max(top for _, _, top in parts), GRID_POINTS)
        gamma = np.exp(eps)
        # Linear interpolation in e^eps bounds each convex delta(e^eps) from above.
        deltas = np.max([np.interp(gamma, np.exp(e), d) for e, d, _ in parts], axis=0)
    eps, deltas = eps.copy(), np.clip(deltas, 0.0, 1.0)
    eps.flags.writeable = deltas.flags.writeable = False  # shared through the cache
    return eps, deltas


_grid_profile_cached = lru_cache(maxsize=32)(_grid_profile_uncached)


def _table(delta_at: DeltaAt) -> tuple[np.ndarray, np.ndarray, float]:
    """One profile on GRID_POINTS epsilons from 0 to where it is within GRID_DELTA of its floor,
    then the probe's larger epsilons (for interpolation); and that top epsilon."""
    probe = delta_at(_PROBE)
    floor = probe[-1]  # delta at EPS_CAP: what no epsilon goes below (a truncated tail, delta_error)
    reached = np.flatnonzero(probe <= floor + GRID_DELTA)
    top = float(_PROBE[max(int(reached[0]), 1)]) if reached.size else EPS_CAP
    grid = np.linspace(0.0, top, GRID_POINTS)
    beyond = _PROBE > top
    return np.concatenate([grid, _PROBE[beyond]]), np.concatenate([delta_at(grid), probe[beyond]]), top


def _components(
    event: Event,
    accountant: str,
    conversion: str,
    orders: Orders,
    group_method: str,
    prv_errors: tuple[float, float] = (PRV_EPS_ERROR, PRV_DELTA_ERROR),
) -> Iterable[DeltaAt]:
    """Profiles whose maximum bounds the event's: one for rdp and for known participation, one
    per silo, split or direction for pld and prv (lazily: each may hold a large PLD or PRV)."""
    chosen = accountant_named(accountant)
    reason = chosen.supports(event)
    if reason is not None:
        raise InvalidParameter(f"the {chosen.name} accountant does not account {describe(event)}: {reason}")
    _check_options(chosen.name, event, conversion, group_method)
    if chosen.name == "rdp":
        return [_rdp_profile(event, conversion, orders, group_method)]
    if isinstance(event, KnownParticipation):
        return [_known_participation_profile(event)]
    if chosen.name == "pld":
        return _pld_profiles(event)
    return _prv_profiles(event, *prv_errors)


# --- rdp --------------------------------------------------------------------------------------


def _rdp_log_delta(
    orders: np.ndarray, rdp: np.ndarray, eps: np.ndarray, conversion: str
) -> tuple[np.ndarray, np.ndarray]:
    """log delta(eps) by the conversion at the best order, and the index of that order.

    Lemma 2 (improved) solved for delta: log delta = (a - 1)(rho - eps + log(1 - 1/a)) - log a;
    classic (Mironov 2017, Prop. 3): log delta = (a - 1)(rho - eps). Then the total-variation
    rule: delta(eps) <= delta(0) = TV <= sqrt(1 - e^-rho) for rho at any order (KL <= rho).
    """
    a, r = orders[None, :], rdp[None, :]
    e = eps[:, None]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if conversion == "improved":
            log_delta = (a - 1.0) * (r - e + np.log1p(-1.0 / a)) - np.log(a)
        else:
            log_delta = (a - 1.0) * (r - e)
        log_delta = np.where(np.isnan(log_delta), np.inf, log_delta)
        rho_min = np.min(np.where(np.isnan(rdp), np.inf, rdp))
        tv = 0.5 * np.log(-np.expm1(-rho_min))
    best = np.argmin(log_delta, axis=1)
    value = np.take_along_axis(log_delta, best[:, None], axis=1)[:, 0]
    return np.minimum(np.minimum(value, tv), 0.0), best


class _RdpCurve:
    """log delta(eps) of one RDP curve (`rdp_at`: rho at given orders) over an order set's
    stages: the larger orders only when the best order of the first stage is its largest at some
    epsilon whose delta is above GRID_DELTA (as `Orders.best` does for epsilon at one delta; any
    order gives a valid bound, so stopping early can only cost tightness)."""

    def __init__(
        self, rdp_at: Callable[[np.ndarray], np.ndarray], stages: Sequence[np.ndarray], conversion: str
    ) -> None:
        self.rdp_at, self.stages, self.conversion = rdp_at, list(stages), conversion
        self.stage = 0
        self.rdp = rdp_at(self.stages[0])

    def log_delta(self, eps: np.ndarray) -> np.ndarray:
        while True:
            orders = self.stages[self.stage]
            value, best = _rdp_log_delta(orders, self.rdp, eps, self.conversion)
            edge = (best == orders.size - 1) & (value > math.log(GRID_DELTA))
            if self.stage + 1 == len(self.stages) or not edge.any():
                return value
            self.stage += 1
            self.rdp = self.rdp_at(self.stages[self.stage])


def _rdp_profile(event: Event, conversion: str, orders: Orders, group_method: str) -> DeltaAt:
    """The RDP accountant's profile of `event` (module docstring), as a vectorised function."""
    if not isinstance(event, Group):
        curve = _RdpCurve(lambda grid: event_rdp(event, grid), orders.stages(), conversion)
        return lambda eps: np.exp(curve.log_delta(eps))
    record = RdpProfile(event.event)
    k = event.k
    if group_method == "rdp":
        # Lemma 6 (Mironov 2017, Prop. 2): (alpha, rho)-RDP gives (alpha / 2^c, 3^c rho)-RDP for
        # groups of 2^c >= k records, at the group orders `group.rdp_group` uses.
        c = doubling_exponent(k)
        base, beta = lemma6_orders(orders, c)
        if base.size == 0:  # no order >= 2^(c+1): the accountant's epsilon is infinite too
            return lambda eps: np.ones(np.shape(eps))
        group = _RdpCurve(lambda stage: 3.0**c * record.at(stage * 2**c), orders.stages(beta), conversion)
        return lambda eps: np.exp(group.log_delta(eps))
    # Lemma 5 (Kasiviswanathan & Smith): the record-level pair (e, delta(e)) gives the group
    # pair (k e, k e^((k-1) e) delta(e)); at group epsilon E, e = E / k.
    curve = _RdpCurve(record.at, orders.stages(), conversion)

    def group_delta(eps: np.ndarray) -> np.ndarray:
        e = np.asarray(eps, dtype=float) / k
        return np.exp(np.minimum(math.log(k) + (k - 1) * e + curve.log_delta(e), 0.0))

    return group_delta


# --- known participation (pld, prv) ------------------------------------------------------------


def _known_participation_profile(event: KnownParticipation) -> DeltaAt:
    """The exact profile E_K[delta_Gauss(eps; sqrt(K) / sigma)], K ~ Binomial(rounds, q)
    (`participation.known_participation_delta`), at many epsilons at once.

    As there, the upper tail of K beyond mass TAIL_MASS counts with delta 1; the lower tail is
    counted at the smallest K kept (delta grows with K), so the bound is never lower.
    """
    from scipy.stats import binom  # scipy.stats costs 0.4 s of start-up; only this path needs it

    n, q = event.rounds, event.q
    low, top = participation_range(n, q)
    ks = np.arange(low, top + 1)
    weights = binom.pmf(ks, n, q)
    if low > 0:
        weights[0] += float(binom.cdf(low - 1, n, q))
    tail = float(binom.sf(top, n, q))
    mus = np.sqrt(ks) / event.sigma

    def delta_at(eps: np.ndarray) -> np.ndarray:
        eps = np.asarray(eps, dtype=float)
        out = np.empty(eps.size)
        step = max(1, _BLOCK // ks.size)
        for start in range(0, eps.size, step):
            block = cast(Any, eps[start : start + step, None])  # gaussian_delta broadcasts
            out[start : start + step] = gaussian_delta(block, mus) @ weights
        return np.minimum(out + tail, 1.0)

    return delta_at


# --- pld ----------------------------------------------------------------------------------------


def _undominated(silos: Sequence[SubsampledGaussian]) -> tuple[SubsampledGaussian, ...]:
    """The distinct silos with steps that no other silo dominates (module docstring): the record-
    level profile is the maximum over these alone."""
    distinct = list(dict.fromkeys(s for s in silos if s.steps > 0))

    def dominated(s: SubsampledGaussian) -> bool:
        return any(o != s and o.sigma <= s.sigma and o.q >= s.q and o.steps >= s.steps for o in distinct)

    return tuple(s for s in distinct if not dominated(s))


def _pld_profiles(event: Event) -> Iterable[DeltaAt]:
    from ..tight.pld import pld_distribution_composed, pld_distributions

    if isinstance(event, Composed):
        plds: Iterable[Any] = [pld_distribution_composed(cast(tuple[SubsampledGaussian, ...], event.events))]
    elif isinstance(event, Group) and isinstance(event.event, Composed):
        parts = cast(tuple[SubsampledGaussian, ...], event.event.events)
        plds = [pld_distribution_composed(parts, k=event.k)]
    elif isinstance(event, Group):
        plds = pld_distributions(cast(SubsampledGaussian | ParallelSilos, event.event), k=event.k)
    else:
        silos = silos_of(cast(SubsampledGaussian | ParallelSilos, event))
        check_tight_sigma(silos, "pld")  # the same refusals as `pld_epsilon`
        kept = _undominated(silos)
        plds = pld_distributions(ParallelSilos(kept)) if kept else []
    return (_pld_delta(pld) for pld in plds if pld is not None)


def _pld_delta(pld: Any) -> DeltaAt:
    """dp-accounting's `get_delta_for_epsilon` of a PrivacyLossDistribution (the larger of its
    two directions), vectorised with numpy.

    dp-accounting's own vectorised version walks the loss grid in a Python loop (0.3 s for the
    160,000 points of the Fig. 2 PLD, per direction); the same sums as suffix sums:
    delta(eps) = inf_mass + sum_{loss > eps} p - e^eps sum_{loss > eps} p e^-loss.
    """
    pmfs = [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]
    tables = [_pmf_table(pmf) for pmf in pmfs]

    def delta_at(eps: np.ndarray) -> np.ndarray:
        eps = np.asarray(eps, dtype=float)
        out = np.zeros(eps.size)
        for losses, upper, lower in tables:
            i = np.searchsorted(losses, eps, side="right")  # the first loss > eps
            with np.errstate(over="ignore", invalid="ignore"):
                value = upper[i] - np.exp(eps) * lower[i]
            # No loss above eps: the infinite mass alone; e^eps overflowing: the sum of the
            # masses above eps, which bounds delta there from above.
            out = np.maximum(out, np.where((lower[i] > 0) & (eps < 700.0), value, upper[i]))
        return np.clip(out, 0.0, 1.0)

    return delta_at


def _pmf_table(pmf: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(losses, inf_mass + suffix sums of p, suffix sums of p e^-loss) of a PLD PMF, summed from
    the largest loss down as dp-accounting does (small tail terms first)."""
    dense = pmf.to_dense_pmf()
    probs = np.asarray(dense._probs, dtype=float)
    losses = (np.arange(probs.size) + dense._lower_loss) * dense._discretization
    upper = np.append(np.cumsum(probs[::-1])[::-1], 0.0) + dense._infinity_mass
    lower = np.append(np.cumsum((probs * np.exp(-losses))[::-1])[::-1], 0.0)
    return losses, upper, lower


# --- prv ----------------------------------------------------------------------------------------


def _prv_profiles(event: Event, eps_error: float, delta_error: float) -> Iterable[DeltaAt]:
    from ..tight.prv import silo_composition

    silos = silos_of(cast(SubsampledGaussian | ParallelSilos, event))
    check_tight_sigma(silos, "prv")  # the same refusals as `prv_epsilon`
    for silo in _undominated(silos):
        for add in (False, True):
            built = silo_composition(silo, eps_error, delta_error, add)
            if built is not None:
                yield _prv_delta(*built, delta_error)


def _prv_delta(composed: Any, eps_error: float, delta_error: float) -> DeltaAt:
    """The upper bound PRVAccountant.compute_delta returns, delta_est(eps - eps_error) +
    delta_error (Gopi et al. 2021, Thm. 5.5), at many epsilons: the estimate
    (DiscretePrivacyRandomVariable.compute_delta_estimate) as suffix sums, in long double."""
    t = composed.domain.ts()
    p = np.asarray(composed.pmf, dtype=np.longdouble)
    upper = np.append(np.cumsum(p[::-1])[::-1], 0.0)
    lower = np.append(np.cumsum((p * np.exp(-t))[::-1])[::-1], 0.0)
    delta_inf = -math.expm1(float(composed.log_pmc_inf))

    def delta_at(eps: np.ndarray) -> np.ndarray:
        shifted = np.asarray(eps, dtype=float) - eps_error
        i = np.searchsorted(t, shifted, side="left")  # the first t >= eps, as compute_delta_estimate
        with np.errstate(over="ignore", invalid="ignore"):
            finite = upper[i] - np.exp(shifted.astype(np.longdouble)) * lower[i]
        finite = np.where(lower[i] > 0, finite, upper[i]).astype(float)
        estimate = finite * (1.0 - delta_inf) + delta_inf
        return np.clip(estimate + delta_error, 0.0, 1.0)

    return delta_at
