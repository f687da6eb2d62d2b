"""`uldp subject`: subject-level DP of a federation, one member's guarantee and the whole
federation's under horizontal composition (Marathe & Kanani, §2-3)."""

from __future__ import annotations

import math
from pathlib import Path

import click

from uldp.accountants.assumptions import accounting_label
from uldp.accountants.subject.assumptions import ALGORITHM_NAMES, subject_assumptions
from uldp.accountants.subject.holdings import (
    ALLOCATIONS,
    allocate_items,
    read_holdings,
    subject_sampling_rate,
)
from uldp.accountants.subject.horizontal import (
    ACCOUNTANTS,
    MECHANISMS,
    SUMMED,
    FederationRun,
    SubjectGuarantee,
    SubjectReport,
    account_subjects,
    composed_epsilon,
    federation_composition,
    local_composition,
    subject_sensitivity,
    user_ldp_epsilon,
)

from ..aliases import AliasedOption
from ..config import config_option
from ..errors import library_errors
from ..options import (
    COUNT_MAX,
    EpsilonBudget,
    Interval,
    NoiseMultiplier,
    OutputFile,
    PositiveInt,
    Probability,
    comma_list_option,
    format_option,
)
from ..progress import status
from ..render import emit
from ..subject_plot import draw_subject_plot
from .mechanism_flags import mechanism_flags

COLUMNS = [
    ("guarantee", "guarantee"),
    ("rounds", "rounds"),
    ("members", "members composed"),
    ("epsilon", "epsilon"),
    ("note", "note"),
]
GROUP_COLUMNS = [
    ("z", "Z"),
    ("sigma", "sigma_Z"),
    ("item_epsilon", "item epsilon"),
    ("item_delta", "item delta"),
]
SUBJECT_FIELDS = ["subject", "members", "max_items", "local_epsilon", "federation_epsilon"]


#: --silos, --silos-per-round, --subject-silos: the items are spread over the members in arrays of
#: N + 1 entries, and a federation of more than a million members is out of this tool's scope.
MEMBERS_MAX = 10**6
#: --local-steps: T mini-batches per round; R T steps are composed.
LOCAL_STEPS_MAX = 10**6
#: --k, --items-per-silo, --subject-items: group sizes (a subject's items at a member); the
#: group bound at 2^20 items is already far beyond any meaningful epsilon.
ITEMS_MAX = 2**20
#: --alpha: the power distribution x^alpha; outside [1e-3, 1e3] every item lands on one member.
ALPHA_MIN, ALPHA_MAX = 1e-3, 1e3


