"""`uldp-avg` and `uldp-avg-w`: ULDP-AVG, per-user clipping of Q local epochs (ULDP-FL Algorithms 3-4).

ULDP-AVG weights every user's clipped delta by w_{s,u} = 1/|S| (§5.1); ULDP-AVG-w by
n_{s,u} / N_u (Eq. 3), in the clear or through Protocol 1 (`--secure`). Both release the same
mechanism, T rounds of a Gaussian of multiplier sigma (Theorem 3), so `-w` is accounted as
`uldp-avg`. The silo update and the aggregation are `per_user_clipping.PerUserClipping`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .per_user_clipping import per_user_plan, per_user_spec, weighted_variant
from .registry import PlanInputs

if TYPE_CHECKING:
    from uldp.accountants.plan import Plan


def avg_plan(inputs: PlanInputs) -> Plan:
    return per_user_plan("uldp-avg", inputs)


SPEC = per_user_spec(
    "uldp-avg",
    "ULDP-AVG, every user trains Q local epochs, its delta is clipped "
    "and weighted 1/|S| (Algorithm 3, Theorem 3).",
    avg_plan,
)
WEIGHTED_SPEC = weighted_variant(SPEC)
