"""rPDP-FL (record-level personalised DP: `rpdp`, `unidp`): each record's budget, its own sampling
rate q, and the epsilon each budget tier has spent, per round."""

from __future__ import annotations

import click

from ...aliases import AliasedOption
from ...option_groups import OptionGroup
from ...render import format_cell
from .family import Column, Family
from .render import sampling_notes, user_epsilon_columns

#: uldp.accountants.personalized.budgets.DISTRIBUTIONS, repeated so that parsing does not import
#: numpy (a test keeps the two equal).
BUDGET_DISTRIBUTIONS = (
    "three-levels",
    "bounded-pareto",
    "bounded-mix-gauss",
    "group-3",
    "group-100",
    "individual-1000",
)

OPTIONS = OptionGroup.of(
    "rPDP-FL algorithms",
    click.option(
        "--distribution",
        type=click.Choice(BUDGET_DISTRIBUTIONS),
        default=None,
        help="rpdp/unidp/default: draw each record's budget from an rPDP-FL scenario (seeded by --seed, "
        "as `uldp personalize --distribution` draws them).",
    ),
    click.option(
        "--epsilon-csv",
        "budgets_file",
        cls=AliasedOption,
        aliases=("--budgets",),
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="rpdp/unidp/default: CSV of per-record budgets, e.g. what `uldp personalize --out` wrote "
        "(column id: the data's record numbers from 1, else one row per record in order).",
    ),
    click.option(
        "--epsilon-column",
        "budget_column",
        cls=AliasedOption,
        aliases=("--budget-column",),
        default=None,
        help="rpdp/unidp/default: the column holding each record's budget (> 0): of --epsilon-csv "
        "(default: epsilon), else of your own table (--data-path with --user-column).",
    ),
    click.option(
        "--threat-model",
        type=click.Choice(["untrusted", "server"]),
        default=None,
        help="rpdp: the threat model the rates q are computed for (both are printed; default: untrusted).",
    ),
)


def budget_columns(summary: dict, rows: list[dict], fmt: str) -> tuple[list[Column], list[dict]]:
    """A run with personalised budgets (per record, or per user with --user-budgets) shows the
    epsilon of each budget tier; one without, the user-level epsilon."""
    tiers = summary.get("tiers")
    if tiers:
        return tier_columns(tiers, summary, rows, fmt)
    return user_epsilon_columns(summary), rows


def budget_notes(summary: dict, history: list[dict]) -> list[str]:
    tiers = summary.get("tiers")
    return tier_notes(tiers, summary) if tiers else sampling_notes(summary)


def tier_columns(tiers: list[dict], summary: dict, rows: list[dict], fmt: str):
    """The per-tier epsilon columns: every view's value in JSON/CSV; in the table one column per
    tier headed by its budget (the views' values side by side only where they differ)."""
    level = summary["budget_check"]["level"]
    views = ("untrusted", "server") if level == "record" else ("model", "server")
    if fmt != "table":
        columns = [("epsilon", "epsilon")] + (
            [("server_epsilon", "server_epsilon")] if "server_epsilon" in summary else []
        )
        for i in range(1, len(tiers) + 1):
            columns += [(f"tier{i}_budget", f"tier{i}_budget")]
            columns += [(f"tier{i}_epsilon_{v}", f"tier{i}_epsilon_{v}") for v in views]
        return columns, rows
    shown = []
    for row in rows:
        out = dict(row)
        for i in range(1, len(tiers) + 1):
            first, second = row[f"tier{i}_epsilon_{views[0]}"], row[f"tier{i}_epsilon_{views[1]}"]
            same = first == second
            out[f"tier{i}"] = first if same else f"{format_cell(first)} | {format_cell(second)}"
        shown.append(out)
    columns = []
    for i, tier in enumerate(tiers, start=1):
        name = "" if tier["count"] is not None else f" {tier['label']}"
        columns.append((f"tier{i}", f"eps{name} b={tier['budget']:.3g}"))
    return columns, shown


def tier_notes(tiers: list[dict], summary: dict) -> list[str]:
    """What the tier columns are, and whether every record (or user) kept within its budget."""
    check = summary["budget_check"]
    what = "record" if check["level"] == "record" else "user"
    counts = ", ".join(
        f"{t['count']} at {t['budget']:g} (q {t['q']:.4g})" for t in tiers if t["count"] is not None
    )
    notes = []
    if check["level"] == "record":
        notes.append(
            f"eps b=B: epsilon spent so far by the {what}s whose budget is B"
            + (f" ({counts})" if counts else ", at the budget quantiles")
            + "; both threat models (untrusted parties, honest-but-curious server) give the same "
            "value here (`a | b` where they differ); JSON/CSV have both"
        )
    else:
        notes.append(
            "eps b=B: epsilon spent so far by the users whose budget is B"
            + (f" ({counts})" if counts else ", at the budget quantiles")
            + ", as `model | server`: in the released models (amplified by the user's own sampling) "
            "and against the server, which draws the sample (Remark 1); JSON/CSV have both"
        )
    if check["view"] is None:
        notes.append(f"{summary['algo']} is not private: no {what}'s budget is met (epsilon unbounded)")
    elif check["over_budget"] == 0:
        notes.append(
            f"budget check: every distinct rate ({check['distinct_rates']}) re-accounted after "
            f"{check['rounds']} rounds ({check['view']}): no {what} exceeded its budget (largest "
            f"spent / budget {check['largest_spent_over_budget']:.4f})"
        )
    else:
        notes.append(
            f"BUDGET EXCEEDED: {check['over_budget']} of {check['count']} {what}s spent more than "
            f"their budget after {check['rounds']} rounds ({check['view']})"
        )
    return notes


FAMILY = Family(
    name="rPDP-FL",
    claims=lambda spec: spec.record_level,
    options=OPTIONS,
    columns=budget_columns,
    notes=budget_notes,
)
