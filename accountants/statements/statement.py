"""One privacy statement for one run: every guarantee it gives, what each assumes and means.

A statement is a list of `Claim`s, one per unit and observer: one record, a group of k records,
one whole user, a subject or a budget tier, seen in the released model or by the server. Each
claim holds its figure by every accountant that can bound it (RDP next to the tight PLD and
PRV, and the gap between them) and what the tightest figure means operationally: the largest
true-positive rate a membership-inference attacker can reach at a few false-positive rates
(`accountants.statements.tradeoff`), next to the cruder e^epsilon * FPR + delta of the headline point.

The numbers come from the functions the other commands use (`account.account`,
`account.account_plan`, `registry.account_event`): a statement never recomputes a guarantee
another way. Its shape is `uldp/report-schema.json` (`SCHEMA_VERSION`).

References: ULDP-FL (Kato et al.) §2.2 and Theorems 1-3 for the record, group and user levels
and Remark 1 for the server's view; Kairouz, Oh, Viswanath 2015 and Dong, Roth, Su 2019 for the
hypothesis-testing reading; TF-Privacy's `compute_dp_sgd_privacy_statement` for the form.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from uldp.errors import InvalidParameter

from ..account import METHOD_LABELS, Guarantee, account, account_plan
from ..assumptions import Assumptions
from ..events import Event, Group, KnownParticipation, SubsampledGaussian
from ..orders import Orders, OrdersSpec
from ..plan import Plan
from ..registry import account_event
from .external import DpSgdDescription
from .tradeoff import FPRS, POINT_SOURCE, AttackBound, attack_bound, tpr_from_dp

#: The version of the JSON a statement becomes (`Statement.as_dict`, uldp/report-schema.json).
SCHEMA_VERSION = "1.0"
SCHEMA_ID = "https://uldp.dev/schemas/report-1.0.json"
#: What a report accounts by default: RDP next to both tight accountants; groups by every method.
REPORT_ACCOUNTANTS = ("rdp", "pld", "prv")
REPORT_GROUP_METHODS = ("rdp", "normal", "pld")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Accounting:
    """What a statement asks of the accountants (the flags of `uldp report`): delta, the group
    sizes, the accountants side by side, the group methods, and RDP's conversion and orders."""

    delta: float = 1e-5
    ks: tuple[int, ...] = (1,)
    accountants: tuple[str, ...] = REPORT_ACCOUNTANTS
    methods: tuple[str, ...] = REPORT_GROUP_METHODS
    conversion: str = "improved"
    orders: OrdersSpec = "default"


#: The statement's defaults: delta 1e-5, record level, every accountant and group method.
DEFAULT_ACCOUNTING = Accounting()


@dataclass(frozen=True)
class Bound:
    """One accountant's (epsilon, delta) for a claim, and the attack it allows."""

    accountant: str
    method: str  # "record", "user", "rdp", "normal", "pld", "server view" or "recorded"
    label: str
    epsilon: float
    delta: float
    conversion: str | None
    order: float | None
    attack: AttackBound | None
    note: str = ""
    # What was accounted, to draw its whole ROC bound (`tradeoff.roc_bound`); None: recorded.
    event: Event | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict:
        return {
            "accountant": self.accountant,
            "method": self.method,
            "label": self.label,
            "epsilon": _finite_or_none(self.epsilon),
            "delta": self.delta,
            "conversion": self.conversion,
            "order": self.order,
            "attack": None if self.attack is None else self.attack.as_dict(),
            "note": self.note,
        }


