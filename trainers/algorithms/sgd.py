"""`uldp-sgd` and `uldp-sgd-w`: ULDP-SGD, per-user clipping of one gradient (ULDP-FL Algorithms 3-4).

Every user's gradient on all its records is clipped and weighted by 1/|S| (ULDP-SGD) or
n_{s,u} / N_u (ULDP-SGD-w, Eq. 3; `--secure` for Protocol 1); the server's eta_g is the step
size. The mechanism is ULDP-AVG's (Theorem 3), so `-w` is accounted as `uldp-sgd`. The silo
update and the aggregation are `per_user_clipping.PerUserClipping`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .per_user_clipping import per_user_plan, per_user_spec, weighted_variant
from .registry import PlanInputs

if TYPE_CHECKING:
    from uldp.accountants.plan import Plan


def sgd_plan(inputs: PlanInputs) -> Plan:
    return per_user_plan("uldp-sgd", inputs)


SPEC = per_user_spec(
    "uldp-sgd",
    "ULDP-SGD, every user's gradient is clipped and weighted 1/|S| (Algorithm 3, Theorem 3).",
    sgd_plan,
)
WEIGHTED_SPEC = weighted_variant(SPEC)
