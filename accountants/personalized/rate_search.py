"""The searches behind per-record sampling rates (rPDP-FL, slides ch. 3 III): grid, SCF, bisection.

Each finds, for budgets epsilon_j, a rate q_j with epsilon*(q_j) <= epsilon_j on the increasing
curve epsilon*(q) (`record_spend.EpsilonCurve`): the exact grid search, the slides' Algorithm 3
(Simulation-CurveFitting) with its re-accounting, and the BinarySearch baseline. What each
method means, and how its answers are reported, is in `accountants.personalized.record_rates`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from uldp.errors import InvalidParameter

from .record_spend import EpsilonCurve

#: Ratio between neighbouring rates of the exact method's grid: 0.1% resolution in q.
GRID_RATIO = 1.001
#: Size of Algorithm 3's grid Pi: rates q_cap/100, 2 q_cap/100, ..., q_cap.
SCF_POINTS = 100
#: Absolute tolerance in q of the bisection baseline.
BISECT_TOLERANCE = 1e-9
#: Halvings of the bisection at most: from a bracket of width <= 1 down to the spacing of the
#: smallest normal doubles takes at most 1022 + 53 halvings, so this never cuts a search short
#: that could still progress; it only bounds the loop for certain.
BISECT_MAX_STEPS = 1100
# SCF gives every distinct budget its own rate. Up to this many rates are re-accounted exactly
# (about 12 microseconds each, vectorised: ~1.2 s; 1e6 would take ~12-20 s on 2 cores); beyond
# that the exact grid brackets them first and only the budgets inside a bracket are re-accounted.
SCF_EXACT_CHECK_LIMIT = 100_000
# Rates per call of the curve: bounds the (rates x orders x binomial terms) work arrays.
_CHUNK = 25_000


@dataclass(frozen=True)
class FeasibleRange:
    """The budgets some usable rate can meet: [epsilon*(q_min), epsilon*(q_cap)]."""

    q_min: float
    q_cap: float
    epsilon_min: float
    epsilon_max: float


def rate_grid(q_min: float, q_cap: float, ratio: float = GRID_RATIO) -> np.ndarray:
    """Geometric rates from q_min to q_cap (both included), neighbours at most `ratio` apart."""
    _check_rates(q_min, q_cap)
    if not ratio > 1:
        raise InvalidParameter(f"grid ratio must be > 1, got {ratio}")
    if q_min == q_cap:
        return np.array([q_cap])
    n = math.ceil(math.log(q_cap / q_min) / math.log(ratio)) + 1
    qs = np.geomspace(q_min, q_cap, n)
    qs[0], qs[-1] = q_min, q_cap
    return qs


@dataclass(frozen=True)
class EpsilonTable:
    """epsilon*(q) on `rate_grid`, and its running maximum (`envelope`)."""

    qs: np.ndarray
    epsilons: np.ndarray
    envelope: np.ndarray
    monotone: bool  # whether the computed curve was already non-decreasing

    @property
    def feasible(self) -> FeasibleRange:
        return FeasibleRange(
            float(self.qs[0]), float(self.qs[-1]), float(self.epsilons[0]), float(self.epsilons[-1])
        )

    def bracket(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds on epsilon*(q) for rates in [q_min, q_cap], by monotonicity."""
        k = np.clip(np.searchsorted(self.qs, q, side="right") - 1, 0, self.qs.size - 1)
        on_grid = self.qs[k] == q
        upper = np.where(on_grid, self.epsilons[k], self.envelope[np.minimum(k + 1, self.qs.size - 1)])
        return self.epsilons[k], upper


def epsilon_table(curve: EpsilonCurve, q_min: float, q_cap: float, ratio: float = GRID_RATIO) -> EpsilonTable:
    """Tabulate `curve` on `rate_grid(q_min, q_cap, ratio)`."""
    qs = rate_grid(q_min, q_cap, ratio)
    eps = curve(qs)
    return EpsilonTable(qs, eps, np.maximum.accumulate(eps), _monotone(qs, eps))


def _monotone(qs: np.ndarray, eps: np.ndarray) -> bool:
    """Whether epsilon* is non-decreasing over these rates, the rate q = 1 aside: there the curve
    is the exact Gaussian composition (`EpsilonCurve.full_rate_epsilon`), below the RDP figures
    of the rates just under it by design, not by a numerical accident."""
    below = qs < 1.0
    return bool(np.all(np.diff(eps[below]) >= 0))


def feasible_range(curve: EpsilonCurve, q_min: float, q_cap: float) -> FeasibleRange:
    _check_rates(q_min, q_cap)
    low, high = curve(np.array([q_min, q_cap]))
    return FeasibleRange(q_min, q_cap, float(low), float(high))