@click.command("subject")
@click.option(
    "--silos",
    "n_members",
    cls=AliasedOption,
    aliases=("--members",),
    type=PositiveInt(MEMBERS_MAX),
    required=True,
    help="Silos N of the federation (Marathe & Kanani's members), in [1, 1e6].",
)
@click.option(
    "--silos-per-round",
    "per_round",
    cls=AliasedOption,
    aliases=("--per-round",),
    type=PositiveInt(MEMBERS_MAX),
    required=True,
    help="Silos s selected per round (s <= N).",
)
@click.option("--rounds", type=PositiveInt(COUNT_MAX), required=True, help="Training rounds R, in [1, 1e12].")
@click.option(
    "--local-steps",
    type=PositiveInt(LOCAL_STEPS_MAX),
    required=True,
    help="Local mini-batches T per round, in [1, 1e6].",
)
@click.option(
    "--record-q",
    "q",
    cls=AliasedOption,
    aliases=("--q",),
    type=Probability(),
    required=True,
    help="Record (item) sampling rate per mini-batch at each member, in (0, 1].",
)
@click.option(
    "--sigma",
    type=NoiseMultiplier(),
    required=True,
    help="Noise multiplier, relative to the per-mini-batch subject sensitivity C, in [1e-6, 1e6].",
)
@click.option(
    "--algo",
    type=click.Choice(MECHANISMS),
    default="higradavgdp",
    show_default=True,
    help="Subject-level algorithm whose mechanism every row accounts (Marathe & Kanani §3): "
    "higradavgdp (a subject moves a mini-batch by C), userldp (2C; adds its user-level LDP), "
    "localgroupdp or localitemdp (per-item clipping: B C, B ~ Binomial(m, q) of m items at a member).",
)
@click.option(
    "--epsilon",
    "budget",
    type=EpsilonBudget(),
    default=None,
    help="Budget E, in [1e-6, 1e6]: the most rounds within it, and LocalGroupDP's target with --k.",
)
@comma_list_option(
    "--k",
    "group_sizes",
    cls=AliasedOption,
    aliases=("--group-sizes",),
    item_type=PositiveInt(ITEMS_MAX),
    default=None,
    help="LocalGroupDP group sizes Z (most items of one subject at a member), each in [1, 2^20].",
)
@click.option(
    "--subject-silos",
    "subject_members",
    cls=AliasedOption,
    aliases=("--subject-members",),
    type=PositiveInt(MEMBERS_MAX),
    default=None,
    help="Silos holding the subject's items (default N: every member, one item each), <= N.",
)
@click.option(
    "--items-per-silo",
    "items_per_member",
    cls=AliasedOption,
    aliases=("--items-per-member",),
    type=PositiveInt(ITEMS_MAX),
    default=1,
    show_default=True,
    help="Items of the subject at each silo holding it, in [1, 2^20].",
)
@click.option(
    "--subject-items",
    type=PositiveInt(ITEMS_MAX),
    default=None,
    help="The subject's items in all, in [1, 2^20], spread over the N members by --distribution.",
)
@click.option(
    "--distribution",
    type=click.Choice(ALLOCATIONS),
    default="uniform",
    show_default=True,
    help="How --subject-items spread over members: uniform or power (x^alpha, §4.2).",
)
@click.option(
    "--alpha",
    type=Interval(ALPHA_MIN, ALPHA_MAX, low_open=False, high_open=False),
    default=None,
    help="Power distribution parameter alpha, in [0.001, 1000].",
)
@click.option(
    "--holdings",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="CSV with a header naming the columns subject and member, one row per item: "
    "account every subject as held.",
)
@click.option(
    "--plot",
    type=OutputFile(),
    default=None,
    help="Draw the per-member and the federation epsilon against rounds to this PNG.",
)
@mechanism_flags(ACCOUNTANTS)
@format_option
@config_option
def command(
    n_members,
    per_round,
    rounds,
    local_steps,
    q,
    sigma,
    algo,
    budget,
    group_sizes,
    subject_members,
    items_per_member,
    subject_items,
    distribution,
    alpha,
    holdings,
    plot,
    delta,
    accountant,
    conversion,
    orders,
    fmt,
):
    """Subject-level epsilon of one member and of the whole federation (horizontal composition).

    \b
      uldp subject --silos 16 --silos-per-round 16 --rounds 100 --local-steps 10 --record-q 0.01 --sigma 1
      uldp subject ... --epsilon 4 --k 1,2,3,4                # most rounds, LocalGroupDP sigma_Z
      uldp subject ... --holdings items.csv                   # subjects as actually held
      uldp subject ... --algo userldp                         # UserLDP's mechanism, and its LDP
    """
    if per_round > n_members:
        raise click.BadParameter(
            f"{per_round} is more than --silos {n_members}", param_hint="'--silos-per-round'"
        )
    if group_sizes and budget is None:
        raise click.UsageError("--k needs --epsilon (LocalGroupDP's target E)")
    accounting = {"accountant": accountant, "conversion": conversion, "orders": orders}
    holdings_map = _holdings(
        n_members, subject_members, items_per_member, subject_items, distribution, alpha, holdings
    )
    with library_errors(), status(fmt) as update:
        run = FederationRun(n_members, per_round, rounds, local_steps, q, sigma, algo)
        report = account_subjects(
            run,
            holdings_map,
            delta,
            budget=budget,
            group_sizes=group_sizes or (),
            progress=update,
            **accounting,
        )
        ldp = None
        if algo == "userldp":
            update("user-level LDP")
            ldp = user_ldp_epsilon(run, delta, **accounting)

        if plot is not None:
            update("drawing")
            _plot(plot, run, report, delta, accounting, holdings is not None)

    worst, thumb, limits, named = report.worst, report.rule_of_thumb, report.limits, holdings is not None
    noise = [
        {
            "z": g.z,
            "sigma": g.sigma,
            "item_epsilon": g.item_epsilon,
            "item_delta": g.item_delta,
            "achieved_item_epsilon": g.achieved_epsilon,
        }
        for g in report.group_noise
    ]
    assumptions = subject_assumptions(
        run,
        delta,
        **accounting,
        holdings=None if holdings is None else str(holdings),
        subject_items=subject_items,
        distribution=distribution,
        alpha=alpha,
        subject_members=subject_members,
        items_per_member=items_per_member,
        group=bool(noise),
    ).as_dict()
    rows = _rows(run, report, named, ldp)
    document = {
        "command": "subject",
        "algo": algo,
        "assumptions": assumptions,
        "user_ldp_epsilon": ldp,
        "local_epsilon": report.local_epsilon,
        "local_subject": report.local_subject,
        "federation_epsilon": worst.federation_epsilon,
        "members_holding": len(worst.holding),
        "members_composed": worst.members_composed,
        "holding": list(worst.holding),
        "rule_of_thumb": {
            "subject": thumb.subject,
            "rounds": thumb.rounds,
            "federation_epsilon": thumb.federation_epsilon,
            "local_epsilon": thumb.local_epsilon,
            "holds": thumb.holds,
            "matching_rounds": thumb.matching_rounds,
        },
        "max_rounds": None
        if limits is None
        else {
            "budget": limits.budget,
            "local": limits.local,
            "federation": limits.federation,
            "local_subject": limits.local_subject,
            "federation_subject": limits.federation_subject,
        },
        "group_noise": noise,
        "results": rows,
        "cross_check": _cross_check(report),
    }
    if named:
        document["worst_subject"] = report.worst_subject
        document["subjects"] = [_subject_entry(name, g) for name, g in report.subjects.items()]
        document["members_distribution"] = _distribution(report.subjects)
    notes = _notes(run, report, named)
    if plot is not None:
        notes.append(f"plot written to {plot}")
    if fmt == "json":
        emit("uldp subject", [], [], fmt, document=document)
    elif fmt == "csv":
        if holdings is not None:
            emit("uldp subject", [(k, k) for k in SUBJECT_FIELDS], document["subjects"], fmt)
        else:
            emit("uldp subject", COLUMNS, rows, fmt)
    else:
        last = not noise and holdings is None
        emit(
            "uldp subject",
            COLUMNS,
            rows,
            fmt,
            assumptions=assumptions if last else None,
            notes=notes if last else None,
        )
        if holdings is not None:
            emit(
                "Subjects by members holding them",
                [
                    ("members", "members"),
                    ("subjects", "subjects"),
                    ("federation_epsilon", "worst federation epsilon"),
                ],
                document["members_distribution"],
                fmt,
                assumptions=None if noise else assumptions,
                notes=None if noise else notes,
            )
        if noise:
            emit(
                f"LocalGroupDP noise per member for (E, Delta) = ({budget:g}, {delta:g}) by Corollary 3.5",
                GROUP_COLUMNS,
                noise,
                fmt,
                assumptions=assumptions,
                notes=notes,
            )


