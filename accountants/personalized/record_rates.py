"""Per-record sampling probabilities from per-record budgets (rPDP-FL, slides ch. 3 III).

Every record j has a budget epsilon_j; it needs the largest q_j with epsilon*(q_j) <= epsilon_j,
where epsilon*(q) is `record_spend.EpsilonCurve` (increasing in q). Three ways, side by side:

- ``exact`` (default): epsilon*(q) evaluated exactly on a geometric grid of rates q_min ... q_cap
  with ratio <= 1.001, made non-decreasing by a running maximum (a no-op when the computed curve
  is monotone below q = 1, as it is checked to be; otherwise it only moves answers down; at
  q = 1 the curve is exact and steps down, `EpsilonCurve.full_rate_epsilon`), and each budget
  given the largest grid rate whose epsilon is within it. The epsilon reported for a record is
  the exact epsilon*(q) of the rate it gets, so it never exceeds the budget, and that rate is
  within 0.1% of the largest admissible one (the next grid rate, at most 1.001 times larger,
  already exceeds the budget). The grid is searched rather than tabulated whole (bisection on
  its index for few budgets, guided probes or the budgets' stretch of it for many; see
  `_exact_search`): the same answers as the whole table, with fewer evaluations.
- ``scf``: the slides' Algorithm 3, Simulation-CurveFitting: epsilon* on a grid Pi of rates,
  a least-squares fit f(q) = e^{a q + b} + c (R^2 reported), q_j = f^{-1}(epsilon_j), and q_cap
  for budgets >= epsilon*(q_cap). A fitted inverse is not a bound: every SCF rate is therefore
  re-accounted, and records whose true epsilon exceeds their budget are counted and marked
  ``overspent``. Up to `SCF_EXACT_CHECK_LIMIT` distinct rates are re-accounted exactly; beyond
  that each rate is first bracketed between two rates of the exact grid, which settles most
  budgets (bracket wholly below or above them), and the rest are re-accounted exactly, again up
  to the limit; any left after that are ``possibly-overspent`` ("at least N / up to M").
- ``bisect``: the published BinarySearch baseline: bisection on q for every distinct budget,
  to an absolute tolerance (1e-9 by default), keeping the side that meets the budget.

Budgets outside [epsilon*(q_min), epsilon*(q_cap)] are infeasible in one direction: below, no
usable rate meets them, and the only admissible rate is 0 (the record is never sampled, so it
spends nothing); above, even q_cap leaves budget unspent. `INFEASIBLE` says what to do with them.
A budget that sigma was calibrated to spend at q_cap (`record_spend.calibrate_sigma`, rPDP-FL's
prepare_fedrpdp) sits just above epsilon*(q_cap) only because sigma is rounded up to 4
significant digits: it is met at the cap and marked ``spent-exactly``, not infeasible.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from uldp.errors import InvalidParameter

from ..assumptions import AssumptionLines
from ..calibrate import Calibration
from .rate_search import (
    BISECT_TOLERANCE,
    GRID_RATIO,
    SCF_POINTS,
    EpsilonTable,
    FeasibleRange,
    ScfFit,  # noqa: F401  (the type of `fit_scf`'s answer, read with it)
    _bisect,
    _check_rates,
    _exact_from_table,
    _exact_search,
    _reaccount,
    feasible_range,
    fit_scf,
    rate_grid,
)
from .record_spend import EpsilonCurve

METHODS = ("exact", "scf", "bisect")

#: What happens to budgets outside the feasible range.
#: clamp: budgets above epsilon*(q_cap) get q_cap; budgets below epsilon*(q_min) get q = 0.
#: exclude: both get q = 0 (the records are left out of training).
#: fail: a ValueError naming how many there are and their range.
INFEASIBLE = ("clamp", "exclude", "fail")

#: Smallest sampling rate handed out; budgets below epsilon*(DEFAULT_Q_MIN) are infeasible.
DEFAULT_Q_MIN = 1e-6
#: A record's status, by index (`Personalization.status`). New ones go at the end, so that an
#: index keeps its meaning (the Parquet output stores indices into this tuple).
STATUSES = (
    "ok",
    "capped",
    "excluded-low",
    "excluded-high",
    "overspent",
    "possibly-overspent",
    "spent-exactly",
)
OK, CAPPED, EXCLUDED_LOW, EXCLUDED_HIGH, OVERSPENT, POSSIBLY_OVERSPENT, SPENT_EXACTLY = range(7)
#: How far above epsilon*(q_cap) a calibrated budget (`personalize`'s cap_budget) may sit: sigma
#: rounded up to 4 significant digits moves epsilon*(q_cap) by well under 1%, so a budget further
#: above was not what sigma was calibrated to spend (the calibration stopped at the edge of its
#: sigma range, say: a budget of 100 spending 28.4 is not "spent exactly").
CAP_BUDGET_RTOL = 1e-2
#: Statuses of records whose budget is inside the feasible range.
IN_RANGE = (OK, OVERSPENT, POSSIBLY_OVERSPENT, SPENT_EXACTLY)


@dataclass
class Personalization:
    """Each record's rate and the epsilon it spends, from one method.

    `spent` is an upper bound on the record's epsilon at its rate (0 for q = 0); `spent_lower`
    equals it wherever the rate was accounted exactly, and is a lower bound otherwise (SCF rates
    bracketed on the exact grid). `seconds` times the method itself; `check_seconds` the
    re-accounting of rates the method did not account (SCF).
    """

    method: str
    budgets: np.ndarray
    q: np.ndarray
    spent: np.ndarray
    spent_lower: np.ndarray
    status: np.ndarray  # indices into STATUSES
    feasible: FeasibleRange
    seconds: float
    evaluations: int
    check_seconds: float = 0.0
    details: dict = field(default_factory=dict)
    outside: Infeasible | None = None  # the budgets outside `feasible`
    distinct: int = 0  # how many different budgets there are

    @property
    def overspent(self) -> np.ndarray:
        """Records whose rate certainly spends more than their budget."""
        return self.spent_lower > self.budgets

    @property
    def possibly_overspent(self) -> np.ndarray:
        """Records whose rate may spend more than their budget: the upper bound exceeds it and
        the rate was not re-accounted exactly (SCF beyond `SCF_EXACT_CHECK_LIMIT`)."""
        return (self.spent > self.budgets) & ~self.overspent

    def summary(self) -> dict:
        """Counts, ranges, errors and timings of this method, as plain numbers."""
        inside = np.isin(self.status, IN_RANGE)
        over = self.overspent
        excess = self.spent_lower[over] - self.budgets[over]
        used = self.q > 0
        unused = self.budgets[inside] - self.spent[inside]
        return {
            "method": self.method,
            "records": int(self.budgets.size),
            "in_range": int(inside.sum()),
            "q_min": _stat(np.min, self.q[used]),
            "q_median": _stat(np.median, self.q[used]),
            "q_max": _stat(np.max, self.q[used]),
            "spent_max": _stat(np.max, self.spent),
            "spent_over_budget_mean": _stat(np.mean, self.spent[inside] / self.budgets[inside]),
            "unused_mean": _stat(np.mean, unused),
            "unused_max": _stat(np.max, unused),
            "overspent": int(over.sum()),
            "overspent_up_to": int(over.sum() + self.possibly_overspent.sum()),
            "overspend_max": _stat(np.max, excess),
            "overspend_max_relative": _stat(np.max, excess / self.budgets[over]),
            "overspent_budget_max": _stat(np.max, self.budgets[over]),
            "seconds": self.seconds,
            "check_seconds": self.check_seconds,
            "evaluations": self.evaluations,
            **self.details,
        }


@dataclass(frozen=True)
class Infeasible:
    """Budgets outside the feasible range: how many, and their range, on each side."""

    low: int
    low_range: tuple[float, float] | None
    high: int
    high_range: tuple[float, float] | None

    def message(self, feasible: FeasibleRange) -> str:
        parts = []
        if self.low:
            assert self.low_range is not None  # set whenever there are low budgets
            parts.append(
                f"{self.low} budget(s) in [{self.low_range[0]:.6g}, {self.low_range[1]:.6g}] "
                f"below epsilon*(q_min = {feasible.q_min:g}) = {feasible.epsilon_min:.6g}"
            )
        if self.high:
            assert self.high_range is not None  # set whenever there are high budgets
            parts.append(
                f"{self.high} budget(s) in [{self.high_range[0]:.6g}, {self.high_range[1]:.6g}] "
                f"above epsilon*(q_cap = {feasible.q_cap:g}) = {feasible.epsilon_max:.6g}"
            )
        return "; ".join(parts)


def infeasible_budgets(
    budgets: np.ndarray,
    feasible: FeasibleRange,
    counts: np.ndarray | None = None,
    cap_budget: float | None = None,
) -> Infeasible:
    """The budgets outside `feasible`; `counts` gives each budget's multiplicity (default 1).

    Budgets up to `cap_budget`, the one sigma was calibrated to spend at q_cap, are met there
    and so are not above the range (see `personalize`)."""
    counts = np.ones(budgets.size, dtype=np.int64) if counts is None else counts
    low = budgets < feasible.epsilon_min
    high = budgets > _ceiling(feasible, cap_budget)
    return Infeasible(
        int(counts[low].sum()), _range(budgets[low]), int(counts[high].sum()), _range(budgets[high])
    )


def check_budgets(budgets: np.ndarray) -> np.ndarray:
    """`budgets` as a float array; a ValueError names the first that is not a finite number >= 0."""
    budgets = np.asarray(budgets, dtype=float)
    if budgets.ndim != 1 or budgets.size == 0:
        raise InvalidParameter("budgets must be a non-empty list of numbers")
    bad = np.flatnonzero(~(np.isfinite(budgets) & (budgets >= 0)))
    if bad.size:
        raise InvalidParameter(
            f"budget {budgets[bad[0]]!r} (record {bad[0]}) is not a finite number >= 0"
            + (f"; {bad.size} such budgets" if bad.size > 1 else "")
        )
    return budgets


def personalize(
    budgets: np.ndarray,
    curve: EpsilonCurve,
    *,
    method: str = "exact",
    q_min: float = DEFAULT_Q_MIN,
    q_cap: float = 1.0,
    infeasible: str = "clamp",
    tolerance: float = BISECT_TOLERANCE,
    scf_points: int = SCF_POINTS,
    grid_ratio: float = GRID_RATIO,
    table: EpsilonTable | None = None,
    cap_budget: float | None = None,
) -> Personalization:
    """Every record's sampling rate under `method` (see the module docstring).

    `table` may pass an `epsilon_table` of the same curve and rates, already computed (the
    exact method then reuses it; SCF brackets with it). `cap_budget` is the budget sigma was
    calibrated to spend at q_cap (`record_spend.calibrate_sigma` or
    `user_rates.calibrate_user_sigma`, which guarantee epsilon*(q_cap) <= it): budgets from
    epsilon*(q_cap) up to it get q_cap, spend epsilon*(q_cap) (never more than their budget) and
    are ``spent-exactly``, not ``capped`` outside the feasible range. It must lie in
    [epsilon*(q_cap), epsilon*(q_cap) (1 + `CAP_BUDGET_RTOL`)], else InvalidParameter.
    """
    if method not in METHODS:
        raise InvalidParameter(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if infeasible not in INFEASIBLE:
        raise InvalidParameter(f"infeasible must be one of {', '.join(INFEASIBLE)}, got {infeasible!r}")
    if not tolerance > 0:
        raise InvalidParameter(f"tolerance must be > 0, got {tolerance}")
    budgets = check_budgets(budgets)
    _check_rates(q_min, q_cap)
    if method == "scf":  # half a second to import: load it before the clock starts
        import scipy.optimize  # noqa: F401
    start, evaluations = time.perf_counter(), curve.evaluations
    qs = rate_grid(q_min, q_cap, grid_ratio)
    # Everything is worked out once per distinct budget, then spread to the records.
    distinct, record_of = np.unique(budgets, return_inverse=True)
    feasible = table.feasible if table is not None else feasible_range(curve, q_min, q_cap)

    if cap_budget is not None and not cap_budget >= feasible.epsilon_max:
        # A calibration never leaves epsilon*(q_cap) above its budget: a budget it does leave
        # there belongs to another run (another sigma, q_cap or curve) and says nothing here.
        raise InvalidParameter(
            f"cap budget {cap_budget:g} is below epsilon*(q_cap) = {feasible.epsilon_max:.6g}: "
            "sigma was not calibrated to it"
        )
    if cap_budget is not None and cap_budget > feasible.epsilon_max * (1 + CAP_BUDGET_RTOL):
        # Nor does it leave epsilon*(q_cap) far below it, but where its sigma range ends: such a
        # budget is left unspent at q_cap (capped), not spent exactly.
        raise InvalidParameter(
            f"cap budget {cap_budget:g} is more than {CAP_BUDGET_RTOL:.0%} above epsilon*(q_cap) = "
            f"{feasible.epsilon_max:.6g}: sigma was not calibrated to spend it"
        )
    off = infeasible_budgets(distinct, feasible, np.bincount(record_of), cap_budget)
    if infeasible == "fail" and (off.low or off.high):
        raise InvalidParameter(
            f"infeasible budgets: {off.message(feasible)}; use --infeasible clamp "
            "or exclude, or change sigma / --q-min / --q-cap"
        )
    low = distinct < feasible.epsilon_min
    at_cap = distinct >= feasible.epsilon_max
    inside = ~low & ~at_cap
    u = distinct[inside]

    details: dict = {}
    check_seconds = 0.0
    if method == "exact":
        monotone: bool | None
        if table is not None:
            q_u, spent_u = _exact_from_table(table, u)
            search, monotone = "the whole grid, tabulated", table.monotone
        else:
            q_u, spent_u, search, monotone = _exact_search(curve, qs, u, feasible)
        lower_u = spent_u
        details = {"grid_points": int(qs.size), "grid_ratio": grid_ratio, "search": search}
        if monotone is not None:
            details["monotone"] = monotone
    elif method == "bisect":
        q_u, spent_u = _bisect(curve, u, feasible, tolerance)
        lower_u = spent_u
        details = {"tolerance": tolerance}
    else:
        fit = fit_scf(curve, q_cap, scf_points)
        # Where the fit never comes down to a budget (budget <= c), f^{-1} has no value: the
        # smallest usable rate, which is within every budget in range.
        q_u = np.clip(np.nan_to_num(fit.inverse(u), nan=q_min), q_min, q_cap)
        check_start = time.perf_counter()
        spent_u, lower_u, how = _reaccount(curve, q_u, u, table, q_min, q_cap, grid_ratio)
        check_seconds = time.perf_counter() - check_start
        details = {
            "r2": fit.r2,
            "fit_a": fit.a,
            "fit_b": fit.b,
            "fit_c": fit.c,
            "scf_points": scf_points,
            "check": how,
        }

    q, spent, lower = np.zeros(distinct.size), np.zeros(distinct.size), np.zeros(distinct.size)
    q[inside], spent[inside], lower[inside] = q_u, spent_u, lower_u
    q[at_cap], spent[at_cap], lower[at_cap] = q_cap, feasible.epsilon_max, feasible.epsilon_max
    status = np.zeros(distinct.size, dtype=np.uint8)
    high = distinct > _ceiling(feasible, cap_budget)
    # Above epsilon*(q_cap) yet not high: met at the cap by the calibration (`cap_budget`).
    status[distinct > feasible.epsilon_max] = SPENT_EXACTLY
    status[high] = CAPPED
    status[low] = EXCLUDED_LOW
    status[lower > distinct] = OVERSPENT  # only SCF rates can; capped budgets never do
    status[(spent > distinct) & (lower <= distinct)] = POSSIBLY_OVERSPENT
    if infeasible == "exclude":
        q[high] = spent[high] = lower[high] = 0.0
        status[high] = EXCLUDED_HIGH
    q, spent, lower, status = q[record_of], spent[record_of], lower[record_of], status[record_of]
    seconds = time.perf_counter() - start - check_seconds
    return Personalization(
        method,
        budgets,
        q,
        spent,
        lower,
        status,
        feasible,
        seconds,
        curve.evaluations - evaluations,
        check_seconds,
        details,
        off,
        int(distinct.size),
    )


def personalization_assumptions(
    result: Personalization,
    curve: EpsilonCurve,
    budgets_source: str,
    sigma: float,
    calibration: Calibration | None = None,
    unit: str = "records",
) -> AssumptionLines:
    """What `result`'s rates and epsilons rest on, in the order `uldp personalize` prints them.

    `budgets_source` says where the budgets came from; `curve` is epsilon*(q) of the run (its
    own assumptions: mechanism, threat model, conversion); `calibration`, when sigma was
    calibrated to the largest budget at q_cap; `unit` names whom the budgets belong to
    ("records", or "users" at the user level).
    """
    feasible = result.feasible
    lines = [
        (
            "budgets",
            f"{budgets_source} ({result.budgets.size} {unit}, "
            f"{result.distinct} distinct, "
            f"{result.budgets.min():.4g}..{result.budgets.max():.4g})",
        ),
        *curve.assumptions().items(),
    ]
    if calibration is not None:
        largest = float(result.budgets.max())
        spent = (
            "so that budget is spent exactly at q_cap (up to sigma's rounding to 4 significant digits)"
            if largest <= calibration.epsilon * (1 + CAP_BUDGET_RTOL)
            else "the smallest sigma of the search range, so q_cap leaves that budget unspent (capped)"
        )
        lines.append(
            (
                "sigma",
                f"{sigma:g}, calibrated: epsilon*(q_cap = {feasible.q_cap:g}) = "
                f"{calibration.epsilon:.6g} <= largest budget {largest:.6g}, {spent}",
            )
        )
    lines.append(
        (
            "feasible",
            f"q in [{feasible.q_min:g}, {feasible.q_cap:g}] gives epsilon in "
            f"[{feasible.epsilon_min:.6g}, {feasible.epsilon_max:.6g}]",
        )
    )
    lines.append(("method", _method_text(result)))
    return AssumptionLines(tuple(lines))


def _method_text(result: Personalization) -> str:
    if result.method == "exact":
        return (
            "exact: largest rate on a geometric grid (ratio 1.001) with epsilon*(q) <= budget; "
            "epsilon spent is epsilon*(q) of the rate handed out"
        )
    if result.method == "bisect":
        return f"bisect: bisection on q to {result.details['tolerance']:g} per distinct budget"
    return (
        "scf: Simulation-CurveFitting (Algorithm 3), fit e^(aq+b)+c on "
        f"{result.details['scf_points']} rates; rates re-accounted: {result.details['check']}"
    )


def _ceiling(feasible: FeasibleRange, cap_budget: float | None) -> float:
    """The largest budget met at q_cap: epsilon*(q_cap), or the budget sigma was calibrated to."""
    return feasible.epsilon_max if cap_budget is None else max(feasible.epsilon_max, cap_budget)


def _range(values: np.ndarray) -> tuple[float, float] | None:
    return (float(values.min()), float(values.max())) if values.size else None


def _stat(fn: Callable, values: np.ndarray) -> float | None:
    return float(fn(values)) if values.size else None
