"""The hyper-parameters `uldp train` uses for what the user leaves out, per data set and algorithm.

The generic defaults are the paper's setting (100 users, sigma 5, 10 rounds, ULDP-FL §5.1) with
plain learning rates; they are a starting point, not tuned, and do not learn well: ULDP-AVG
divides the sum of the users' clipped deltas by |U||S| (Algorithm 4 line 10), so with global
learning rate 1 the model barely moves. The tuned rows were found by the sweep in
benchmarks/train_defaults.py (settings, seeds and results in docs/train.md, "Defaults"): each
reaches the stated test metric at the stated user-level epsilon (delta 1e-5) in seconds on 2 CPU
cores, and the accuracy holds across noise seeds.

Why the MNIST row looks as it does: ULDP-AVG's signal is the sum of |U| clipped deltas, its noise
N(0, sigma^2 C^2) in every coordinate, so the signal-to-noise ratio grows with the number of users
and falls with sqrt(#parameters). With the 5,000 built-in images, 1,000 users (4 images each)
and logistic regression on the pixels (7,850 parameters) beat the paper's CNN (18,378
parameters), which needs minutes per run on 2 cores for the same epsilon.
"""

from __future__ import annotations

from typing import Any

# What `uldp train` takes when the user gives neither the option nor a config value.
GENERIC: dict[str, Any] = {
    "users": 100,
    "rounds": 10,
    "sigma": 5.0,
    "lr": 0.05,
    "global_lr": 1.0,
    "local_epochs": 1,
    "model": "auto",
}

# Tuned per (data set, algorithm); uldp-avg-w shares uldp-avg's (same update, same mechanism).
TUNED: dict[tuple[str, str], dict[str, Any]] = {
    ("mnist", "uldp-avg"): {
        "users": 1000,
        "rounds": 30,
        "sigma": 3.0,
        "lr": 0.5,
        "global_lr": 20.0,
        "local_epochs": 1,
        "model": "logistic",
    },
    ("heart-disease", "uldp-avg"): {
        "users": 200,
        "rounds": 10,
        "sigma": 5.0,
        "lr": 0.5,
        "global_lr": 10.0,
        "local_epochs": 1,
        "model": "auto",
    },
}
SHARED = {"uldp-avg-w": "uldp-avg"}


def train_defaults(dataset: str | None, algo: str) -> dict[str, Any]:
    """The defaults for `algo` on the built-in `dataset` (None: the user's own table)."""
    out = dict(GENERIC)
    if dataset is not None:
        out.update(TUNED.get((dataset, SHARED.get(algo, algo)), {}))
    return out


def describe(key: str) -> str:
    """`--help` text for the default of `key`: the tuned values, then the generic one."""
    groups: dict[str, list[str]] = {}  # "value for algo" -> data sets
    for (dataset, algo), row in TUNED.items():
        if key in row and row[key] != GENERIC[key]:
            shared = "(-w)" if algo in SHARED.values() else ""
            groups.setdefault(f"{_text(row[key])} for {algo}{shared}", []).append(dataset)
    generic = _text(GENERIC[key])
    if not groups:
        return f"default: {generic}"
    tuned = [f"{value} on {' and '.join(datasets)}" for value, datasets in groups.items()]
    return f"default: {', '.join(tuned)}, else {generic}; docs/train.md"


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