def _plot(
    path: Path, run: FederationRun, report: SubjectReport, delta: float, accounting: dict, named: bool
) -> None:
    """The local guarantee of the subject with the largest one and the federation guarantee of
    the worst subject, each recomputed at round counts up to R or, with --epsilon, to a little past
    the most rounds the budget allows a member."""
    local_holding = report.subjects[report.local_subject].holding
    worst = report.worst
    whose = (lambda name: f", subject {name}") if named else (lambda name: "")
    items = max(local_holding)
    local_label = f"one member (local){whose(report.local_subject)}: its holder with most items ({items})"
    federation_label = (
        f"federation{whose(report.worst_subject)}: {worst.members_composed} of "
        f"{len(worst.holding)} holder(s) composed per round"
    )
    holding_of = {local_label: local_holding, federation_label: worst.holding}

    def epsilon(rounds: int, label: str) -> float:
        # Only the figure drawn: not the other one, nor LocalItemDP's cross-check.
        compose = local_composition if label == local_label else federation_composition
        return composed_epsilon(
            compose(run.with_rounds(rounds), holding_of[label]), run.sigma, delta, **accounting
        )

    limits = report.limits
    largest = int(1.5 * run.rounds) + 1  # past R, so that R's marks and label stay inside
    if limits is not None and limits.local:
        largest = max(largest, int(1.2 * limits.local))
    label = accounting_label(**accounting)
    algo = "" if run.mechanism == "higradavgdp" else f"{ALGORITHM_NAMES[run.mechanism]}; "
    title = (
        f"uldp subject: N = {run.members} members, s = {run.per_round} per round, "
        f"T = {run.local_steps} local steps, record-q = {run.q:g}, sigma = {run.sigma:g}\n"
        f"{algo}delta = {delta:g}; {label}"
    )
    draw_subject_plot(
        path,
        [
            # The two coincide when one member holds the subject: the federation's line is
            # dashed and on top, so the local one still shows under it.
            (local_label, {"color": "tab:green", "lw": 3.2, "alpha": 0.7}),
            (federation_label, {"color": "tab:red", "lw": 1.6, "ls": (0, (5, 3))}),
        ],
        epsilon,
        run.rounds,
        min(largest, 10**7),
        None if limits is None else limits.budget,
        accounting["accountant"],
        title,
    )