@dataclass(frozen=True)
class Claim:
    """Every bound on one unit's privacy against one observer."""

    level: str  # "record", "group", "user", "subject", "tier"
    unit: str  # in words: "one record", "any 8 records", ...
    view: str  # "released model" or "server"
    k: int | None
    bounds: tuple[Bound, ...]
    neighbouring: str
    note: str = ""

    @property
    def best(self) -> Bound:
        """The smallest epsilon: every bound holds, so the smallest is the guarantee."""
        return min(self.bounds, key=lambda b: b.epsilon)

    @property
    def rdp(self) -> Bound | None:
        return next((b for b in self.bounds if b.accountant == "rdp"), None)

    @property
    def gap(self) -> float | None:
        """RDP's epsilon over the tightest one (1.0: RDP is the tightest); None without both."""
        rdp, best = self.rdp, self.best
        if rdp is None or best.accountant == "rdp" or not 0 < best.epsilon < math.inf:
            return None
        return rdp.epsilon / best.epsilon

    def attack(self) -> AttackBound | None:
        """The smallest TPR bound at each FPR over the bounds: each is valid, so their minimum is."""
        found = [b.attack for b in self.bounds if b.attack is not None]
        if not found:
            return None
        tprs = np.min([a.tprs for a in found], axis=0)
        sources = [a.source for a in found]
        best = [sources[int(i)] for i in np.argmin([a.tprs for a in found], axis=0)]
        return AttackBound(found[0].fprs, tuple(float(t) for t in tprs), "; ".join(dict.fromkeys(best)))

    def point_attack(self) -> tuple[float, ...]:
        """TPR bounds from the headline (epsilon, delta) point alone, for comparison."""
        best = self.best
        return tuple(float(t) for t in tpr_from_dp(best.epsilon, best.delta, FPRS))

    def as_dict(self) -> dict:
        attack = self.attack()
        best = self.best
        return {
            "level": self.level,
            "unit": self.unit,
            "view": self.view,
            "k": self.k,
            "neighbouring": self.neighbouring,
            "epsilon": _finite_or_none(best.epsilon),
            "delta": best.delta,
            "accountant": best.accountant,
            "rdp_over_tight": self.gap,
            "bounds": [b.as_dict() for b in self.bounds],
            "attack": None if attack is None else attack.as_dict(),
            "point_attack": {"fpr": list(FPRS), "tpr": list(self.point_attack())},
            "note": self.note,
        }


@dataclass
class Statement:
    """A privacy statement: what was accounted, every claim, and what they rest on."""

    source: str  # "plan", "run", "opacus" or "dp-sgd"
    title: str
    delta: float
    claims: list[Claim]
    assumptions: dict[str, str]
    caveats: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    settings: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "$schema": SCHEMA_ID,
            "schema_version": SCHEMA_VERSION,
            "command": "report",
            "source": self.source,
            "title": self.title,
            "delta": self.delta,
            "settings": self.settings,
            "claims": [c.as_dict() for c in self.claims],
            "meaning": meaning(self),
            "caveats": list(self.caveats),
            "checks": list(self.checks),
            "assumptions": dict(self.assumptions),
        }


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _attack(event: Event, g: Guarantee, orders: OrdersSpec) -> AttackBound | None:
    """The attack bound for guarantee `g` of `event`, from the same accountant's privacy curve."""
    if not math.isfinite(g.epsilon):
        return None
    point = tpr_from_dp(g.epsilon, g.delta, FPRS)
    try:
        found = attack_bound(
            event,
            g.accountant,
            conversion=g.conversion or "improved",
            orders=orders,
            group_method="normal" if g.method == "normal" else "rdp",
            epsilon=g.epsilon,
            delta=g.delta,
        )
    except InvalidParameter:
        # The accountant bounded epsilon but not its whole curve: the point's bound still holds.
        return AttackBound(FPRS, tuple(float(t) for t in point), POINT_SOURCE)
    # The curve's grid can sit a hair above the headline point (tradeoff.py); both hold.
    return AttackBound(FPRS, tuple(float(t) for t in np.minimum(found.tprs, point)), found.source)


def _bound(g: Guarantee, event: Event, orders: OrdersSpec, label: str | None = None) -> Bound:
    return Bound(
        g.accountant,
        g.method,
        label or _label(g),
        g.epsilon,
        g.delta,
        g.conversion,
        g.order,
        _attack(event, g, orders),
        g.note,
        event,
    )


def _label(g: Guarantee) -> str:
    text = METHOD_LABELS.get(g.method, g.method)
    if g.method in ("record", "user"):
        return g.accountant.upper()
    if g.method == "pld":
        return text
    return f"{text}, RDP"


def _guarded(
    failures: list[str], what: str, fn: Callable[..., list[Guarantee]], *args, **kwargs
) -> Guarantee | None:
    """The first guarantee `fn` gives, or None with the reason recorded: one accountant out of
    range (PLD past 1e7 steps, PRV at a tiny sigma) must not hide what the others can bound."""
    try:
        return fn(*args, **kwargs)[0]
    except InvalidParameter as error:
        failures.append(f"{what}: {error}")
        return None


