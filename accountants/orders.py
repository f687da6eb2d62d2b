"""Sets of Rényi orders at which RDP is evaluated (ULDP-FL §2.2).

The epsilon obtained from RDP is a minimum over the orders tried, so a set
that is too coarse gives a valid but loose bound; it never gives an invalid one.
`Orders` is the one description of such a set: a preset name or an explicit list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from uldp.errors import InvalidParameter


class _AtAnOrder(Protocol):
    """A result reached at one order (None: no order gave a finite bound)."""

    @property
    def order(self) -> float | None: ...


T = TypeVar("T", bound=_AtAnOrder)

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

#: The largest order a user list may hold: above the presets' 1e5 by ten; at 1e308 the RDP of any
#: step is infinite, and no order above 1e6 improves the conversion of a run worth accounting.
MAX_ORDER = 1e6
PRESETS = {"default": DEFAULT_ORDERS, "tf-privacy": TF_PRIVACY_ORDERS}

# The default set is tried in two stages: orders up to this first, the rest only when the best
# order lands on the edge. Any order gives a valid bound, so stopping early can only cost
# tightness, and only if epsilon(alpha) had a second dip past the edge; it saves evaluating
# binomial sums of up to 1e5 terms when the optimum is small, as it nearly always is.
FIRST_STAGE_MAX_ORDER = 256.0


@dataclass(frozen=True)
class Orders:
    """A set of orders > 1: a preset (`default`, `tf-privacy`) or an explicit sorted list.

    `text` is the spelling it was given in (what the CLI echoes back); `values` is empty for a
    preset, whose grid is the module-level array itself.
    """

    text: str
    preset: str | None = None
    values: tuple[float, ...] = ()

    @classmethod
    def parse(cls, spec: OrdersSpec) -> Orders:
        """A preset name, a comma list, a sequence of numbers, or an `Orders` (returned as is)."""
        if isinstance(spec, Orders):
            return spec
        if isinstance(spec, str):
            if spec in PRESETS:
                return cls(spec, spec)
            items = [x.strip() for x in spec.split(",")]
            if "" in items:  # "2,3,,4": refused, like every other comma list (issue 12)
                raise InvalidParameter(f"orders {spec!r} has an empty item; give a comma list of numbers > 1")
            try:
                values = [float(x) for x in items]
            except ValueError:
                raise InvalidParameter(
                    f"orders must be one of {', '.join(PRESETS)} or a comma list of numbers in "
                    f"(1, 1e6], got {spec!r}"
                ) from None
            text = spec
        else:
            values = [float(x) for x in spec]
            text = ",".join(f"{v:g}" for v in values)
        grid = np.unique(np.asarray(values, dtype=float))
        if grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid <= 1) or np.any(grid > MAX_ORDER):
            raise InvalidParameter(f"orders must be numbers in (1, {MAX_ORDER:.0e}], got {spec!r}")
        return cls(text, None, tuple(grid.tolist()))

    @property
    def grid(self) -> np.ndarray:
        """Every order of the set, sorted (a preset's shared array: do not write to it)."""
        if self.preset is not None:
            return PRESETS[self.preset]
        return np.asarray(self.values, dtype=float)

    @property
    def label(self) -> str:
        """A short human label, for the assumptions block."""
        grid = self.grid
        name = self.preset if self.preset is not None else "custom"
        return f"{name} ({grid.size} orders, {grid[0]:g}..{grid[-1]:g})"

    def stages(self, grid: np.ndarray | None = None) -> list[np.ndarray]:
        """Order sets to try in turn: the next only when the best order is the previous's largest.

        `grid` (default: the whole set) is the array staged, for callers that map the orders
        (Lemma 6's alpha / 2^c); only the default preset is split, at FIRST_STAGE_MAX_ORDER.
        """
        grid = self.grid if grid is None else grid
        if self.preset == "default":
            first = grid[grid <= FIRST_STAGE_MAX_ORDER]
            if 0 < first.size < grid.size:
                return [first, grid]
        return [grid]

    def best(self, best_at: Callable[[np.ndarray], T], grid: np.ndarray | None = None) -> T:
        """`best_at(stage)` (a result with an `.order`) for each of `stages` in turn, stopping at
        the first stage whose best order is inside it rather than at its largest order."""
        stages = self.stages(grid)
        for stage in stages[:-1]:
            result = best_at(stage)
            if result.order is not None and result.order != stage[-1]:
                return result
        return best_at(stages[-1])

    def __str__(self) -> str:
        return self.text


OrdersSpec = str | Sequence[float] | np.ndarray | Orders


def resolve_orders(spec: OrdersSpec) -> np.ndarray:
    """Turn a preset name, a comma list or a sequence into a sorted array of orders > 1."""
    return Orders.parse(spec).grid


def orders_label(spec: OrdersSpec) -> str:
    """A short human label for an order set, for the assumptions block."""
    return Orders.parse(spec).label


def integer_orders() -> str:
    """The default set's integer orders up to FIRST_STAGE_MAX_ORDER, as an explicit list.

    A subset of the default orders, so the epsilon it gives bounds the default one from above:
    what a search or a pruning step may use when it needs a valid bound fast (RDP at an integer
    order is a closed sum; at a fractional one, a slow series per order and sampling rate).
    """
    whole = DEFAULT_ORDERS[
        (DEFAULT_ORDERS == np.round(DEFAULT_ORDERS)) & (DEFAULT_ORDERS <= FIRST_STAGE_MAX_ORDER)
    ]
    return ",".join(str(int(a)) for a in whole)