def _holdings(
    n_members, subject_members, items_per_member, subject_items, distribution, alpha, holdings
) -> dict[str, list[int]]:
    """Subject id -> item counts at the members holding it (one hypothetical subject unless --holdings)."""
    spread = subject_items is not None
    if holdings is not None and (spread or subject_members is not None):
        raise click.UsageError("--holdings gives every subject's silos; drop --subject-silos/--subject-items")
    if spread and subject_members is not None:
        raise click.UsageError("give --subject-silos (with --items-per-silo) or --subject-items, not both")
    if not spread and (alpha is not None or distribution != "uniform"):
        raise click.UsageError("--distribution and --alpha spread --subject-items; give --subject-items")
    if distribution == "power" and alpha is None:
        raise click.UsageError("--distribution power needs --alpha")
    if distribution == "uniform" and alpha is not None:
        raise click.UsageError("--alpha applies to --distribution power only")
    if items_per_member != 1 and (holdings is not None or spread):
        raise click.UsageError(
            "--items-per-silo goes with --subject-silos; --holdings and "
            "--subject-items give the items per silo themselves"
        )
    if subject_members is not None and subject_members > n_members:
        raise click.BadParameter(
            f"{subject_members} is more than --silos {n_members}", param_hint="'--subject-silos'"
        )
    if holdings is not None:
        with library_errors():
            found = read_holdings(holdings, n_members)
        members = {len(h) for h in found.values()}
        if max(members) > n_members:
            raise click.BadParameter(
                f"a subject is held by {max(members)} silos, more than --silos {n_members}",
                param_hint="'--holdings'",
            )
        return found
    if spread:
        with library_errors():
            return {"subject": allocate_items(subject_items, n_members, distribution, alpha or 1.0)}
    return {"subject": [items_per_member] * (subject_members or n_members)}


def _rows(run: FederationRun, report: SubjectReport, named: bool, ldp: float | None) -> list[dict]:
    """The table; with several subjects each row says whose figure it is (`named`); UserLDP's
    user-level LDP epsilon `ldp` (None for the other algorithms) is a row of its own."""
    worst, thumb, limits = report.worst, report.rule_of_thumb, report.limits
    k = len(worst.holding)
    assert thumb.subject is not None  # account_subjects names the binding subject
    composed = report.subjects[thumb.subject].members_composed

    def who(name: str, text: str = "") -> str:
        return f"{text}; subject {name}" if named and text else (f"subject {name}" if named else text)

    rows = [
        {
            "guarantee": "local (per member)" + (", max over subjects" if named else ""),
            "rounds": run.rounds,
            "members": 1,
            "epsilon": report.local_epsilon,
            "note": who(report.local_subject, f"{run.rounds * run.local_steps} steps, other members fixed"),
        },
        {
            "guarantee": f"federation, {k} member(s) hold the " + ("worst subject" if named else "subject"),
            "rounds": run.rounds,
            "members": worst.members_composed,
            "epsilon": worst.federation_epsilon,
            "note": who(report.worst_subject, "worst case: sequential across holders"),
        },
        {
            "guarantee": "federation at R/sqrt(s) (Thm 3.10)",
            "rounds": thumb.rounds,
            "members": composed,
            "epsilon": thumb.federation_epsilon,
            "note": (
                ("keeps" if thumb.holds else "exceeds")
                + " the local epsilon "
                + (f"{thumb.local_epsilon:.4g} of subject {thumb.subject}" if named else "")
            ),
        },
        {
            "guarantee": "federation, most rounds within local eps",
            "rounds": thumb.matching_rounds,
            "members": composed,
            "epsilon": None,
            "note": f"<= {thumb.local_epsilon:.4g}"
            + (f" (subject {thumb.subject}'s local)" if named else ""),
        },
    ]
    if ldp is not None:
        rows.insert(
            1,
            {
                "guarantee": "user-level LDP (per member)",
                "rounds": run.rounds,
                "members": 1,
                "epsilon": ldp,
                "note": "whole member data set replaced; no sampling amplification",
            },
        )
    if limits is not None:
        every = "every subject, bound by " if named else ""
        rows.append(
            {
                "guarantee": f"local, most rounds within {limits.budget:g}",
                "rounds": limits.local,
                "members": 1,
                "epsilon": None,
                "note": f"{every}{limits.local_subject}" if named else None,
            }
        )
        rows.append(
            {
                "guarantee": f"federation, most rounds within {limits.budget:g}",
                "rounds": limits.federation,
                "members": report.subjects[limits.federation_subject].members_composed,
                "epsilon": None,
                "note": f"{every}{limits.federation_subject}" if named else None,
            }
        )
    return rows


