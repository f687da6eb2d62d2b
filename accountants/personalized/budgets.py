"""Per-record privacy budgets drawn from the rPDP-FL experiments' preference distributions.

rPDP-FL (slides ch. 4 and the issue's list of its experiments) draws each record's epsilon from
one of these; every preset is clipped to [0.1, 10] (`BUDGET_RANGE`) and seeded, so the same
name, count and seed always give the same budgets.

- three-levels: 70% / 20% / 10% of the records at epsilon 0.1 / 1 / 5 (ThreeLevels);
- bounded-pareto: numpy's pareto(4) (Lomax, shape 4) + 0.1 (BoundedPareto);
- bounded-mix-gauss: a Gaussian mixture, weights [0.7, 0.2, 0.1], means [0.1, 1, 5],
  stds [0.05, 0.1, 0.5] (BoundedMixGauss);
- group-3: 54% / 37% / 9% at epsilon 1 / 2 / 3 (runtime study, Group-3);
- group-100: 100 evenly sized groups at linspace(1, 5.95, 100) (runtime study, Group-100);
- individual-1000: a Gaussian mixture, weights [0.7, 0.2, 0.1], means [1, 2, 5],
  stds [0.1, 0.2, 0.5] (runtime study, Individual-1000: per-record budgets).

Weighted levels are drawn per record (so the shares are those of a sample, as in the
experiments); group-100's groups are exactly even (record i joins group i mod 100, then the
records are shuffled).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from uldp.errors import InvalidParameter

#: Every preset's budgets are clipped to this range (the experiments' bounds).
BUDGET_RANGE = (0.1, 10.0)


def _levels(levels: list[float], weights: list[float]) -> Callable[[np.random.Generator, int], np.ndarray]:
    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return np.asarray(levels, dtype=float)[rng.choice(len(levels), size=n, p=weights)]

    return draw


def _mixture(
    weights: list[float], means: list[float], stds: list[float]
) -> Callable[[np.random.Generator, int], np.ndarray]:
    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        component = rng.choice(len(weights), size=n, p=weights)
        return rng.normal(np.asarray(means)[component], np.asarray(stds)[component])

    return draw


def _bounded_pareto(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.pareto(4.0, size=n) + 0.1


def _even_groups(levels: np.ndarray) -> Callable[[np.random.Generator, int], np.ndarray]:
    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.permutation(levels[np.arange(n) % levels.size])

    return draw


#: name -> (description, sampler(rng, n)).
DISTRIBUTIONS: dict[str, tuple[str, Callable[[np.random.Generator, int], np.ndarray]]] = {
    "three-levels": (
        "ThreeLevels: 70/20/10% at epsilon [0.1, 1, 5]",
        _levels([0.1, 1.0, 5.0], [0.7, 0.2, 0.1]),
    ),
    "bounded-pareto": ("BoundedPareto: pareto(4) + 0.1", _bounded_pareto),
    "bounded-mix-gauss": (
        "BoundedMixGauss: weights [0.7, 0.2, 0.1], means [0.1, 1, 5], stds [0.05, 0.1, 0.5]",
        _mixture([0.7, 0.2, 0.1], [0.1, 1.0, 5.0], [0.05, 0.1, 0.5]),
    ),
    "group-3": ("Group-3: 54/37/9% at epsilon [1, 2, 3]", _levels([1.0, 2.0, 3.0], [0.54, 0.37, 0.09])),
    "group-100": (
        "Group-100: 100 even groups at epsilon linspace(1, 5.95, 100)",
        _even_groups(np.linspace(1.0, 5.95, 100)),
    ),
    "individual-1000": (
        "Individual-1000: weights [0.7, 0.2, 0.1], means [1, 2, 5], stds [0.1, 0.2, 0.5]",
        _mixture([0.7, 0.2, 0.1], [1.0, 2.0, 5.0], [0.1, 0.2, 0.5]),
    ),
}


def sample_budgets(name: str, records: int, seed: int = 0) -> np.ndarray:
    """`records` budgets from the preset `name`, clipped to `BUDGET_RANGE`, reproducible by `seed`."""
    if name not in DISTRIBUTIONS:
        raise InvalidParameter(f"distribution must be one of {', '.join(DISTRIBUTIONS)}, got {name!r}")
    if records < 1:
        raise InvalidParameter(f"records must be >= 1, got {records}")
    _, draw = DISTRIBUTIONS[name]
    return np.clip(draw(np.random.default_rng(seed), records), *BUDGET_RANGE)


def describe(name: str) -> str:
    """The preset's description, with the clipping, for the assumptions block."""
    low, high = BUDGET_RANGE
    return f"{DISTRIBUTIONS[name][0]}; clipped to [{low:g}, {high:g}]"
