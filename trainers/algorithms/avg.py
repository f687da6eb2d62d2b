"""`uldp-avg` and `uldp-avg-w`: ULDP-AVG, per-user clipping of Q local epochs (ULDP-FL Algorithms 3-4).

ULDP-AVG weights every user's clipped delta by w_{s,u} = 1/|S| (§5.1); ULDP-AVG-w by
n_{s,u} / N_u (Eq. 3), in the clear or through Protocol 1 (`--secure`). Both release the same
mechanism, T rounds of a Gaussian of multiplier sigma (Theorem 3), so `-w` is accounted as
`uldp-avg`. The silo update and the aggregation are `per_user_clipping.PerUserClipping`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .per_user_clipping import per_user_plan, trainer_factory
from .registry import AlgorithmSpec, PlanInputs

if TYPE_CHECKING:
    from uldp.accountants.algorithms import Plan


def avg_plan(inputs: PlanInputs) -> Plan:
    return per_user_plan("uldp-avg", inputs)


SPEC = AlgorithmSpec(name="uldp-avg", help="ULDP-AVG: every user trains Q local epochs, its delta "
                     "is clipped and weighted 1/|S| (Algorithm 3, Theorem 3).",
                     build=trainer_factory("uldp-avg"), plan=avg_plan)

WEIGHTED_SPEC = AlgorithmSpec(name="uldp-avg-w", help="ULDP-AVG-w: ULDP-AVG with weights n_su / N_u "
                              "(Eq. 3); --secure computes them by Protocol 1.",
                              build=trainer_factory("uldp-avg-w"), plan=avg_plan,
                              accounted_as="uldp-avg", secure=True)
