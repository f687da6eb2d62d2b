"""The mechanisms a run releases: kept importable here; they live in `accountants.events`."""

from .events import Mechanism, ParallelSilos, SubsampledGaussian, silos_of

__all__ = ["Mechanism", "ParallelSilos", "SubsampledGaussian", "silos_of"]
