"""The algorithms `uldp train` runs (ULDP-FL §3, §4.1, §5.1), by their `--algo` names.

Each is a server-side round plan, a silo-side update producing an explicit message
(`base.SiloDelta` / `base.SiloUserDeltas`) and a server-side aggregation; see `base`.
"""
from __future__ import annotations

from uldp.errors import InvalidParameter
from .base import (Algorithm, Context, RoundPlan, SiloData, SiloDelta, SiloUserDeltas, TrainConfig)
from .fedavg import FedAvg
from .group import UldpGroup
from .naive import UldpNaive
from .per_user_clipping import PerUserClipping

ALGORITHMS = ("default", "uldp-naive", "uldp-group", "uldp-avg", "uldp-avg-w", "uldp-sgd", "uldp-sgd-w")

# The mechanism each algorithm releases, by the accountants' name for it (None: not private).
ACCOUNTED_AS = {"default": None, "uldp-naive": "uldp-naive", "uldp-group": "uldp-group",
                "uldp-avg": "uldp-avg", "uldp-avg-w": "uldp-avg", "uldp-sgd": "uldp-sgd",
                "uldp-sgd-w": "uldp-sgd"}


def make_algorithm(cfg: TrainConfig, silos: list[SiloData], task: str) -> Algorithm:
    """The algorithm named by `cfg.algo`, prepared for these silos (uldp-group draws its flags)."""
    if cfg.algo not in ALGORITHMS:
        raise InvalidParameter(f"algo must be one of {', '.join(ALGORITHMS)}, got {cfg.algo!r}")
    if cfg.algo == "default":
        return FedAvg()
    if cfg.algo == "uldp-naive":
        return UldpNaive()
    if cfg.algo == "uldp-group":
        if task == "survival":
            raise InvalidParameter("uldp-group clips per-record gradients, and the Cox partial likelihood "
                             "does not split into per-record losses; use another --algo for survival data")
        return UldpGroup.prepare(silos, cfg)
    if cfg.secure:
        from .weighting import secure_protocol

        secure_protocol()  # fail before training, not after the first round
    return PerUserClipping(cfg.algo)


__all__ = ["ALGORITHMS", "ACCOUNTED_AS", "Algorithm", "Context", "RoundPlan", "SiloData", "SiloDelta",
           "SiloUserDeltas", "TrainConfig", "make_algorithm"]
