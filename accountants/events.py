"""Descriptions of what a training run releases, separate from how it is accounted.

A run is described first (this module: plain frozen data) and accounted second (the accountants
of `accountants.registry`: rdp, pld, prv), as dp-accounting separates `dp_event` from its
accountants. We do not reuse `dp_accounting.dp_event` here because importing dp_accounting
costs about a second, and the RDP path of the CLI must start in well under one;
`accountants.tight.pld` builds dp-accounting's PLDs from these descriptions lazily.

Neighbouring relation throughout: add or remove one unit (a record, or every record of one user
for the user-level algorithms), as in ULDP-FL §2.2 and the RDP analysis of the sampled Gaussian
(Mironov, Talwar, Zhang 2019); `Group` widens the unit to k records.

The ranges an event may be accounted in live here too, beside the events they bound (the noise
multipliers every accountant takes, the smallest the tight ones take, the largest group the PLD
group bound serves), so that the CLI checks them without importing any accountant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from uldp.errors import InvalidParameter

#: The noise multipliers the accountants compute with. Below SIGMA_MIN, 1 / (2 sigma**2) times an
#: order (up to 2**17) and a step count leaves the double range and epsilon is infinite. Above
#: SIGMA_MAX the noise is a million times the signal and epsilon ~0; larger values only cost time
#: (RDP took 25 s at 1e26 and 70 s at 1e100, searching ever larger orders) until sigma**2
#: overflows at 1.3e154 (OverflowError). The CLI's range (uldp.cli.options) is [1e-6, 1e6].
SIGMA_MIN = 1e-100
SIGMA_MAX = 1e6
#: The smallest sigma the tight accountants (PLD, PRV) take. Below it epsilon is in the hundreds
#: even for 10 steps, and their grids cannot resolve the loss: at sigma 0.05 PLD took 30 s for 10
#: steps and 290 s for 1e5, PRV failed ("Cannot compute epsilon"), and at 1e-6 PLD overflowed.
#: RDP has no such limit.
TIGHT_SIGMA_MIN = 0.1
#: The largest group the PLD group bound (`accountants.tight.pld`) serves: it builds a mixture of k + 1
#: Gaussians per step, whose grid and dp-accounting's inversion of its loss grow with k; at
#: k = 1e6 it ran out of range after 30 s and 3.7 GB (issue 12). Measured in docs/performance.md.
MAX_PLD_GROUP_K = 2**14


@dataclass(frozen=True)
class SubsampledGaussian:
    """`steps` self-compositions of a Poisson-subsampled Gaussian mechanism.

    sigma: noise multiplier (noise std divided by the l2 sensitivity).
    q: Poisson sampling probability in (0, 1]; q = 1 means no sub-sampling
       (the plain Gaussian mechanism, ULDP-FL Lemma 3).
    steps: number of compositions (Lemma 1).
    """

    sigma: float
    q: float
    steps: int

    def __post_init__(self) -> None:
        if not self.sigma > 0:
            raise InvalidParameter(f"sigma must be > 0, got {self.sigma}")
        if not SIGMA_MIN <= self.sigma <= SIGMA_MAX:
            raise InvalidParameter(
                f"sigma must be in [{SIGMA_MIN:g}, {SIGMA_MAX:g}] to be accounted, got {self.sigma:g}"
            )
        if not 0 < self.q <= 1:
            raise InvalidParameter(f"q must be in (0, 1], got {self.q}")
        if self.steps < 0:
            raise InvalidParameter(f"steps must be >= 0, got {self.steps}")


@dataclass(frozen=True)
class ParallelSilos:
    """Per-silo mechanisms run on disjoint data (ULDP-FL §D.2).

    Each record lives in exactly one silo, so at record level the federation is
    as private as its least private silo (parallel composition: the RDP is the
    order-wise maximum over silos, the privacy profile the maximum of profiles).
    """

    silos: tuple[SubsampledGaussian, ...]

    def __post_init__(self) -> None:
        if not self.silos:
            raise InvalidParameter("at least one silo is needed")


@dataclass(frozen=True)
class Composed:
    """Sequential composition of events on the same data (ULDP-FL Lemma 1: RDP curves add).

    Marathe & Kanani's horizontal composition (Theorem 3.9) is one: a subject's members' runs.
    """

    events: tuple[Event, ...]

    def __post_init__(self) -> None:
        if not self.events:
            raise InvalidParameter("a composition needs at least one event")


@dataclass(frozen=True)
class Group:
    """`event` for a group of k records added or removed together (ULDP-FL §2.2, Lemmas 5-6)."""

    event: Event
    k: int

    def __post_init__(self) -> None:
        if self.k < 1:
            raise InvalidParameter(f"k must be >= 1, got {self.k}")


@dataclass(frozen=True)
class KnownParticipation:
    """`rounds` rounds of a Gaussian (multiplier sigma) seen by an observer who knows the sample.

    The user takes part in each round with probability q and the observer (the server that
    draws the sample, ULDP-FL Algorithm 4) knows in which: a mixture over the participation count
    K ~ Binomial(rounds, q) of K plain Gaussian rounds (`accountants.rdp.participation`).
    """

    sigma: float
    q: float
    rounds: int

    def __post_init__(self) -> None:
        SubsampledGaussian(self.sigma, self.q, self.rounds)  # the same ranges


Mechanism = SubsampledGaussian | ParallelSilos
Event = SubsampledGaussian | ParallelSilos | Composed | Group | KnownParticipation


def silos_of(mechanism: Mechanism) -> tuple[SubsampledGaussian, ...]:
    """The per-silo mechanisms; a single mechanism is one silo."""
    if isinstance(mechanism, ParallelSilos):
        return mechanism.silos
    return (mechanism,)


def describe(event: Event) -> str:
    """A short name of the event's kind, for messages."""
    if isinstance(event, Group):
        return f"a group of {event.k} over {describe(event.event)}"
    if isinstance(event, Composed):
        return f"a composition of {len(event.events)} events"
    return {
        SubsampledGaussian: "a sub-sampled Gaussian",
        ParallelSilos: "parallel silos",
        KnownParticipation: "a known-participation mixture",
    }[type(event)]


def check_tight_sigma(mechanisms: Sequence[SubsampledGaussian], accountant: str) -> None:
    """InvalidParameter, before any work, for a sigma below what PLD and PRV serve."""
    smallest = min(m.sigma for m in mechanisms)
    if smallest < TIGHT_SIGMA_MIN:
        raise InvalidParameter(
            f"the {accountant} accountant serves noise multipliers >= {TIGHT_SIGMA_MIN:g}, got "
            f"sigma = {smallest:g} (its grid cannot resolve a loss that large); use the rdp accountant"
        )
