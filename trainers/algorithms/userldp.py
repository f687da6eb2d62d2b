"""`userldp`: UserLDP (Marathe & Kanani, "Subject Granular Differential Privacy in Federated Learning",
Algorithm 1, Lemma 3.2, Theorems 3.1 and 3.3).

user-level local DP: the mini-batch's gradient clipped to C as a whole and noised, hiding the
member's whole signal; a subject's items can change the clipped gradient by 2C (accounted so; Lemma
3.2 states C).

The member's steps and the server's average are `subject_sgd.SubjectSgd` with combine `batch`; a run
is accounted per subject (`trainers.subject_accounting`), and `uldp subject --algo userldp` plans
it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .registry import AlgorithmSpec
from .subject_sgd import SubjectSgd, check_task

if TYPE_CHECKING:
    from .base import SiloData, TrainConfig


def build(cfg: TrainConfig, silos: list[SiloData], task: str) -> SubjectSgd:
    check_task("userldp", task)
    return SubjectSgd("userldp", "batch")


SPEC = AlgorithmSpec(
    name="userldp",
    help="Subject-level DP through user-level local DP (Marathe & Kanani Algorithm 1): the whole "
    "mini-batch's gradient clipped and noised.",
    build=build,
    options=frozenset(("sigma", "clip", "lr", "global_lr", "batch_size", "local_steps", "target_epsilon")),
    plan_options=frozenset(),
    server_reads_owners=True,  # the accounting reads every subject's holding (n_{s,u})
    subject_level=True,
)