def _subject_entry(name: str, g: SubjectGuarantee) -> dict:
    entry = {
        "subject": name,
        "members": len(g.holding),
        "max_items": max(g.holding),
        "local_epsilon": g.local_epsilon,
        "federation_epsilon": g.federation_epsilon,
    }
    if g.local_cross_check is not None:
        entry |= {
            "local_cross_check": g.local_cross_check,
            "federation_cross_check": g.federation_cross_check,
        }
    return entry


def _cross_check(report: SubjectReport) -> dict | None:
    """LocalGroupDP and LocalItemDP with m > 1 items at a holder: the figures of the local and the
    worst subject by the sensitivity-m bound (never below the mixture's); None otherwise."""
    local, worst = report.subjects[report.local_subject], report.worst
    if local.local_cross_check is None and worst.federation_cross_check is None:
        return None
    return {
        "bound": "multiplier sigma / m at rate 1 - (1 - q)^m (an m C shift whichever items are drawn)",
        "local_epsilon": local.local_cross_check,
        "federation_epsilon": worst.federation_cross_check,
    }


def _distribution(subjects: dict[str, SubjectGuarantee]) -> list[dict]:
    by_members: dict[int, list[float]] = {}
    for g in subjects.values():
        by_members.setdefault(len(g.holding), []).append(g.federation_epsilon)
    return [
        {"members": k, "subjects": len(v), "federation_epsilon": max(v)}
        for k, v in sorted(by_members.items())
    ]


def _notes(run: FederationRun, report: SubjectReport, named: bool) -> list[str]:
    thumb = report.rule_of_thumb
    busiest = report.max_items
    rate = subject_sampling_rate(run.q, busiest)
    sensitivity = subject_sensitivity(run.mechanism, busiest)
    whose = f" of subject {thumb.subject}" if named else ""
    assert thumb.subject is not None  # account_subjects names the binding subject
    composed = report.subjects[thumb.subject].members_composed
    notes = [
        f"R/sqrt(s) = {thumb.rounds} rounds gives federation epsilon {thumb.federation_epsilon:.4g} "
        f"vs local {thumb.local_epsilon:.4g}{whose}; exact composition allows {thumb.matching_rounds} "
        f"rounds (about R/{composed} = {math.floor(run.rounds / composed)} when {composed} alike "
        "holders compose every round)",
        f"the busiest holder has {busiest} of "
        + (f"subject {report.local_subject}'s items" if named else "the subject's items")
        + f": it samples the subject at 1 - (1 - q)^{busiest} = {rate:.4g} per mini-batch"
        + (
            ""
            if sensitivity == 1
            else f", and {ALGORITHM_NAMES[run.mechanism]}'s mini-batch moves by up to "
            f"{sensitivity:g} C (multiplier sigma / {sensitivity:g})"
            if run.mechanism not in SUMMED
            else f"; {ALGORITHM_NAMES[run.mechanism]} draws each item on its own, so a mini-batch moves "
            f"by B C, B ~ Binomial({busiest}, q), accounted as that mixture"
        ),
    ]
    check = _cross_check(report)
    if check is not None:
        notes.append(
            f"cross-check, the sensitivity-m bound ({check['bound']}): local "
            f"{check['local_epsilon']:.4g}, federation {check['federation_epsilon']:.4g}"
        )
    short = [g.z for g in report.group_noise if g.z < busiest]
    if short:
        notes.append(
            f"LocalGroupDP Z = {', '.join(map(str, short))} "
            + ("is" if len(short) == 1 else "are")
            + f" below the {busiest} items "
            + (f"subject {report.local_subject} has" if named else "the subject has")
            + f" at one member: sigma_Z does not cover it; use Z = {busiest}"
        )
    return notes
