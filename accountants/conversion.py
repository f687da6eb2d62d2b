"""From an RDP curve to an (epsilon, delta)-DP guarantee.

- improved (default): ULDP-FL Lemma 2 (Balle et al. 2020; Canonne, Kamath, Steinke 2020,
  Prop. 12): epsilon = rho + log((alpha - 1) / alpha) - (log delta + log alpha) / (alpha - 1).
- classic: Mironov 2017, Prop. 3: epsilon = rho + log(1 / delta) / (alpha - 1).
Both hold at every order, so the minimum over the orders tried is a valid bound; as in
dp-accounting we also return epsilon = 0 when delta >= sqrt(1 - e^{-rho}), which bounds the
total-variation distance through the KL divergence (rho at any order >= 1 is at least the KL).

`log_delta` is taken in log space so that Lemma 5's bisection can ask for deltas far below
the smallest positive double.

`refine` then minimises epsilon over the real orders between the best grid order's neighbours
(golden-section search): the grid can only be so dense (orders above 256 are about 10% apart),
and the refined epsilon is evaluated at a real order, so it is still a valid bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from uldp.errors import InvalidParameter

CONVERSIONS = ("improved", "classic")


#: What `Conversion.rule` is when epsilon came from the total-variation bound (worded for output).
TV_RULE_NOTE = "0 by the total-variation rule, delta >= sqrt(1 - e^-rho)"


@dataclass(frozen=True)
class Conversion:
    epsilon: float
    order: float | None
    rule: str = "rdp"  # "rdp": the conversion's formula; "tv": the total-variation bound gave 0


def epsilon_curve(
    orders: np.ndarray, rdp: np.ndarray, log_delta: float | np.ndarray, conversion: str = "improved"
) -> np.ndarray:
    """epsilon at each order (rows) for each log delta (columns when log_delta is an array)."""
    if conversion not in CONVERSIONS:
        raise InvalidParameter(f"conversion must be one of {', '.join(CONVERSIONS)}, got {conversion!r}")
    a = np.asarray(orders, dtype=float)[:, None]
    r = np.asarray(rdp, dtype=float)[:, None]
    ld = np.atleast_1d(np.asarray(log_delta, dtype=float))[None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        if conversion == "improved":
            eps = r + np.log1p(-1.0 / a) - (ld + np.log(a)) / (a - 1.0)
        else:
            eps = r - ld / (a - 1.0)
        tv_bound = np.exp(2.0 * ld) + np.expm1(-r) > 0
    eps = np.where(tv_bound, 0.0, eps)
    return np.where(np.isnan(eps), np.inf, eps)


def rdp_to_dp(
    orders: np.ndarray, rdp: np.ndarray, log_delta: float, conversion: str = "improved"
) -> Conversion:
    """The smallest epsilon over `orders` at delta = exp(log_delta), and the order reaching it."""
    eps = epsilon_curve(orders, rdp, log_delta, conversion)[:, 0]
    if not np.any(np.isfinite(eps)):
        return Conversion(float("inf"), None)
    best = int(np.argmin(eps))
    rule = "tv" if eps[best] == 0.0 and _tv_applies(float(np.asarray(rdp)[best]), log_delta) else "rdp"
    return Conversion(max(0.0, float(eps[best])), float(np.asarray(orders)[best]), rule)


def _tv_applies(rho: float, log_delta: float) -> bool:
    """Whether delta >= sqrt(1 - e^{-rho}): the total-variation bound, epsilon = 0."""
    return bool(np.exp(2.0 * log_delta) + np.expm1(-rho) > 0)


#: Golden-section steps of `refine`: the bracket shrinks by 0.618^24 ~ 1e-5 of its width.
_REFINE_STEPS = 24
_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


def golden_order(
    grid: np.ndarray, order: float, eps: Callable[[float], float], lowest: float = 1.0
) -> float | None:
    """The real order between `order`'s neighbours in `grid` where `eps` is least (golden-section
    search, `_REFINE_STEPS` steps), with alpha - 1 (what a conversion divides by) rounded to 4
    significant digits: short to print, and as fine near alpha = 1 as elsewhere. None when
    `order` is not on the grid, there is no bracket, or the order rounds to 1."""
    grid = np.asarray(grid, dtype=float)
    i = int(np.searchsorted(grid, order))
    if i >= grid.size or grid[i] != order:
        return None
    lo = grid[i - 1] if i > 0 else lowest + (grid[0] - lowest) / 50.0
    hi = grid[i + 1] if i + 1 < grid.size else grid[i]
    if not hi > lo:
        return None
    a, b = lo, hi
    x1, x2 = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    f1, f2 = eps(x1), eps(x2)
    for _ in range(_REFINE_STEPS):
        if f1 <= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - _GOLDEN * (b - a)
            f1 = eps(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + _GOLDEN * (b - a)
            f2 = eps(x2)
    alpha = 1.0 + float(f"{(x1 if f1 <= f2 else x2) - 1.0:.4g}")
    return alpha if alpha > 1.0 else None


def refine(
    found: Conversion,
    grid: np.ndarray,
    rdp_at: Callable[[np.ndarray], np.ndarray],
    log_delta: float,
    conversion: str = "improved",
    lowest: float = 1.0,
) -> Conversion:
    """`found` (the best of `grid`) improved by minimising epsilon over real orders between the
    grid neighbours of its order (below the first grid order: down to `lowest`).

    epsilon(alpha) is evaluated exactly at every order tried (`rdp_at` is the RDP curve at real
    orders, ULDP-FL Lemma 4 / Mironov et al. 2019 §3.3 for fractional ones), and the result is
    the smallest of those and `found`: conservative, a valid bound whatever the curve's shape.
    The order returned has alpha - 1 rounded to 4 significant digits and re-evaluated there, so the printed
    order is the one the epsilon holds at. A zero epsilon (total-variation bound) is kept.
    """
    if found.order is None or found.epsilon == 0.0 or not np.isfinite(found.epsilon):
        return found

    def eps(alpha: float) -> float:
        value = epsilon_curve(np.array([alpha]), rdp_at(np.array([alpha])), log_delta, conversion)[0, 0]
        return float(value)

    best = found
    alpha = golden_order(grid, found.order, eps, lowest)
    if alpha is None:
        return best
    value = eps(alpha)
    if value < best.epsilon:
        rho = float(rdp_at(np.array([alpha]))[0])
        best = Conversion(
            max(0.0, value), alpha, "tv" if value == 0.0 and _tv_applies(rho, log_delta) else "rdp"
        )
    return best
