"""Inverse accounting: the smallest noise, the most steps, or the largest rate that meet a budget.

Like dp-accounting's `mechanism_calibration`, this inverts any accounting function by search,
so every accountant, group method and algorithm preset is calibrated the same way; unlike it,
the answer is always taken from the side that meets the budget and is re-accounted, so the
reported epsilon is the guarantee of the returned setting, never an interpolation.
Epsilon falls with the noise multiplier and grows with the number of steps (both are
post-processing / composition facts) and with the sampling rate (sampling at q is sampling at
q' >= q then sub-sampling), which is what makes a bisection correct here.

`calibrate` searches any one scalar of any accounting function; `calibrate_event` any scalar of
any event against any accountant of the registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uldp.errors import InvalidParameter, UnreachableBudget

from .events import Event

SIGMA_RANGE = (0.05, 1e4)
MAX_STEPS = 10**9
#: The smallest sampling rate `calibrate_rate` looks at.
MIN_RATE = 1e-12
#: The scalars `calibrate` can search: how epsilon moves with each.
SCALARS = {
    "sigma": "continuous, epsilon decreasing",
    "steps": "integer, epsilon increasing",
    "rounds": "integer, epsilon increasing",
    "q": "continuous in (0, 1], epsilon increasing",
}


class NoStepFits(UnreachableBudget):
    """Even one step spends more than the budget."""


@dataclass(frozen=True)
class Calibration:
    value: float  # the sigma found, or the number of steps
    epsilon: float  # the re-accounted epsilon of that setting (<= the budget)
    evaluations: int


def calibrate(
    epsilon_of: Callable[[float], float], budget: float, scalar: str = "sigma", **search
) -> Calibration:
    """The value of `scalar` that meets `budget` with the least privacy cost left on the table.

    sigma: the smallest noise multiplier (`calibrate_sigma`); steps or rounds: the largest count
    (`calibrate_steps`); q: the largest sampling rate (`calibrate_rate`). In every case the
    returned value is re-accounted and its epsilon is at most `budget`: never overshooting.
    `search` goes to the search (tolerance, range, start, progress).
    """
    if scalar == "sigma":
        return calibrate_sigma(epsilon_of, budget, **search)
    if scalar in ("steps", "rounds"):
        return calibrate_steps(epsilon_of, budget, **search)
    if scalar == "q":
        return calibrate_rate(epsilon_of, budget, **search)
    raise InvalidParameter(f"can calibrate one of {', '.join(SCALARS)}, got {scalar!r}")


def calibrate_event(
    build: Callable[[Any], Event],
    budget: float,
    delta: float,
    scalar: str = "sigma",
    *,
    accountant: str = "rdp",
    search: dict | None = None,
    **options,
) -> Calibration:
    """`calibrate` over the events `build(value)` accounted by `accountant` at `delta`.

    options: the accountant's (conversion, orders, group_method).
    """
    from .registry import account_event

    def epsilon_of(value: float) -> float:
        return account_event(build(value), delta, accountant, **options).epsilon

    return calibrate(epsilon_of, budget, scalar, **(search or {}))


def most_rounds(
    build: Callable[[int], Event], budget: float, delta: float, *, accountant: str = "rdp", **options
) -> int:
    """The most rounds (or steps) whose event `build(rounds)` stays within `budget`; 0 if none."""
    try:
        return int(calibrate_event(build, budget, delta, "rounds", accountant=accountant, **options).value)
    except NoStepFits:
        return 0


def calibrate_sigma(
    epsilon_of: Callable[[float], float],
    budget: float,
    *,
    rel_tol: float = 1e-4,
    sigma_range: tuple[float, float] = SIGMA_RANGE,
    progress: Callable[[int], None] | None = None,
) -> Calibration:
    """The smallest sigma (to `rel_tol`, rounded up) with epsilon_of(sigma) <= budget."""
    eps = _Counted(epsilon_of, budget, progress)
    lo, hi = _bracket_sigma(eps, budget, sigma_range)
    if lo is None:
        spent = epsilon_of(hi)
        if spent == 0:
            # Nothing is released (zero steps or rounds): every sigma "meets" the budget, and
            # the smallest of the search range is no answer (issue 12).
            raise InvalidParameter(
                "epsilon is 0 at every sigma: the run releases nothing (zero steps or rounds), "
                "so there is no noise to calibrate; give at least one step"
            )
        return Calibration(hi, spent, eps.calls + 1)
    return _settle(eps, budget, good=hi, bad=lo, rel_tol=rel_tol, to_safe_side=_round_up)


class _Counted:
    """epsilon_of, counting its calls (reported to `progress`), for a budget checked > 0."""

    def __init__(
        self, epsilon_of: Callable[[float], float], budget: float, progress: Callable[[int], None] | None
    ) -> None:
        if not budget > 0:
            raise InvalidParameter(f"epsilon budget must be > 0, got {budget}")
        self.epsilon_of, self.progress, self.calls = epsilon_of, progress, 0

    def __call__(self, value: float) -> float:
        self.calls += 1
        if self.progress:
            self.progress(self.calls)
        return self.epsilon_of(value)


def _settle(
    eps: _Counted,
    budget: float,
    *,
    good: float,
    bad: float,
    rel_tol: float,
    to_safe_side: Callable[[float], float],
) -> Calibration:
    """Bisect on the log scale between a value that meets the budget (`good`) and one that does
    not, until they are within a factor 1 + rel_tol; then round `good` to 4 significant digits
    (the printed precision) towards the safe side (more noise, a smaller rate), and step back
    one unit in the 4th digit while that still meets the budget, so the value returned is the
    best one at the printed precision (4.780, not 4.781, when 4.780 meets it); re-accounted."""
    while max(good, bad) / min(good, bad) > 1 + rel_tol:
        mid = math.sqrt(good * bad)
        if eps(mid) <= budget:
            good = mid
        else:
            bad = mid
    value = to_safe_side(good)
    final = eps(value)
    if final > budget:  # rounding to the safe side cannot raise epsilon; this guards monotonicity
        value, final = good, eps(good)
    towards_bad = 1.0 if bad > good else -1.0
    for _ in range(_MAX_BACK_STEPS):
        candidate = _next_digit(value, towards_bad)
        if (candidate - bad) * towards_bad >= 0:  # at or past a value known to miss the budget
            break
        spent = eps(candidate)
        if spent > budget:
            break
        value, final = candidate, spent
    return Calibration(value, final, eps.calls)


#: `_settle` steps back at most this many units of the 4th digit (the bisection leaves about one).
_MAX_BACK_STEPS = 20


def _next_digit(x: float, direction: float, digits: int = 4) -> float:
    """x moved by one unit in its `digits`-th significant digit, up (direction 1) or down (-1)."""
    exponent = math.floor(math.log10(x)) - (digits - 1)
    if direction < 0 and float(f"{x:.{digits}g}") == 10.0 ** (exponent + digits - 1):
        exponent -= 1  # 1.000 steps down to 0.9999, the next value at this precision
    return float(f"{x + direction * 10.0**exponent:.{digits + 1}g}")


def _bracket_sigma(
    eps: Callable[[float], float], budget: float, sigma_range: tuple[float, float]
) -> tuple[float | None, float]:
    """(lo, hi) with eps(lo) > budget >= eps(hi), by doubling or halving from sigma = 1.

    Starting in the middle keeps the search away from the ends of the range, where a tight
    accountant is slowest (a tiny sigma has a huge privacy loss to discretise). lo is None when
    the smallest sigma of the range already meets the budget.
    """
    low_end, high_end = sigma_range
    sigma = min(max(1.0, low_end), high_end)
    if eps(sigma) <= budget:
        hi = sigma
        while hi > low_end:
            lo = max(hi / 2, low_end)
            if eps(lo) > budget:
                return lo, hi
            hi = lo
        return None, hi
    lo = sigma
    while lo < high_end:
        hi = min(lo * 2, high_end)
        if eps(hi) <= budget:
            return lo, hi
        lo = hi
    raise UnreachableBudget(
        f"no noise multiplier up to {high_end:g} meets epsilon {budget:g}; "
        "raise the budget or lower the sampling rate or steps"
    )


def calibrate_steps(
    epsilon_of: Callable[[int], float],
    budget: float,
    *,
    max_steps: int = MAX_STEPS,
    start: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Calibration:
    """The largest number of steps T <= max_steps with epsilon_of(T) <= budget.

    `start` is a guess (for a tight accountant, the answer of a cheap looser one): the search
    doubles or halves from it instead of from one step, which saves about half the
    evaluations. The answer does not depend on it.
    """
    if not budget > 0:
        raise InvalidParameter(f"epsilon budget must be > 0, got {budget}")
    seen: dict[int, float] = {}  # each step count is accounted once

    def eps(steps: int) -> float:
        if steps not in seen:
            seen[steps] = epsilon_of(steps)
            if progress:
                progress(len(seen))
        return seen[steps]

    first = eps(1)
    if first > budget:
        raise NoStepFits(
            f"even one step spends epsilon {first:.4g} > budget {budget:g}; "
            "raise sigma or the budget, or lower the sampling rate"
        )
    good, bad = _bracket_steps(eps, budget, max_steps, start)
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        if eps(mid) <= budget:
            good = mid
        else:
            bad = mid
    return Calibration(good, eps(good), len(seen))


def most_steps(epsilon_of: Callable[[int], float], budget: float, **kwargs) -> int:
    """`calibrate_steps`'s answer, or 0 when even one step spends more than `budget`."""
    try:
        return int(calibrate_steps(epsilon_of, budget, **kwargs).value)
    except NoStepFits:
        return 0


