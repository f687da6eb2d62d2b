"""One entry point that accounts a mechanism at record, group and user level.

Every epsilon returned is an upper bound at the stated delta under add-or-remove adjacency of
the stated unit (record, group of k records, or user); where no bound can be had with the
chosen orders the epsilon is infinite and `note` says why.
"""
from __future__ import annotations

from uldp.errors import InvalidParameter
import math
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Sequence

from .conversion import CONVERSIONS, rdp_to_dp
from .group import normal_group, rdp_group
from .mechanism import Mechanism
from .orders import best_over_stages, resolve_orders
from .profile import RdpProfile

ACCOUNTANTS = ("rdp", "pld", "prv")
GROUP_METHODS = ("rdp", "normal", "pld")

METHOD_LABELS = {
    "record": "record level",
    "rdp": "Lemma 6 (RDP group)",
    "normal": "Lemma 5 (DP group)",
    "pld": "PLD mixture of Gaussians",
}


@dataclass(frozen=True)
class Guarantee:
    """(epsilon, delta) for `k` records (k = 1: one record) or a whole user (level 'user')."""

    epsilon: float
    delta: float
    k: int
    level: str            # "record", "group" or "user"
    method: str           # "record", "rdp", "normal" or "pld"
    accountant: str       # "rdp", "pld" or "prv"
    conversion: str | None  # RDP-to-DP conversion; None for PLD/PRV
    order: float | None = None       # RDP order of the final guarantee
    base_order: float | None = None  # order of the record-level RDP it came from (Lemma 6)
    group_size_used: int | None = None
    algorithm: str | None = None
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _check(delta: float, ks: Sequence[int], methods: Iterable[str], accountants: Iterable[str],
           conversion: str) -> None:
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    if any(k < 1 for k in ks):
        raise InvalidParameter("k must be >= 1")
    for m in methods:
        if m not in GROUP_METHODS:
            raise InvalidParameter(f"group method must be one of {', '.join(GROUP_METHODS)}, got {m!r}")
    for a in accountants:
        if a not in ACCOUNTANTS:
            raise InvalidParameter(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got {a!r}")
    if conversion not in CONVERSIONS:
        raise InvalidParameter(f"conversion must be one of {', '.join(CONVERSIONS)}, got {conversion!r}")


def record_level(mechanism: Mechanism, delta: float, accountant: str = "rdp",
                 conversion: str = "improved", orders="default",
                 profile: RdpProfile | None = None) -> Guarantee:
    """Record-level (k = 1) epsilon with one accountant."""
    _check(delta, [1], [], [accountant], conversion)
    if accountant == "rdp":
        profile = profile or RdpProfile(mechanism)
        conv = best_over_stages(resolve_orders(orders), orders, lambda grid: rdp_to_dp(
            grid, profile.at(grid), math.log(delta), conversion))
        return Guarantee(conv.epsilon, delta, 1, "record", "record", "rdp", conversion,
                         conv.order, conv.order, 1)
    if accountant == "pld":
        from .pld import pld_epsilon
        return Guarantee(pld_epsilon(mechanism, delta), delta, 1, "record", "record", "pld", None)
    from .prv import prv_epsilon
    return Guarantee(prv_epsilon(mechanism, delta), delta, 1, "record", "record", "prv", None)


def group_level(mechanism: Mechanism, delta: float, k: int, method: str,
                conversion: str = "improved", orders="default",
                profile: RdpProfile | None = None) -> Guarantee:
    """Epsilon for a group of k > 1 records by one group method."""
    _check(delta, [k], [method], [], conversion)
    if method == "pld":
        from .pld import pld_epsilon
        return Guarantee(pld_epsilon(mechanism, delta, k=k), delta, k, "group", "pld", "pld", None,
                         group_size_used=k)
    profile = profile or RdpProfile(mechanism)
    convert = rdp_group if method == "rdp" else normal_group
    bound = convert(profile, k, math.log(delta), orders, conversion)
    return Guarantee(bound.epsilon, delta, k, "group", method, "rdp", conversion, bound.order,
                     bound.base_order, bound.group_size_used, note=bound.note)


def account(mechanism: Mechanism, *, delta: float = 1e-5, ks: Sequence[int] = (1,),
            methods: Sequence[str] = ("rdp",), accountants: Sequence[str] = ("rdp",),
            conversion: str = "improved", orders="default",
            progress: Callable[[str], None] | None = None) -> list[Guarantee]:
    """Every requested guarantee: k = 1 by each accountant, each k > 1 by each group method."""
    _check(delta, ks, methods, accountants, conversion)
    resolve_orders(orders)  # fail early on a bad order set
    profile = RdpProfile(mechanism)
    results: list[Guarantee] = []
    for k in dict.fromkeys(ks):
        if k == 1:
            for accountant in dict.fromkeys(accountants):
                if progress:
                    progress(f"record level, {accountant}")
                results.append(record_level(mechanism, delta, accountant, conversion, orders, profile))
            continue
        for method in dict.fromkeys(methods):
            if progress:
                progress(f"k={k}, {method}")
            results.append(group_level(mechanism, delta, k, method, conversion, orders, profile))
    return results
