"""Guarantees of a mechanism at record, group and user level, and of an algorithm's plan.

Every epsilon returned is an upper bound at the stated delta under add-or-remove adjacency of
the stated unit (record, group of k records, or user); where no bound can be had with the
chosen orders the epsilon is infinite and `note` says why. Each is one event accounted by one
accountant of `accountants.registry`; this module only says which events a request asks for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace

from uldp.errors import InvalidParameter

from .conversion import CONVERSIONS, Conversion
from .events import Composed, Group, KnownParticipation, Mechanism, SubsampledGaussian
from .orders import Orders, OrdersSpec
from .plan import Plan
from .private_sampling import SERVER_VIEW_NOTE
from .rdp.profile import RdpProfile
from .registry import ACCOUNTANTS as REGISTRY
from .registry import account_event, accountant_named

ACCOUNTANTS = tuple(REGISTRY)
#: Group method -> (accountant, its group method): Lemma 6, Lemma 5 (both RDP), or the PLD mixture.
GROUP_ACCOUNTING = {"rdp": ("rdp", "rdp"), "normal": ("rdp", "normal"), "pld": ("pld", None)}
GROUP_METHODS = tuple(GROUP_ACCOUNTING)

METHOD_LABELS = {
    "record": "record level",
    "rdp": "Lemma 6 (RDP group)",
    "normal": "Lemma 5 (DP group)",
    "pld": "PLD mixture of Gaussians",
}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Guarantee:
    """(epsilon, delta) for `k` records (k = 1: one record) or a whole user (level 'user')."""

    epsilon: float
    delta: float
    k: int | None  # None: a whole user (level 'user')
    level: str  # "record", "group" or "user"
    method: str  # "record", "rdp", "normal" or "pld"
    accountant: str  # "rdp", "pld" or "prv"
    conversion: str | None  # RDP-to-DP conversion; None for PLD/PRV
    order: float | None = None  # RDP order of the final guarantee
    base_order: float | None = None  # order of the record-level RDP it came from (Lemma 6)
    group_size_used: int | None = None
    algorithm: str | None = None
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _check(
    delta: float, ks: Sequence[int], methods: Iterable[str], accountants: Iterable[str], conversion: str
) -> None:
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    if any(k < 1 for k in ks):
        raise InvalidParameter("k must be >= 1")
    for m in methods:
        if m not in GROUP_METHODS:
            raise InvalidParameter(f"group method must be one of {', '.join(GROUP_METHODS)}, got {m!r}")
    for a in accountants:
        accountant_named(a)
    if conversion not in CONVERSIONS:
        raise InvalidParameter(f"conversion must be one of {', '.join(CONVERSIONS)}, got {conversion!r}")


def record_level(
    mechanism: Mechanism,
    delta: float,
    accountant: str = "rdp",
    conversion: str = "improved",
    orders: OrdersSpec = "default",
    profile: RdpProfile | None = None,
) -> Guarantee:
    """Record-level (k = 1) epsilon with one accountant."""
    _check(delta, [1], [], [accountant], conversion)
    chosen = accountant_named(accountant)
    if chosen.converts_rdp:  # one RDP curve per run, shared by every k and method asked for
        profile = profile or RdpProfile(mechanism)
    found = account_event(mechanism, delta, accountant, conversion=conversion, orders=orders, profile=profile)
    return Guarantee(
        found.epsilon,
        delta,
        1,
        "record",
        "record",
        accountant,
        conversion if chosen.converts_rdp else None,
        found.order,
        found.base_order,
        found.group_size_used,
        note=found.note,
    )


def group_level(
    mechanism: Mechanism,
    delta: float,
    k: int,
    method: str,
    conversion: str = "improved",
    orders: OrdersSpec = "default",
    profile: RdpProfile | None = None,
) -> Guarantee:
    """Epsilon for a group of k > 1 records by one group method."""
    _check(delta, [k], [method], [], conversion)
    accountant, group_method = GROUP_ACCOUNTING[method]
    chosen = accountant_named(accountant)
    found = account_event(
        Group(mechanism, k),
        delta,
        accountant,
        conversion=conversion,
        orders=orders,
        group_method=group_method,
        profile=profile,
    )
    return Guarantee(
        found.epsilon,
        delta,
        k,
        "group",
        method,
        accountant,
        conversion if chosen.converts_rdp else None,
        found.order,
        found.base_order,
        found.group_size_used,
        note=found.note,
    )


def account(
    mechanism: Mechanism,
    *,
    delta: float = 1e-5,
    ks: Sequence[int] = (1,),
    methods: Sequence[str] = ("rdp",),
    accountants: Sequence[str] = ("rdp",),
    conversion: str = "improved",
    orders: OrdersSpec = "default",
    progress: Progress | None = None,
) -> list[Guarantee]:
    """Every requested guarantee: k = 1 by each accountant, each k > 1 by each group method."""
    _check(delta, ks, methods, accountants, conversion)
    Orders.parse(orders)  # fail early on a bad order set
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


def account_plan(
    plan: Plan,
    *,
    delta: float,
    accountants: Sequence[str] = ("rdp",),
    ks: Sequence[int] | None = None,
    methods: Sequence[str] = ("rdp",),
    conversion: str = "improved",
    orders: OrdersSpec = "default",
    server_view: bool = True,
    private_sampling: bool = False,
    progress: Progress | None = None,
) -> list[Guarantee]:
    """The guarantees an algorithm's plan gives: THE function from a `Plan` to epsilons.

    - a bare mechanism (plan.algorithm "mechanism"): `account` (record and group level);
    - ULDP-GROUP-k (plan.group_k set): user level is group level for the group_k records a user
      keeps (Proposition 1, Theorem 2); group_k is always accounted (after the other `ks`, when
      they leave it out) and only it is tagged level "user"; k = 1 is "record", other k "group".
      `ks` defaults to (group_k,), so the first guarantee is then Theorem 2's;
    - the other algorithms: user level directly (Theorems 1 and 3), by each accountant, then,
      with user sampling and `server_view`, the view of the server that draws the sample
      (a `KnownParticipation` event: no amplification against it, ULDP-FL Remark 1). With
      `private_sampling` (ULDP-FL §4.1, `private_sampling.py`: the silos draw the sample by
      oblivious transfer at q = m/P, so the server does not learn it) that row is the released
      model's first user-level guarantee, amplified the same, and says so in its note.
    The first guarantee with the defaults is what `uldp train` reports for the run.
    """
    say = progress or (lambda text: None)
    if ks is None:
        ks = (plan.group_k,) if plan.group_k is not None else (1,)
    mech = plan.mechanism
    sampled = plan.group_k is None and isinstance(mech, SubsampledGaussian) and mech.q < 1
    if private_sampling and (plan.algorithm == "mechanism" or not sampled):
        raise InvalidParameter(
            "private sampling hides the user sample from the server: it needs a user-level "
            "algorithm that samples users (user q < 1)"
        )
    if plan.algorithm == "mechanism":
        return account(
            plan.mechanism,
            delta=delta,
            ks=ks,
            methods=methods,
            accountants=accountants,
            conversion=conversion,
            orders=orders,
            progress=progress,
        )
    out: list[Guarantee] = []
    if plan.group_k is None:
        for accountant in accountants:
            say(f"{plan.algorithm}, {accountant}")
            g = record_level(plan.mechanism, delta, accountant, conversion, orders)
            out.append(replace(g, k=None, level="user", method="user", algorithm=plan.algorithm))
        if server_view and sampled and private_sampling:
            # The server's view is the released model's (ULDP-FL §4.1): the same number.
            model = out[0]
            out.append(replace(model, method="server view", note=SERVER_VIEW_NOTE))
        elif server_view and sampled:
            assert isinstance(mech, SubsampledGaussian)
            seen = account_event(
                KnownParticipation(mech.sigma, mech.q, mech.steps),
                delta,
                "rdp",
                conversion=conversion,
                orders=orders,
            )
            out.append(
                Guarantee(
                    seen.epsilon,
                    delta,
                    None,
                    "user",
                    "server view",
                    "rdp",
                    conversion,
                    seen.order,
                    algorithm=plan.algorithm,
                    note="knows the user sample",
                )
            )
        return out
    # A user is the group of the group_k records the algorithm keeps, so that size is always
    # accounted, and only it is user level: a smaller group is some of one user's records.
    for k in dict.fromkeys([*ks, plan.group_k]):
        level = "user" if k == plan.group_k else "record" if k == 1 else "group"
        if k == 1:
            for accountant in accountants:
                g = record_level(plan.mechanism, delta, accountant, conversion, orders)
                out.append(replace(g, level=level, algorithm=plan.algorithm))
            continue
        for method in methods:
            say(f"{plan.algorithm}, k={k}, {method}")
            g = group_level(plan.mechanism, delta, k, method, conversion, orders)
            out.append(replace(g, level=level, algorithm=plan.algorithm))
    return out


def known_participation_epsilon(
    sigma: float,
    q: float,
    rounds: int,
    delta: float,
    *,
    conversion: str = "improved",
    orders: OrdersSpec = "default",
) -> Conversion:
    """Epsilon at `delta` for an observer who knows the rounds the user took part in (RDP)."""
    found = account_event(
        KnownParticipation(sigma, q, rounds), delta, "rdp", conversion=conversion, orders=orders
    )
    return Conversion(found.epsilon, found.order)


def rdp_epsilon(
    parts: Sequence[tuple[float, float, int]],
    delta: float,
    conversion: str = "improved",
    orders: OrdersSpec = "default",
) -> float:
    """Epsilon at `delta` of the composition of `steps` Poisson-subsampled Gaussian steps per part.

    parts: (sigma, q, steps) triples, composed sequentially.
    """
    event = Composed(tuple(SubsampledGaussian(sigma, q, steps) for sigma, q, steps in parts))
    return account_event(event, delta, "rdp", conversion=conversion, orders=orders).epsilon
