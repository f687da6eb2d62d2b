"""The RDP accountant: any event as an RDP curve, converted to (epsilon, delta) (ULDP-FL §2.2).

Runs compose by adding curves (Lemma 1), silos by their maximum (§D.2), the server's view is the
known-participation curve (`accountants.rdp.participation`); a group of k records goes through
Lemma 6 (`group_method="rdp"`) or Lemma 5 (`"normal"`) from its event's curve
(`accountants.rdp.group`). The curve is converted by Lemma 2 or Mironov 2017 Prop. 3
(`accountants.conversion`) at the best order of the set, tried in stages (`Orders.best`); with
the default set the best order is then refined over the real orders next to it
(`conversion.refine`), so the bound is within 0.1% of the best real order.
"""

from __future__ import annotations

import math

from ..accountant import Accounted
from ..conversion import CONVERSIONS, TV_RULE_NOTE, rdp_to_dp, refine
from ..events import Composed, Event, Group, KnownParticipation, ParallelSilos, SubsampledGaussian, describe
from ..orders import Orders, OrdersSpec
from .curves import event_rdp
from .group import normal_group, rdp_group
from .profile import RdpProfile

RDP_GROUP_METHODS = ("rdp", "normal")
_CURVES = (SubsampledGaussian, ParallelSilos, KnownParticipation)


class RdpAccountant:
    name = "rdp"
    converts_rdp = True  # its guarantee depends on the RDP-to-DP conversion

    def supports(self, event: Event) -> str | None:
        if isinstance(event, Group):
            if isinstance(event.event, Group):
                return "a group of groups; give one Group with the product of the sizes"
            return self.supports(event.event)
        if isinstance(event, Composed):
            for part in event.events:
                if isinstance(part, Group):
                    return "a composition with a group inside; group the whole composition instead"
                reason = self.supports(part)
                if reason:
                    return reason
            return None
        return None if isinstance(event, _CURVES) else f"unknown event {describe(event)}"

    def epsilon(
        self,
        event: Event,
        delta: float,
        *,
        conversion: str = "improved",
        orders: OrdersSpec = "default",
        group_method: str = "rdp",
        profile: RdpProfile | None = None,
        real_orders: bool = True,
        **_: object,
    ) -> Accounted:
        """Epsilon at `delta`; `profile` (the curve of the event, or of a group's event) is reused
        when given, so several k and methods of one run evaluate each order once. `real_orders`: with
        the default orders, also minimise over the real orders next to the best one; False keeps
        to the grid (a valid bound too), for a composition of many runs with different
        multipliers, where each real order tried costs one series per run and no cache helps."""
        from uldp.errors import InvalidParameter

        if conversion not in CONVERSIONS:
            raise InvalidParameter(f"conversion must be one of {', '.join(CONVERSIONS)}, got {conversion!r}")
        orders = Orders.parse(orders)
        log_delta = math.log(delta)
        if isinstance(event, Group):
            if group_method not in RDP_GROUP_METHODS:
                raise InvalidParameter(
                    f"the rdp accountant's group method must be one of "
                    f"{', '.join(RDP_GROUP_METHODS)}, got {group_method!r}"
                )
            convert = rdp_group if group_method == "rdp" else normal_group
            bound = convert(profile or RdpProfile(event.event), event.k, log_delta, orders, conversion)
            return Accounted(bound.epsilon, bound.order, bound.base_order, bound.group_size_used, bound.note)
        curve = profile.at if profile is not None else (lambda grid: event_rdp(event, grid))
        conv = orders.best(lambda grid: rdp_to_dp(grid, curve(grid), log_delta, conversion))
        if real_orders and orders.preset == "default":  # a listed set is the user's choice: keep to it
            conv = refine(conv, orders.grid, curve, log_delta, conversion)
        note = TV_RULE_NOTE if conv.rule == "tv" else ""
        return Accounted(conv.epsilon, conv.order, conv.order, 1, note)
