"""The ULDP-FL algorithms (ULDP-FL §3, §4.1, §5.1), registered by their `--algo` names.

Each algorithm is one module holding its `AlgorithmSpec` (name, help, the mechanism it releases,
its trainer: a server-side round plan, a silo-side update producing an explicit message
`base.SiloDelta` / `base.SiloUserDeltas`, and a server-side aggregation), and one line below
registers it. `uldp account`, `uldp calibrate` and `uldp train` read the registry; importing
this package imports no torch (docs/architecture.md, "Adding an algorithm").
"""
from __future__ import annotations

from . import avg, fedavg, group, naive, sgd
from .base import (Algorithm, BaseAlgorithm, Context, RoundPlan, SiloData, SiloDelta, SiloUserDeltas,
                   TrainConfig)
from .registry import (AlgorithmSpec, PlanInputs, accounted_names, algorithm_names, get_algorithm,
                       plan_algorithm, register, secure_names, unregister)

# The built-in algorithms, in the order the --algo choices list them.
register(fedavg.SPEC)
register(naive.SPEC)
register(group.SPEC)
register(avg.SPEC)
register(avg.WEIGHTED_SPEC)
register(sgd.SPEC)
register(sgd.WEIGHTED_SPEC)


def make_algorithm(cfg: TrainConfig, silos: list[SiloData], task: str) -> Algorithm:
    """The trainer of the algorithm named by `cfg.algo`, prepared for these silos."""
    return get_algorithm(cfg.algo).build(cfg, silos, task)


__all__ = ["Algorithm", "AlgorithmSpec", "BaseAlgorithm", "Context", "PlanInputs", "RoundPlan",
           "SiloData", "SiloDelta", "SiloUserDeltas", "TrainConfig", "accounted_names",
           "algorithm_names", "get_algorithm", "make_algorithm", "plan_algorithm", "register",
           "secure_names", "unregister"]
