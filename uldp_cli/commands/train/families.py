"""The algorithm families of `uldp train`, each registered once, in the order `--help` lists their
options; `family_of` finds the family of a registered algorithm."""

from __future__ import annotations

from types import MappingProxyType

from . import dropouts, rpdp_fl, subject_level, uldp_fl
from .family import Family

FAMILIES = MappingProxyType(
    {
        family.name: family
        for family in (uldp_fl.FAMILY, rpdp_fl.FAMILY, dropouts.FAMILY, subject_level.FAMILY)
    }
)


def families_of(algo: str) -> list[Family]:
    """The families that claim the registered algorithm `algo` (exactly one, a test checks)."""
    from uldp.trainers.algorithms import get_algorithm

    spec = get_algorithm(algo)
    return [family for family in FAMILIES.values() if family.claims(spec)]


def family_of(algo: str) -> Family:
    """The family of the registered algorithm `algo`."""
    found = families_of(algo)
    if len(found) != 1:  # a spec of two kinds at once (record and subject level, say): a bug
        raise AssertionError(f"{algo} is claimed by {len(found)} families: {[f.name for f in found]}")
    return found[0]