def mechanism_claims(
    mechanism,
    how: Accounting,
    ks: Sequence[int],
    *,
    unit: str = "record",
    neighbouring: str = "add or remove one record",
    progress: Progress | None = None,
    failures: list[str] | None = None,
) -> list[Claim]:
    """Record (k = 1) and group (k > 1) claims of a mechanism, by `account.account`.

    `unit` names what one step protects ("record", or "user" for a user-level mechanism whose
    group of k is any k users, hence any k records of different users too).
    """
    failures = failures if failures is not None else []
    delta, conversion, orders = how.delta, how.conversion, how.orders
    claims = []
    for k in dict.fromkeys(ks):
        # One record by each accountant; a group of k by each group method (`account` maps the
        # method to its accountant).
        asks = (
            [(f"{unit} level by {a}", {"accountants": (a,)}, mechanism) for a in how.accountants]
            if k == 1
            else [
                (f"k = {k} by the {m} group method", {"methods": (m,)}, Group(mechanism, k))
                for m in how.methods
            ]
        )
        found: list[Bound] = []
        for what, choice, event in asks:
            if progress:
                progress(what)
            g = _guarded(
                failures,
                what,
                account,
                mechanism,
                delta=delta,
                ks=(k,),
                conversion=conversion,
                orders=orders,
                **choice,
            )
            if g is not None:
                found.append(_bound(g, event, orders))
        if not found:
            continue
        words = f"one {unit}" if k == 1 else f"any {k} {unit}s"
        relation = neighbouring if k == 1 else f"{neighbouring.replace(' one ', f' {k} ')}s, together"
        claims.append(
            Claim(
                "record" if k == 1 and unit == "record" else "group",
                words,
                "released model",
                k,
                tuple(found),
                relation,
            )
        )
    return claims


def plan_statement(
    plan: Plan,
    how: Accounting = DEFAULT_ACCOUNTING,
    *,
    user_k: int | None = None,
    source: str = "plan",
    title: str | None = None,
    private_sampling: bool = False,
    progress: Progress | None = None,
) -> Statement:
    """The statement of an algorithm's plan (or of a bare mechanism, `plan.algorithm` "mechanism").

    - bare mechanism: record level and each group of k in `how.ks`; with `user_k` (the most
      records one person has, TF-Privacy's max_examples_per_user), user level as a group of it;
    - ULDP-GROUP-k: record and group levels of its DP-SGD runs, and user level as
      `account_plan` gives it (group privacy for the k records a user keeps, Proposition 1);
    - the other ULDP-FL algorithms: user level as `account_plan` gives it (Theorems 1 and 3), for
      the released model and, with user sampling, for the server that draws the sample (with
      `private_sampling`, ULDP-FL §4.1, the server does not learn the sample: its claim holds the
      released model's bounds, as `account_plan` gives them); a record or any k records of one
      user are part of that user, and any k records of different users are at most k users:
      groups of k users by `account.account`.
    """
    if private_sampling:  # refused, as `account_plan` refuses it, without user sampling
        mech = plan.mechanism
        if (
            plan.algorithm == "mechanism"
            or plan.group_k is not None
            or not isinstance(mech, SubsampledGaussian)
            or mech.q >= 1
        ):
            raise InvalidParameter(
                "private sampling hides the user sample from the server: it needs a user-level "
                "algorithm that samples users (user q < 1)"
            )
    failures: list[str] = []
    claims: list[Claim] = []
    groups = [k for k in how.ks if k > 1]
    if plan.algorithm == "mechanism" or plan.group_k is not None:
        claims += mechanism_claims(plan.mechanism, how, [1, *groups], progress=progress, failures=failures)
    if plan.algorithm == "mechanism" and user_k is not None:
        claims += [
            replace(
                c,
                level="user",
                unit=f"one user (at most {user_k} records)",
                neighbouring=f"add or remove one user's records (at most {user_k})",
            )
            for c in mechanism_claims(plan.mechanism, how, [user_k], progress=progress, failures=failures)
        ]
    if plan.algorithm != "mechanism":
        users = _user_claims(plan, how, progress, failures, private_sampling=private_sampling)
        if plan.group_k is None and users:
            # A record belongs to one user: removing it is part of removing the user.
            claims.append(
                replace(
                    users[0],
                    level="record",
                    unit="one record",
                    k=1,
                    neighbouring="add or remove one record",
                    note="implied by the user-level guarantee: a record belongs to one user",
                )
            )
        claims += users
        if plan.group_k is None:
            by_users = mechanism_claims(
                plan.mechanism,
                how,
                groups,
                unit="user",
                neighbouring="add or remove one user",
                progress=progress,
                failures=failures,
            )
            claims += [
                replace(c, unit=f"any {c.k} users' records", note="any k records lie in at most k users")
                for c in by_users
            ]
    used = sorted({b.accountant for c in claims for b in c.bounds}, key=list(REPORT_ACCOUNTANTS).index)
    return Statement(
        source,
        title or _title(plan),
        how.delta,
        claims,
        _assumptions(plan, how, used),
        caveats=[f"not accounted: {f}" for f in failures],
    )


