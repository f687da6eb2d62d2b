"""The algorithms (ULDP-FL §3, §4.1, §5.1; rPDP-FL; Baek et al. 2021; Marathe & Kanani), by `--algo` name.

Each algorithm is one module holding its `AlgorithmSpec` (name, help, the mechanism it releases,
its trainer: a server-side round plan, a silo-side update producing an explicit message
`base.SiloDelta` / `base.SiloUserDeltas`, and a server-side aggregation), and one line below
registers it. `uldp account`, `uldp calibrate` and `uldp train` read the registry; importing
this package imports no torch (docs/architecture.md, "Adding an algorithm").
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from . import (
    avg,
    dropout_robust,
    fedavg,
    group,
    higradavgdp,
    localgroupdp,
    localitemdp,
    naive,
    rpdp,
    sgd,
    unidp,
    userldp,
)
from .registry import (
    AlgorithmSpec,
    PlanInputs,
    accounted_names,
    algorithm_names,
    get_algorithm,
    plan_algorithm,
    plan_names,
    register,
    unregister,
    user_budget_names,
)
from .secure_algorithms import secure_names
from .server import BaseAlgorithm, SiloAveraging

if TYPE_CHECKING:
    from .base import Algorithm, Context, RoundPlan, SiloData, SiloDelta, SiloUserDeltas, TrainConfig

# The built-in algorithms, in the order the --algo choices list them.
register(fedavg.SPEC)
register(naive.SPEC)
register(group.SPEC)
register(avg.SPEC)
register(avg.WEIGHTED_SPEC)
register(sgd.SPEC)
register(sgd.WEIGHTED_SPEC)
register(rpdp.SPEC)
register(unidp.SPEC)
register(dropout_robust.SPEC)
register(userldp.SPEC)
register(localgroupdp.SPEC)
register(higradavgdp.SPEC)
register(localitemdp.SPEC)


def make_algorithm(cfg: TrainConfig, silos: list[SiloData], task: str) -> Algorithm:
    """The trainer of the algorithm named by `cfg.algo`, prepared for these silos."""
    return get_algorithm(cfg.algo).build(cfg, silos, task)


# The settings and messages (`base`), resolved on first use: `uldp account` reads the registry
# and never needs them.
_FROM_BASE = ("Algorithm", "Context", "RoundPlan", "SiloData", "SiloDelta", "SiloUserDeltas", "TrainConfig")


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        return getattr(import_module(".base", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Algorithm",
    "AlgorithmSpec",
    "BaseAlgorithm",
    "Context",
    "PlanInputs",
    "RoundPlan",
    "SiloAveraging",
    "SiloData",
    "SiloDelta",
    "SiloUserDeltas",
    "TrainConfig",
    "accounted_names",
    "algorithm_names",
    "get_algorithm",
    "make_algorithm",
    "plan_algorithm",
    "plan_names",
    "register",
    "secure_names",
    "unregister",
    "user_budget_names",
]
