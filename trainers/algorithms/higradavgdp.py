"""`higradavgdp`: HiGradAvgDP (Marathe & Kanani, "Subject Granular Differential Privacy in Federated
Learning", Algorithm 3, Lemma 3.7, Theorem 3.8).

hierarchical gradient averaging: each item's gradient clipped to C, a subject's clipped gradients
averaged within the mini-batch, the averages summed and noised; a subject moves the sum by at most C
whatever its number of items.

The member's steps and the server's average are `subject_sgd.SubjectSgd` with combine `subject`; a
run is accounted per subject (`trainers.subject_accounting`), and `uldp subject --algo higradavgdp`
plans it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import AlgorithmSpec
from .subject_sgd import SubjectSgd, check_task

if TYPE_CHECKING:
    from .base import SiloData, TrainConfig


def build(cfg: TrainConfig, silos: list[SiloData], task: str) -> SubjectSgd:
    check_task("higradavgdp", task)
    return SubjectSgd("higradavgdp", "subject")


SPEC = AlgorithmSpec(
    name="higradavgdp",
    help="Subject-level DP by hierarchical gradient averaging (Marathe & Kanani Algorithm 3): clip "
    "per item, average per subject, sum, noise.",
    build=build,
    options=frozenset(("sigma", "clip", "lr", "global_lr", "batch_size", "local_steps", "target_epsilon")),
    plan_options=frozenset(),
    server_reads_owners=True,  # the accounting reads every subject's holding (n_{s,u})
    subject_level=True,
)