def _user_claims(
    plan: Plan,
    how: Accounting,
    progress: Progress | None,
    failures: list[str],
    *,
    private_sampling: bool = False,
) -> list[Claim]:
    """User level for the released model by `account_plan`, then the server's view (under
    `private_sampling` the released model's bounds: the server does not learn the sample)."""
    delta, conversion, orders = how.delta, how.conversion, how.orders
    # Without groups, one accountant at a time; ULDP-GROUP-k, one group method at a time.
    ways: list[tuple[str, dict[str, object], Event]]
    if plan.group_k is None:
        ways = [
            (f"user level by {acc}", {"accountants": (acc,), "server_view": False}, plan.mechanism)
            for acc in how.accountants
        ]
    else:
        group = Group(plan.mechanism, plan.group_k)
        ways = [(f"user level by the {m} group method", {"methods": (m,)}, group) for m in how.methods]
    found: list[Bound] = []
    for what, options, event in ways:
        g = _guarded(
            failures,
            what,
            account_plan,
            plan,
            delta=delta,
            conversion=conversion,
            orders=orders,
            progress=progress,
            **options,
        )
        if g is not None:
            found.append(_bound(g, event, orders))
    claims = []
    if found:
        note = (
            f"a user keeps at most {plan.group_k} records (Proposition 1)" if plan.group_k is not None else ""
        )
        claims.append(
            Claim(
                "user",
                "one user (every silo)",
                "released model",
                None,
                tuple(found),
                "add or remove one user",
                note,
            )
        )
    mech = plan.mechanism
    sampled = isinstance(mech, SubsampledGaussian) and mech.q < 1 and plan.group_k is None
    if sampled and private_sampling:
        if found:
            claims.append(
                Claim(
                    "user",
                    "one user (every silo)",
                    "server",
                    None,
                    tuple(found),
                    "add or remove one user",
                    "the server does not know the user sample: the silos draw it by oblivious "
                    "transfer at q = m/P (private sampling, ULDP-FL §4.1), so the released "
                    "model's bounds hold against it",
                )
            )
    elif sampled:
        assert isinstance(mech, SubsampledGaussian)
        seen = KnownParticipation(mech.sigma, mech.q, mech.steps)
        server: list[Bound] = []
        for acc in how.accountants:
            if progress:
                progress(f"server's view, {acc}")
            try:
                a = account_event(seen, delta, acc, conversion=conversion, orders=orders)
            except InvalidParameter as error:
                failures.append(f"server's view by {acc}: {error}")
                continue
            g = Guarantee(
                a.epsilon,
                delta,
                None,
                "user",
                "server view",
                acc,
                conversion if acc == "rdp" else None,
                a.order,
                algorithm=plan.algorithm,
            )
            server.append(_bound(g, seen, orders, label=f"{_label(replace(g, method='user'))}, sample known"))
        if server:
            claims.append(
                Claim(
                    "user",
                    "one user (every silo)",
                    "server",
                    None,
                    tuple(server),
                    "add or remove one user",
                    "the server draws the user sample: no amplification against it (ULDP-FL Remark 1)",
                )
            )
    return claims


def _title(plan: Plan) -> str:
    if plan.algorithm == "mechanism":
        return "DP-SGD (a Poisson-subsampled Gaussian)"
    return plan.algorithm


def _assumptions(plan: Plan, how: Accounting, used: Sequence[str]) -> dict[str, str]:
    """`assumptions.Assumptions` (delta, accountants, conversion and orders where RDP is used), with
    the statement's reading of its bounds and attack figures, then the plan's own lines."""
    return Assumptions(
        how.delta,
        tuple(used),
        how.conversion,
        Orders.parse(how.orders),
        (
            ("bound", "every epsilon is an upper bound at this delta; each claim's epsilon is its smallest"),
            (
                "attack",
                "the largest TPR any membership-inference test can reach at each FPR, from the "
                "accountant's privacy curve delta(epsilon) (Kairouz et al. 2015; Dong, Roth, Su 2019); "
                "the minimum over the accountants, each an upper bound",
            ),
            *plan.assumptions.items(),
        ),
    ).as_dict()