# Rates evaluated first across the whole grid, to find the stretch the budgets fall in, then
# across that stretch, to bracket every budget between two of them.
_SCOUT_POINTS = 32
_GUIDE_POINTS = 128
# Rates probed around each budget's interpolated index; budgets left unsettled probe as many
# again just beyond the side they moved, then bisect what is left of their bracket.
_PROBES = np.array([0, 1])


def _exact_from_table(table: EpsilonTable, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # The largest grid rate whose (running-maximum) epsilon is within the budget; u >= its first
    # entry, so k >= 0.
    k = np.searchsorted(table.envelope, u, side="right") - 1
    return table.qs[k], table.epsilons[k]


def _exact_search(
    curve: EpsilonCurve, qs: np.ndarray, u: np.ndarray, feasible: FeasibleRange
) -> tuple[np.ndarray, np.ndarray, str, bool | None]:
    """For each sorted budget in `u`, the largest grid index whose epsilon is within it.

    Every strategy keeps the invariant epsilon(qs[lo]) <= budget, as evaluated, and returns such
    a lo, so every answer is conservative; on a monotone curve all give the whole table's
    answer (the largest such index). Whichever evaluates fewest rates is used:

    - few budgets: bisection on the grid index (about 14 evaluations each);
    - else `_SCOUT_POINTS` rates across the grid find the stretch between the lowest and the
      highest budget, and `_GUIDE_POINTS` rates across that stretch bracket every budget. Then
      either the stretch is tabulated (budgets packed closely, or very many), or each budget's
      index is guessed by quadratic interpolation of the index against log epsilon through three
      guide rates, the rates at and after the guess are probed, and the few budgets they do not
      settle probe on, then bisect inside what is left of their bracket.
    """
    n = qs.size
    lo = np.zeros(u.size, dtype=np.int64)
    hi = np.full(u.size, n - 1, dtype=np.int64)
    spent = np.full(u.size, feasible.epsilon_min)
    guided_cost = _SCOUT_POINTS + _GUIDE_POINTS + _PROBES.size * u.size
    if u.size * math.ceil(math.log2(max(n, 2))) <= guided_cost:
        _bisect_index(curve, qs, u, lo, hi, spent)
        return qs[lo], spent, "bisection on the grid index", None

    scout, eps_scout = _evaluate_between(
        curve, qs, 0, n - 1, _SCOUT_POINTS, feasible.epsilon_min, feasible.epsilon_max
    )
    envelope = np.maximum.accumulate(eps_scout)
    j = np.searchsorted(envelope, u[[0, -1]], side="right") - 1
    first, last = scout[j[0]], scout[j[1] + 1]
    if last - first <= guided_cost:  # tabulate the stretch
        eps = np.empty(last - first + 1)
        eps[1:-1] = curve(qs[first + 1 : last])
        eps[0], eps[-1] = eps_scout[j[0]], eps_scout[j[1] + 1]
        k = np.searchsorted(np.maximum.accumulate(eps), u, side="right") - 1
        monotone = _monotone(qs[first : last + 1], eps)
        return qs[first + k], eps[k], "the grid between the budgets' brackets, tabulated", monotone

    guide, eps_guide = _evaluate_between(
        curve, qs, first, last, _GUIDE_POINTS, eps_scout[j[0]], eps_scout[j[1] + 1]
    )
    envelope = np.maximum.accumulate(eps_guide)
    j = np.searchsorted(envelope, u, side="right") - 1  # guide[j] <= answer < guide[j + 1]
    lo[:], hi[:], spent[:] = guide[j], guide[j + 1], eps_guide[j]
    monotone = _monotone(qs[scout], eps_scout) and _monotone(qs[guide], eps_guide)
    start = np.floor(_interpolated_index(guide, eps_guide, j, u)).astype(np.int64)
    _probe(curve, qs, u, lo, hi, spent, start)
    unsettled = hi - lo > 1
    moved_up = lo > guide[j]
    again = np.where(moved_up, lo + 1, hi - _PROBES.size)  # just beyond the side that moved
    _probe(curve, qs, u, lo, hi, spent, again, unsettled)
    _bisect_index(curve, qs, u, lo, hi, spent)
    return qs[lo], spent, "guided probes on the grid index", monotone


def _evaluate_between(
    curve: EpsilonCurve, qs: np.ndarray, first: int, last: int, points: int, eps_first: float, eps_last: float
) -> tuple[np.ndarray, np.ndarray]:
    """epsilon at about `points` grid indices from `first` to `last`; the ends are given, so that
    every stage agrees to the last bit on what it was told."""
    index = np.unique(np.round(np.linspace(first, last, points)).astype(np.int64))
    eps = np.empty(index.size)
    eps[1:-1] = curve(qs[index[1:-1]])
    eps[0], eps[-1] = eps_first, eps_last
    return index, eps


def _probe(
    curve: EpsilonCurve,
    qs: np.ndarray,
    u: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    spent: np.ndarray,
    start: np.ndarray,
    which: np.ndarray | None = None,
) -> None:
    """Evaluate the indices start + _PROBES (inside each bracket) and tighten the brackets."""
    rows = np.flatnonzero(hi - lo > 1) if which is None else np.flatnonzero(which & (hi - lo > 1))
    if rows.size == 0:
        return
    probes = np.clip(start[rows, None] + _PROBES, lo[rows, None] + 1, hi[rows, None] - 1)
    eps = curve(qs[probes.ravel()]).reshape(probes.shape)
    fits = eps <= u[rows, None]
    candidates = np.where(fits, probes, -1)
    best = candidates.max(axis=1)
    up = best > lo[rows]
    lo[rows[up]] = best[up]
    spent[rows[up]] = eps[up, np.argmax(candidates[up], axis=1)]
    above = np.where(~fits & (probes > lo[rows, None]), probes, qs.size).min(axis=1)
    hi[rows] = np.minimum(hi[rows], above)


def _interpolated_index(guide: np.ndarray, eps_guide: np.ndarray, j: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Each budget's grid index estimated from three guide points (Lagrange in log epsilon).

    log epsilon is smooth in log q, and the grid is geometric, so the index is a smooth function
    of log epsilon; where that breaks (epsilon = 0, equal values) the bracket's midpoint is used.
    """
    first = np.clip(j - 1, 0, guide.size - 3)
    x = guide[first[:, None] + np.arange(3)].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(eps_guide[first[:, None] + np.arange(3)])
        t = np.log(u)[:, None]
        guess = np.zeros(u.size)
        for i in range(3):
            weight = np.ones(u.size)
            for m in range(3):
                if m != i:
                    weight *= (t[:, 0] - y[:, m]) / (y[:, i] - y[:, m])
            guess += weight * x[:, i]
    middle = 0.5 * (guide[j] + guide[np.minimum(j + 1, guide.size - 1)])
    return np.where(np.isfinite(guess), guess, middle)


def _bisect_index(
    curve: EpsilonCurve, qs: np.ndarray, u: np.ndarray, lo: np.ndarray, hi: np.ndarray, spent: np.ndarray
) -> None:
    """Bisection on the grid index, in place: epsilon(qs[lo]) = spent <= budget throughout."""
    while True:
        active = np.flatnonzero(hi - lo > 1)
        if active.size == 0:
            return
        mid = (lo[active] + hi[active]) // 2
        eps = curve(qs[mid])
        fits = eps <= u[active]
        lo[active[fits]], spent[active[fits]] = mid[fits], eps[fits]
        hi[active[~fits]] = mid[~fits]


def _bisect(
    curve: EpsilonCurve, u: np.ndarray, feasible: FeasibleRange, tolerance: float
) -> tuple[np.ndarray, np.ndarray]:
    """The bisection baseline (rPDP-FL's BinarySearch, slides ch. 3 III) for every budget in `u`.

    Keeps epsilon(lo) <= budget, as evaluated, so every answer is conservative (a valid upper
    bound on what the record spends). Stops when the bracket is within `tolerance`, when the
    midpoint rounds to one of its ends (no double lies between them: a tolerance below the
    spacing of doubles could never be met), or after `BISECT_MAX_STEPS` halvings, whichever
    comes first, so it always ends. Budgets whose brackets share a midpoint share its
    evaluation: every budget starts from the same [q_min, q_cap], so the early midpoints are
    the same for all of them.
    """
    lo = np.full(u.size, feasible.q_min)
    hi = np.full(u.size, feasible.q_cap)
    spent = np.full(u.size, feasible.epsilon_min)
    for _ in range(BISECT_MAX_STEPS):
        mid_all = 0.5 * (lo + hi)
        active = np.flatnonzero((hi - lo > tolerance) & (mid_all > lo) & (mid_all < hi))
        if active.size == 0:
            break
        mid = mid_all[active]
        rates, back = np.unique(mid, return_inverse=True)
        eps = _evaluate(curve, rates)[back]
        fits = eps <= u[active]
        lo[active[fits]], spent[active[fits]] = mid[fits], eps[fits]
        hi[active[~fits]] = mid[~fits]
    return lo, spent


@dataclass(frozen=True)
class ScfFit:
    """f(q) = e^{a q + b} + c fitted to epsilon* on the grid Pi (slides ch. 3 III, Algorithm 3)."""

    a: float
    b: float
    c: float
    r2: float
    qs: np.ndarray
    epsilons: np.ndarray

    def __call__(self, q: np.ndarray) -> np.ndarray:
        return np.exp(self.a * np.asarray(q) + self.b) + self.c

    def inverse(self, epsilon: np.ndarray) -> np.ndarray:
        """f^{-1}(epsilon) = (ln(epsilon - c) - b) / a; NaN where the fit never reaches epsilon."""
        with np.errstate(invalid="ignore", divide="ignore"):
            q = (np.log(np.asarray(epsilon) - self.c) - self.b) / self.a
        return np.where(np.isfinite(q), q, np.nan)


def fit_scf(curve: EpsilonCurve, q_cap: float, points: int = SCF_POINTS) -> ScfFit:
    """Algorithm 3, lines 1-7: epsilon* on Pi = {q_cap i / points}, then the least-squares fit."""
    if points < 3:
        raise InvalidParameter(f"SCF needs at least 3 grid points, got {points}")
    qs = q_cap * np.arange(1, points + 1) / points
    eps = curve(qs)
    # Start from the straight-line fit of ln(epsilon) (c = 0), then fit all three together.
    a0, b0 = np.polyfit(qs, np.log(np.maximum(eps, 1e-300)), 1)
    from scipy.optimize import curve_fit  # half a second to import; only SCF needs it

    model: Callable = lambda q, a, b, c: np.exp(a * q + b) + c  # noqa: E731
    try:
        (a, b, c), _ = curve_fit(model, qs, eps, p0=(a0, b0, 0.0), maxfev=20_000)
    except RuntimeError:  # no convergence: keep the starting fit, whose R^2 says how good it is
        a, b, c = a0, b0, 0.0
    residual = eps - model(qs, a, b, c)
    total = np.sum((eps - eps.mean()) ** 2)
    r2 = 1.0 - float(np.sum(residual**2) / total) if total > 0 else 1.0
    return ScfFit(float(a), float(b), float(c), r2, qs, eps)


def _reaccount(
    curve: EpsilonCurve,
    q: np.ndarray,
    budgets: np.ndarray,
    table: EpsilonTable | None,
    q_min: float,
    q_cap: float,
    ratio: float,
) -> tuple[np.ndarray, np.ndarray, str]:
    """epsilon*(q) of rates a method did not account, against their `budgets`: (upper, lower, how).

    Exactly (upper = lower) for up to `SCF_EXACT_CHECK_LIMIT` distinct rates. Beyond that every
    rate is bracketed on the exact grid (by monotonicity of epsilon*, `EpsilonTable.bracket`);
    a bracket wholly within or wholly above the budget settles it, and the rates of the budgets
    still inside their bracket are re-accounted exactly, up to the limit. Those left over keep
    their bracket: upper > budget >= lower, possibly over-spent.
    """
    distinct, inverse = np.unique(q, return_inverse=True)
    if distinct.size <= SCF_EXACT_CHECK_LIMIT:
        eps = _evaluate(curve, distinct)[inverse]
        return eps, eps.copy(), f"each of the {distinct.size} distinct rates re-accounted exactly"
    if table is None:
        table = epsilon_table(curve, q_min, q_cap, ratio)
    lower, upper = table.bracket(q)
    unsettled = np.flatnonzero((lower <= budgets) & (upper > budgets))
    rates, back = np.unique(q[unsettled], return_inverse=True)
    exact = rates.size <= SCF_EXACT_CHECK_LIMIT
    if not exact:  # the first rates (smallest) exactly, the rest keep their bracket
        keep = back < SCF_EXACT_CHECK_LIMIT
        unsettled, back, rates = unsettled[keep], back[keep], rates[:SCF_EXACT_CHECK_LIMIT]
    eps = _evaluate(curve, rates)[back]
    lower[unsettled] = upper[unsettled] = eps
    how = (
        f"{distinct.size} distinct rates bracketed on the exact grid (ratio {ratio:g}); the "
        f"{rates.size} whose bracket straddles the budget re-accounted exactly"
    )
    if not exact:
        how += f" (limit {SCF_EXACT_CHECK_LIMIT}; the others keep their bracket: possibly over-spent)"
    return upper, lower, how


def _evaluate(curve: EpsilonCurve, qs: np.ndarray) -> np.ndarray:
    """curve(qs) in chunks of `_CHUNK` rates (the same values, less memory and time)."""
    if qs.size == 0:
        return np.zeros(0)
    return np.concatenate([curve(qs[i : i + _CHUNK]) for i in range(0, qs.size, _CHUNK)])


def _check_rates(q_min: float, q_cap: float) -> None:
    if not 0 < q_cap <= 1:
        raise InvalidParameter(f"q cap must be in (0, 1], got {q_cap:g}")
    if not 0 < q_min <= q_cap:
        raise InvalidParameter(f"q min must be in (0, q cap = {q_cap:g}], got {q_min:g}")
