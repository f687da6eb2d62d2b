"""`uldp account`: the (epsilon, delta) a run gives a record, a group of k records, or a user."""

from __future__ import annotations

from dataclasses import replace

import click

from uldp.accountants.account import GROUP_ACCOUNTING, GROUP_METHODS, Guarantee, account_plan
from uldp.accountants.assumptions import accounting_assumptions
from uldp.accountants.plan import Plan
from uldp.accountants.private_sampling import privately_sampled

from ..account_plot import draw_group_plot
from ..accounting_options import (
    accounted_as,
    accounted_as_note,
    accounting_options,
    algorithm_options,
    build_plan,
    check_group_sizes,
    expand_methods,
    may_read_rdp,
    method_labels,
    plan_reads,
    private_sampling_options,
    private_sampling_rate,
    refuse_unread_rdp_options,
    refuse_unused,
    schedule_options,
    uldp_group_k,
)
from ..config import config_option
from ..errors import library_errors
from ..options import (
    COUNT_MAX,
    NoiseMultiplier,
    OutputFile,
    PositiveInt,
    Probability,
    format_option,
    zero_epsilon_note,
)
from ..progress import status
from ..render import emit

COLUMNS = [
    ("algorithm", "algorithm"),
    ("k", "k"),
    ("bound", "bound"),
    ("epsilon", "epsilon"),
    ("delta", "delta"),
    ("order", "order"),
    ("note", "note"),
]

CSV_FIELDS = [
    "algorithm",
    "level",
    "k",
    "method",
    "accountant",
    "conversion",
    "epsilon",
    "delta",
    "order",
    "base_order",
    "group_size_used",
    "note",
]


@click.command("account")
@click.option("--sigma", type=NoiseMultiplier(), required=True, help="Noise multiplier, in [1e-6, 1e6].")
@click.option("--q", type=Probability(), default=None, help="Poisson sampling rate per step, in (0, 1].")
@click.option("--steps", type=PositiveInt(COUNT_MAX), default=None, help="Number of steps T, in [1, 1e12].")
@schedule_options
@accounting_options(many=True)
@algorithm_options(many=True)
@private_sampling_options
@click.option(
    "--plot",
    type=OutputFile(),
    default=None,
    help="Also draw epsilon against k for each group method (PNG), as ULDP-FL Fig. 2.",
)
@format_option
@config_option
def command(
    sigma,
    q,
    steps,
    epochs,
    dataset_size,
    delta,
    ks,
    methods,
    accountants,
    conversion,
    orders,
    algos,
    private_sampling,
    sampling_slots,
    plot,
    fmt,
    **flags,
):
    """What (epsilon, delta) a training run gives one record, a group of k records, or a user.

    \b
    Bare mechanism (DP-SGD style):
      uldp account --sigma 5 --q 0.01 --steps 100000 --k 1,2,4,8 --group-method rdp,normal
      uldp account --sigma 1.1 --dataset-size 60000 --batch-size 256 --epochs 60   # as Opacus
    ULDP-FL algorithm (user level):
      uldp account --algo uldp-avg --sigma 5 --rounds 100 --user-q 0.5
    Private sampling (ULDP-FL §4.1): the server's view amplified too
      uldp account --algo uldp-avg-w --sigma 5 --rounds 100 --user-q 0.5 --private-sampling
    """
    methods = expand_methods(methods)
    accountants = list(dict.fromkeys(accountants))
    group_k, ks = uldp_group_k(click.get_current_context(), ks, flags.pop("group_k"))
    refuse_unused(click.get_current_context(), algos or [None], group=any(k > 1 for k in [*ks, group_k]))
    check_group_sizes([*ks, group_k], methods)
    rate = private_sampling_rate(
        click.get_current_context(),
        algos or [None],
        flags["user_q"],
        private_sampling=private_sampling,
        sampling_slots=sampling_slots,
    )
    if rate is not None:  # accounted at the rate the silos draw, m/P
        flags["user_q"] = rate.q
    if plot is not None and not any(k > 1 for k in ks):
        raise click.BadParameter(
            "draws epsilon against the group size: give --k with values > 1", param_hint="'--plot'"
        )
    plans = [
        build_plan(
            a,
            sigma=sigma,
            q=q,
            steps=steps,
            epochs=epochs,
            dataset_size=dataset_size,
            **flags,
            k=group_k if a is not None and plan_reads(a, "k") else None,
        )
        for a in (algos or [None])
    ]
    if rate is not None:
        plans = [privately_sampled(plan, rate) for plan in plans]
    # Before the work (a PLD group bound takes seconds): an RDP bound can come only from these.
    refuse_unread_rdp_options(
        click.get_current_context(),
        may_read_rdp(plans, accountants, ks, methods, private_sampling=rate is not None),
    )
    with library_errors(), status(fmt) as update:
        results = account(
            plans,
            delta=delta,
            accountants=accountants,
            ks=ks,
            methods=methods,
            conversion=conversion,
            orders=orders,
            private_sampling=rate is not None,
            progress=update,
        )
    # And after it, from what each number says it is: the exact answer.
    refuse_unread_rdp_options(
        click.get_current_context(),
        any(r.conversion is not None for r in results),
    )
    results = [_noted(r) for r in results]
    notes = [n for n in dict.fromkeys(accounted_as_note(a) for a in algos or []) if n is not None]
    rows = [_row(r) for r in results]
    used = list(dict.fromkeys([*accountants, *(r.accountant for r in results)]))
    assumptions = accounting_assumptions(
        plans, delta=delta, accountants=used, conversion=conversion, orders=orders
    ).as_dict()
    columns = [c for c in COLUMNS if any(row[c[0]] is not None for row in rows)]
    document = {"command": "account", "assumptions": assumptions, "results": [_json(r) for r in results]}
    if rate is not None:
        document["private_sampling"] = rate.as_dict()
    if fmt == "csv":  # scripts get the numeric fields, not the table's labels
        rows, columns = document["results"], [(key, key) for key in CSV_FIELDS]
    notes += _notes(results, private_sampling=rate is not None)
    if any(r.epsilon == 0 for r in results):
        notes.append(zero_epsilon_note(delta))
    if plot is not None:
        title = f"delta = {delta:g}; " + "; ".join(
            f"{plan.algorithm}: {plan.assumptions.get('mechanism', '')}"
            if len(plans) > 1
            else plan.assumptions.get("mechanism", "")
            for plan in plans
        )
        # A group of one is the record, so each group line starts at k = 1: a line whose accountant
        # gave no record-level figure (PLD's under the default --accountant rdp) gets it here.
        unstarted = {r.accountant for r in results if r.k is not None and r.k > 1} - {
            r.accountant for r in results if r.k == 1
        }
        starts: list[Guarantee] = []
        if unstarted:
            with library_errors():
                starts = account(
                    plans,
                    delta=delta,
                    accountants=sorted(unstarted),
                    ks=[1],
                    conversion=conversion,
                    orders=orders,
                )
        draw_group_plot(
            plot,
            results + [r for r in starts if r.k == 1],
            {m: method_labels[(m, GROUP_ACCOUNTING[m][0])] for m in GROUP_METHODS},
            title,
        )
        notes.append(f"plot written to {plot}")
    # algorithm, k and bound (those shown, the leading columns) name a row: a folded table repeats them.
    labels = sum(key in ("algorithm", "k", "bound") for key, _ in columns)
    emit(
        "uldp account",
        columns,
        rows,
        fmt,
        assumptions=assumptions,
        document=document,
        notes=notes,
        labels=labels,
    )


