"""`unidp`: uniform DP-SGD at the smallest budget, the baseline of rPDP-FL (its `fedavg_unidp.py`).

What a federation without personalisation must do: every record sampled at one rate
q = min(1, B / min_s |D_s|) (`--batch-size` B, the reference's "StrongForAll"), with sigma
calibrated so that this q spends exactly the smallest budget (or, with `--sigma` given, q the
smallest budget's rate). The rounds are rpdp's (`rpdp.RecordSampledDpSgd`); only the rates
differ (`trainers.rates.personalize_data`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import AlgorithmSpec
from .rpdp import RecordSampledDpSgd, check_task

if TYPE_CHECKING:
    from .base import SiloData, TrainConfig


def build(cfg: TrainConfig, silos: list[SiloData], task: str) -> RecordSampledDpSgd:
    check_task("unidp", task)
    return RecordSampledDpSgd("unidp")


SPEC = AlgorithmSpec(
    name="unidp",
    help="Uniform DP-SGD, every record at the rate of the smallest budget (rPDP-FL's "
    "baseline; same flags as rpdp, plus --batch-size).",
    build=build,
    options=frozenset(("sigma", "clip", "lr", "global_lr", "local_steps", "silo_q", "batch_size")),
    plan_options=frozenset(),
    record_level=True,
)