def _bracket_steps(
    eps: Callable[[int], float], budget: float, max_steps: int, start: int | None
) -> tuple[int, int | None]:
    """(good, bad): eps(good) <= budget < eps(bad), bad = good * 2^j; bad None: max_steps fits."""
    good = 1
    if start is not None and 1 < start <= max_steps:
        if eps(start) <= budget:
            good = start
        else:
            bad = start
            while bad > 1:  # halve down to a count that fits (one step is known to fit)
                candidate = bad // 2
                if candidate <= 1 or eps(candidate) <= budget:
                    return max(candidate, 1), bad
                bad = candidate
    bad = good * 2
    while True:  # exponential search for a failing step count
        if good >= max_steps:
            return max_steps, None
        bad = min(bad, max_steps)
        if eps(bad) > budget:
            return good, bad
        good, bad = bad, bad * 2


def calibrate_rate(
    epsilon_of: Callable[[float], float],
    budget: float,
    *,
    rel_tol: float = 1e-4,
    min_rate: float = MIN_RATE,
    progress: Callable[[int], None] | None = None,
) -> Calibration:
    """The largest sampling rate q in (0, 1] (to `rel_tol`, rounded down) with epsilon_of(q) <= budget."""
    eps = _Counted(epsilon_of, budget, progress)
    if eps(1.0) <= budget:
        return Calibration(1.0, epsilon_of(1.0), eps.calls + 1)
    hi, lo = 1.0, 0.5  # hi always over the budget
    while eps(lo) > budget:
        hi, lo = lo, lo / 2
        if lo < min_rate:
            raise UnreachableBudget(
                f"no sampling rate down to {min_rate:g} meets epsilon {budget:g}; "
                "raise the budget or sigma, or lower the steps"
            )
    return _settle(eps, budget, good=lo, bad=hi, rel_tol=rel_tol, to_safe_side=_round_down)


def _round_down(x: float, digits: int = 4) -> float:
    """x rounded down to `digits` significant digits (a smaller rate is always safe)."""
    scale = 10 ** (digits - 1 - math.floor(math.log10(x)))
    return math.floor(x * scale) / scale


def _round_up(x: float, digits: int = 4) -> float:
    """x rounded up to `digits` significant digits (more noise is always safe)."""
    scale = 10 ** (digits - 1 - math.floor(math.log10(x)))
    return math.ceil(x * scale) / scale
