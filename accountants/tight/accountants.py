"""The tight accountants: PLD (dp-accounting) and PRV (prv-accountant).

Their libraries are imported only inside `accountants.tight.pld` and `accountants.tight.prv`'s functions,
when an event is accounted (importing dp_accounting costs about a second). A `KnownParticipation`
event (the server's view, ULDP-FL Algorithm 4) has an exact privacy profile, which both use
(`participation.known_participation_exact_epsilon`).
"""

from __future__ import annotations

from typing import cast

from ..accountant import Accounted
from ..events import Composed, Event, Group, KnownParticipation, Mechanism, ParallelSilos, SubsampledGaussian
from ..rdp.participation import known_participation_exact_epsilon

_RUNS = (SubsampledGaussian, ParallelSilos)


class _TightAccountant:
    """Runs and known participation always; groups and compositions unless a reason is set."""

    name: str
    converts_rdp = False
    no_groups: str | None = None  # why groups are refused; None: groups of runs accounted
    no_compositions: str | None = None  # why compositions are refused; None: of sub-sampled Gaussians

    def supports(self, event: Event) -> str | None:
        if isinstance(event, (*_RUNS, KnownParticipation)):
            return None
        if isinstance(event, Group):
            if self.no_groups or isinstance(event.event, _RUNS):
                return self.no_groups
            if isinstance(event.event, Composed):
                # A group over phases: each phase's group PLD, composed (accountants.tight.pld).
                return self.supports(event.event)
            return "groups of runs or of compositions of sub-sampled Gaussians only"
        if isinstance(event, Composed):
            if self.no_compositions or all(isinstance(part, SubsampledGaussian) for part in event.events):
                return self.no_compositions
            return "compositions of sub-sampled Gaussians only"
        return "unknown event"

    def epsilon(self, event: Event, delta: float, **_: object) -> Accounted:
        if isinstance(event, KnownParticipation):
            return Accounted(known_participation_exact_epsilon(event, delta))
        return self._epsilon(event, delta)

    def _epsilon(self, event: Event, delta: float) -> Accounted:
        raise NotImplementedError


class PldAccountant(_TightAccountant):
    """Privacy loss distributions (`accountants.tight.pld`): runs, groups of k (mixture of Gaussians,
    Choquette-Choo et al. 2024 Cor. 4.7), and compositions of sub-sampled Gaussians, for one
    record or a group of k (each part's group PLD, composed)."""

    name = "pld"

    def _epsilon(self, event: Event, delta: float) -> Accounted:
        from .pld import pld_epsilon, pld_epsilon_composed

        if isinstance(event, Group) and isinstance(event.event, Composed):
            parts = cast(tuple[SubsampledGaussian, ...], event.event.events)
            return Accounted(pld_epsilon_composed(parts, delta, k=event.k), group_size_used=event.k)
        if isinstance(event, Group):
            return Accounted(
                pld_epsilon(cast(Mechanism, event.event), delta, k=event.k), group_size_used=event.k
            )
        if isinstance(event, Composed):
            return Accounted(pld_epsilon_composed(cast(tuple[SubsampledGaussian, ...], event.events), delta))
        return Accounted(pld_epsilon(cast(Mechanism, event), delta))


class PrvAccountant(_TightAccountant):
    """Privacy random variables (`accountants.tight.prv`, Gopi et al. 2021): record level only."""

    name = "prv"
    no_groups = "record level only (prv-accountant has no group mechanism); use rdp or pld"
    no_compositions = "one run at a time; compose with rdp or pld"

    def _epsilon(self, event: Event, delta: float) -> Accounted:
        from .prv import prv_epsilon

        return Accounted(prv_epsilon(cast(Mechanism, event), delta))
