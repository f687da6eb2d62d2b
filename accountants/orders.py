"""Sets of Rényi orders at which RDP is evaluated (ULDP-FL §2.2).

The epsilon obtained from RDP is a minimum over the orders tried, so a set
that is too coarse gives a valid but loose bound; it never gives an invalid one.
"""
from __future__ import annotations

from uldp.errors import InvalidParameter
from typing import Callable, TypeVar

import numpy as np

T = TypeVar("T")

#: The legacy TF-Privacy / Opacus set: [1 + x/10 for x in 1..99] + 12..63.
TF_PRIVACY_ORDERS: np.ndarray = np.array(
    [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)), dtype=float
)


def _dense_orders() -> np.ndarray:
    # Fine near 1 (large step counts and small budgets put the optimum there),
    # quarter steps to 16, integers to 256, then geometric integers to 1e5 so
    # that tiny per-step losses (large sigma, small q) still find their optimum.
    near_one = np.round(np.arange(1.05, 2.0, 0.05), 2)
    low = np.arange(2.0, 16.0, 0.25)
    mid = np.arange(16.0, 257.0, 1.0)
    high = np.unique(np.round(np.geomspace(256, 1e5, 60)))
    return np.unique(np.concatenate([near_one, low, mid, high]))


#: Default dense set: 1.05..2 by 0.05, 2..16 by 0.25, 16..256 by 1, then up to 1e5.
DEFAULT_ORDERS: np.ndarray = _dense_orders()

PRESETS = {"default": DEFAULT_ORDERS, "tf-privacy": TF_PRIVACY_ORDERS}

# The default set is tried in two stages: orders up to this first, the rest only when the best
# order lands on the edge. Any order gives a valid bound, so stopping early can only cost
# tightness, and only if epsilon(alpha) had a second dip past the edge; it saves evaluating
# binomial sums of up to 1e5 terms when the optimum is small, as it nearly always is.
FIRST_STAGE_MAX_ORDER = 256.0


def resolve_orders(spec: str | list[float] | tuple[float, ...] | np.ndarray) -> np.ndarray:
    """Turn a preset name, a comma list or a sequence into a sorted array of orders > 1."""
    if isinstance(spec, str):
        if spec in PRESETS:
            return PRESETS[spec]
        try:
            values = [float(x) for x in spec.split(",") if x.strip()]
        except ValueError:
            raise InvalidParameter(
                f"orders must be one of {', '.join(PRESETS)} or a comma list of numbers > 1, got {spec!r}"
            ) from None
    else:
        values = [float(x) for x in spec]
    orders = np.unique(np.asarray(values, dtype=float))
    if orders.size == 0 or not np.all(np.isfinite(orders)) or np.any(orders <= 1):
        raise InvalidParameter(f"orders must be numbers > 1, got {spec!r}")
    return orders


def orders_label(spec: str | list[float] | tuple[float, ...] | np.ndarray) -> str:
    """A short human label for an order set, for the assumptions block."""
    if isinstance(spec, str) and spec in PRESETS:
        arr = PRESETS[spec]
        return f"{spec} ({arr.size} orders, {arr[0]:g}..{arr[-1]:g})"
    arr = resolve_orders(spec)
    return f"custom ({arr.size} orders, {arr[0]:g}..{arr[-1]:g})"


def best_over_stages(orders: np.ndarray, spec, best_at: Callable[[np.ndarray], T]) -> T:
    """`best_at(stage)` (a result with an `.order`) for each of `order_stages` in turn, stopping
    at the first stage whose best order is inside it rather than at its largest order."""
    result = None
    for stage in order_stages(orders, spec):
        result = best_at(stage)
        if result.order is not None and result.order != stage[-1]:
            break
    return result


def order_stages(orders: np.ndarray, spec) -> list[np.ndarray]:
    """Order sets to try in turn: the next is used only when the best order is the previous's largest."""
    if isinstance(spec, str) and spec == "default":
        first = orders[orders <= FIRST_STAGE_MAX_ORDER]
        if 0 < first.size < orders.size:
            return [first, orders]
    return [orders]
