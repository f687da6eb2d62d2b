"""From an RDP curve to an (epsilon, delta)-DP guarantee.

- improved (default): ULDP-FL Lemma 2 (Balle et al. 2020; Canonne, Kamath, Steinke 2020,
  Prop. 12): epsilon = rho + log((alpha - 1) / alpha) - (log delta + log alpha) / (alpha - 1).
- classic: Mironov 2017, Prop. 3: epsilon = rho + log(1 / delta) / (alpha - 1).
Both hold at every order, so the minimum over the orders tried is a valid bound; as in
dp-accounting we also return epsilon = 0 when delta >= sqrt(1 - e^{-rho}), which bounds the
total-variation distance through the KL divergence (rho at any order >= 1 is at least the KL).

`log_delta` is taken in log space so that Lemma 5's bisection can ask for deltas far below
the smallest positive double.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from uldp.errors import InvalidParameter

CONVERSIONS = ("improved", "classic")


@dataclass(frozen=True)
class Conversion:
    epsilon: float
    order: float | None


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
    return Conversion(max(0.0, float(eps[best])), float(np.asarray(orders)[best]))
