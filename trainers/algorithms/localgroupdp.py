"""`localgroupdp`: LocalGroupDP (Marathe & Kanani, "Subject Granular Differential Privacy in Federated
Learning", Algorithm 2, Theorem 3.4, Corollary 3.5, Theorem 3.6).

group DP: DP-SGD whose noise sigma_Z makes every step (E/Z, Delta/(Z e^((Z-1)E/Z)))-DP per item,
hence (E, Delta) for any Z items of a subject at the member; Z bounds every subject's items at a
member (--group-k: max, median or a number; items beyond it are not trained on).

The member's steps and the server's average are `subject_sgd.SubjectSgd` with combine `item`; a run
is accounted per subject (`trainers.subject_accounting`), and `uldp subject --algo localgroupdp`
plans it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import AlgorithmSpec
from .subject_sgd import SubjectSgd, check_task

if TYPE_CHECKING:
    from .base import SiloData, TrainConfig


def build(cfg: TrainConfig, silos: list[SiloData], task: str) -> SubjectSgd:
    check_task("localgroupdp", task)
    return SubjectSgd("localgroupdp", "item")


SPEC = AlgorithmSpec(
    name="localgroupdp",
    help="Subject-level DP through group DP (Marathe & Kanani Algorithm 2): DP-SGD with Corollary "
    "3.5's noise sigma_Z for groups of Z items (--group-k; needs --epsilon).",
    build=build,
    options=frozenset(("clip", "lr", "global_lr", "batch_size", "local_steps", "target_epsilon", "group_k")),
    plan_options=frozenset(),
    server_reads_owners=True,  # the accounting reads every subject's holding (n_{s,u})
    subject_level=True,
)