def recorded_claim(
    level: str,
    unit: str,
    epsilon: float,
    delta: float,
    label: str,
    *,
    view: str = "released model",
    neighbouring: str,
    note: str = "",
) -> Claim:
    """A claim whose epsilon a run recorded (its own accounting; no other accountant can redo it
    without the run's data), with the attack bound of that point."""
    attack = None
    if math.isfinite(epsilon):
        attack = AttackBound(FPRS, tuple(float(t) for t in tpr_from_dp(epsilon, delta, FPRS)), POINT_SOURCE)
    return Claim(
        level,
        unit,
        view,
        None,
        (Bound("rdp", "recorded", label, epsilon, delta, "improved", None, attack),),
        neighbouring,
        note,
    )


def meaning(statement: Statement) -> list[str]:
    """One sentence per claim: what its epsilon means to a membership-inference attacker."""
    out = []
    for claim in statement.claims:
        attack = claim.attack()
        best = claim.best
        if attack is None or not math.isfinite(best.epsilon):
            out.append(f"{claim.unit} ({claim.view}): no finite bound at delta = {best.delta:g}.")
            continue
        fpr, tpr, point = attack.fprs[1], attack.tprs[1], claim.point_attack()[1]
        crude = (
            f" (e^epsilon FPR + delta alone would allow {point:.1%})"
            if f"{point:.1%}" != f"{tpr:.1%}"
            else ""
        )
        out.append(
            f"{claim.unit} ({claim.view}): epsilon {best.epsilon:.3g} at delta {best.delta:g}; an attacker "
            f"who wrongly accuses {fpr:.0%} of non-members catches at most {tpr:.1%} of members{crude}."
        )
    return out


def dp_sgd_statement(
    description: DpSgdDescription, how: Accounting = DEFAULT_ACCOUNTING, *, progress: Progress | None = None
) -> Statement:
    """A centralised DP-SGD run as TF-Privacy's `compute_dp_sgd_privacy_statement` states it:
    record level (and user level with `max_examples_per_user`) assuming Poisson sampling, then
    the same with each record once per epoch in any order, where sampling amplifies nothing
    (`external.DpSgdDescription`: its `mechanism(poisson=False)` and `user_event(poisson=False)`)."""
    sampled = description.mechanism()
    plan = Plan(
        "mechanism",
        sampled,
        None,
        {
            "mechanism": (
                f"DP-SGD: {sampled.steps} steps (ceil(epochs / q)) of a Poisson-subsampled Gaussian, "
                f"sigma = {description.sigma:g}, q = batch / N = {sampled.q:.6g}, as TF-Privacy's "
                "compute_dp_sgd_privacy_statement counts them"
            ),
            "sampling": (
                "the claims without '(once per epoch)' assume Poisson sampling of records, as the "
                "accountants do; those with it hold for any order in which each record is used once "
                f"per epoch: {description.epoch_steps} Gaussian releases, no amplification"
            ),
            "microbatching": description.microbatching_assumption,
            "neighbouring": "add or remove one record (one user's records for user level)",
        },
    )
    k = description.max_examples_per_user
    statement = plan_statement(
        plan, how, user_k=k, source="dp-sgd", title="DP-SGD (TF-Privacy's description)", progress=progress
    )
    failures: list[str] = []
    once = mechanism_claims(
        description.mechanism(poisson=False), how, (1,), progress=progress, failures=failures
    )
    statement.claims += [replace(c, unit="one record (once per epoch)") for c in once]
    if k is not None and k > 1:
        user = mechanism_claims(
            description.user_event(poisson=False), how, (1,), progress=progress, failures=failures
        )
        statement.claims += [
            replace(
                c,
                level="user",
                unit=f"one user (at most {k} records, once per epoch)",
                neighbouring=f"add or remove one user's records (at most {k})",
                note="all k records in one batch: the Gaussian at sigma / k",
            )
            for c in user
        ]
    statement.caveats += [f"not accounted: {f}" for f in failures]
    return statement