def account(plans: list[Plan], **options) -> list[Guarantee]:
    """Every plan's guarantees (`account_plan`), in the order of the plans."""
    return [g for plan in plans for g in account_plan(plan, **options)]


def _noted(r: Guarantee) -> Guarantee:
    """`r`, with a note saying what an epsilon of 0 means unless it already has one (the
    notes below the table say more: `zero_epsilon_note`), for an algorithm accounted as
    another (a `-w` variant), which one (the notes say why: `accounted_as_note`), and, for
    uldp-group, which k is its user level (the others are record or group level)."""
    if r.epsilon == 0 and not r.note:
        r = replace(r, note="0: delta is that large (see the notes)")
    base = accounted_as(r.algorithm)
    if base is not None:
        r = replace(r, note="; ".join(n for n in (r.note, f"accounted as {base}") if n))
    if r.level == "user" and r.k is not None:  # ULDP-GROUP-k: a user is its k records (Theorem 2)
        r = replace(r, note="; ".join(n for n in (r.note, f"user level: {r.k} records") if n))
    return r


def _bound_label(r: Guarantee) -> str:
    if r.method == "server view":
        return f"user level, server's view ({r.accountant.upper()})"
    if r.method == "user":
        return f"user level ({r.accountant.upper()})"
    return method_labels[(r.method, r.accountant)]


def _order_label(r: Guarantee) -> str | None:
    if r.order is None:
        return None
    if r.base_order is not None and r.base_order != r.order:
        return f"{r.order:g} (from {r.base_order:g})"
    return f"{r.order:g}"


def _row(r: Guarantee) -> dict:
    return {
        "algorithm": r.algorithm,
        "k": "user" if r.k is None else r.k,
        "bound": _bound_label(r),
        "epsilon": r.epsilon,
        "delta": r.delta,
        "order": _order_label(r),
        "note": r.note or None,
    }


def _json(r: Guarantee) -> dict:
    out = r.as_dict()
    out["bound"] = "upper"
    out["label"] = _bound_label(r)
    return out


def _notes(results: list[Guarantee], *, private_sampling: bool = False) -> list[str]:
    notes = []
    if any(r.method == "rdp" and r.group_size_used and r.k and r.group_size_used != r.k for r in results):
        notes.append("Lemma 6 covers groups of 2^c records: other k use the next power of two.")
    if any(r.base_order and r.order and r.base_order != r.order for r in results):
        notes.append("order 'b (from a)': group RDP at order b = a / 2^c from the record-level RDP at a.")
    if any(r.method == "pld" and r.k and r.k > 1 for r in results):
        notes.append(
            "PLD group: the worst case of the k records' clipped contributions aligned, a "
            "Gaussian mixture with Binomial(k, q) shifts per step (docs/group-privacy.md)."
        )
    if private_sampling and any(r.method == "server view" for r in results):
        notes.append(
            "private sampling (ULDP-FL §4.1): the silos draw the user sample by oblivious transfer, "
            "so the server does not learn it and the 'server's view' row is the released model's "
            "figure, at q = m/P"
        )
    elif any(r.method == "server view" for r in results):
        notes.append(
            "user sampling amplifies only against observers who do not learn the sample "
            "(those who see the released models); the server draws it, and its view is "
            "the 'server's view' row: T/(a-1) ln(1 - q + q e^{(a-1) a / (2 sigma^2)}) "
            "(accountants/rdp/participation.py)"
        )
    if any(r.accountant in ("pld", "prv") for r in results):
        notes.append("PLD and PRV account both directions of add-or-remove and keep the larger.")
    return notes
