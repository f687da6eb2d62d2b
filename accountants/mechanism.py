"""Descriptions of what a training run releases, separate from how it is accounted.

A run is described first (this module: plain frozen data) and accounted second
(`rdp`, `pld`, `prv`), as dp-accounting separates `dp_event` from its accountants.
We do not reuse `dp_accounting.dp_event` here because importing dp_accounting
costs about a second, and the RDP path of the CLI must start in well under one;
`accountants.pld` translates these descriptions into dp-accounting events lazily.

Neighbouring relation throughout: add or remove one unit (a record, or every
record of one user for the user-level algorithms), as in ULDP-FL §2.2 and the
RDP analysis of the sampled Gaussian (Mironov, Talwar, Zhang 2019).
"""
from __future__ import annotations

from uldp.errors import InvalidParameter
from dataclasses import dataclass


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


Mechanism = SubsampledGaussian | ParallelSilos


def silos_of(mechanism: Mechanism) -> tuple[SubsampledGaussian, ...]:
    """The per-silo mechanisms; a single mechanism is one silo."""
    if isinstance(mechanism, ParallelSilos):
        return mechanism.silos
    return (mechanism,)
