"""`localitemdp`: LocalItemDP (Marathe & Kanani, "Subject Granular Differential Privacy in Federated
Learning", §4, Abadi et al. 2016).

DP-SGD at every member, item-level only: the paper's baseline; its subject-level epsilons (a subject
with m items at a member moves the sum by m C) are printed beside its item-level one.

The member's steps and the server's average are `subject_sgd.SubjectSgd` with combine `item`; a run
is accounted per subject (`trainers.subject_accounting`), and `uldp subject --algo localitemdp`
plans it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import AlgorithmSpec
from .subject_sgd import SubjectSgd, check_task

if TYPE_CHECKING:
    from .base import SiloData, TrainConfig


def build(cfg: TrainConfig, silos: list[SiloData], task: str) -> SubjectSgd:
    check_task("localitemdp", task)
    return SubjectSgd("localitemdp", "item")


SPEC = AlgorithmSpec(
    name="localitemdp",
    help="Item-level DP-SGD at every member (Marathe & Kanani's LocalItemDP baseline); subject-level "
    "figures shown beside.",
    build=build,
    options=frozenset(("sigma", "clip", "lr", "global_lr", "batch_size", "local_steps", "target_epsilon")),
    plan_options=frozenset(),
    server_reads_owners=True,  # the accounting reads every subject's holding (n_{s,u})
    subject_level=True,
)
