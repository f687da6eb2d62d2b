"""The tight accountants: PLD (dp-accounting) and PRV (prv-accountant), record and group level.

Both are imported lazily by the registry's callers only through `accountants.pld` and
`accountants.prv`, which import their libraries inside the functions (importing dp_accounting
costs about a second). A `KnownParticipation` event (the server's view, ULDP-FL Algorithm 4)
has an exact privacy profile, which both use (`participation.known_participation_exact_epsilon`).
"""
from __future__ import annotations

from .accountant import Accounted
from .events import Composed, Event, Group, KnownParticipation, ParallelSilos, SubsampledGaussian
from .participation import known_participation_exact_epsilon

_RUNS = (SubsampledGaussian, ParallelSilos)


class PldAccountant:
    """Privacy loss distributions (`accountants.pld`): runs, groups of k (mixture of Gaussians,
    Choquette-Choo et al. 2024 Cor. 4.7), and compositions of sub-sampled Gaussians."""

    name = "pld"
    converts_rdp = False

    def supports(self, event: Event) -> str | None:
        if isinstance(event, (*_RUNS, KnownParticipation)):
            return None
        if isinstance(event, Group):
            return None if isinstance(event.event, _RUNS) else "groups of runs only (one mechanism or silos)"
        if isinstance(event, Composed):
            if all(isinstance(part, SubsampledGaussian) for part in event.events):
                return None
            return "compositions of sub-sampled Gaussians only"
        return "unknown event"

    def epsilon(self, event: Event, delta: float, **_: object) -> Accounted:
        from .pld import pld_epsilon, pld_epsilon_composed

        if isinstance(event, KnownParticipation):
            return Accounted(known_participation_exact_epsilon(event, delta))
        if isinstance(event, Group):
            return Accounted(pld_epsilon(event.event, delta, k=event.k), group_size_used=event.k)
        if isinstance(event, Composed):
            return Accounted(pld_epsilon_composed(event.events, delta))
        return Accounted(pld_epsilon(event, delta))


class PrvAccountant:
    """Privacy random variables (`accountants.prv`, Gopi et al. 2021): record level only."""

    name = "prv"
    converts_rdp = False

    def supports(self, event: Event) -> str | None:
        if isinstance(event, (*_RUNS, KnownParticipation)):
            return None
        if isinstance(event, Group):
            return "record level only (prv-accountant has no group mechanism); use rdp or pld"
        if isinstance(event, Composed):
            return "one run at a time; compose with rdp or pld"
        return "unknown event"

    def epsilon(self, event: Event, delta: float, **_: object) -> Accounted:
        from .prv import prv_epsilon

        if isinstance(event, KnownParticipation):
            return Accounted(known_participation_exact_epsilon(event, delta))
        return Accounted(prv_epsilon(event, delta))
