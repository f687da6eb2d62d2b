"""`uldp audit`: an empirical lower bound on epsilon, from one training run with canaries, next to
the accountants' upper bound for the same run (issue 18; trainers/audit.py holds the method)."""

from __future__ import annotations

import click

from uldp.accountants.statements.audit_bound import MIN_CONFIDENCE
from uldp.trainers.run_setup import SETTING_DEFAULTS

from ..config import config_option
from ..errors import library_errors
from ..files import atomic_write_text
from ..options import Interval, OutputFile, format_option
from ..progress import round_progress
from ..render import emit, json_text
from . import train as train_command

#: `uldp train`'s options that an audited run reads, shared as they are (same names, types, help).
TRAIN_OPTIONS = (
    "algo",
    "dataset",
    "data",
    "data_path",
    "user_column",
    "label_column",
    "silo_column",
    "task",
    "rounds",
    "sigma",
    "clip",
    "users",
    "silos",
    "allocation",
    "alpha",
    "labels_per_user",
    "seed",
    "noise_seed",
    "user_q",
    "group_k",
    "distribution",
    "local_steps",
    "silo_q",
    "local_epochs",
    "lr",
    "global_lr",
    "batch_size",
    "local_batch_size",
    "delta",
    "model",
    "loss",
    "loop",
    "device",
    "threads",
)
#: `uldp train`'s settings that audit does not take, at the command's defaults (run_setup.prepare
#: reads them): no secure aggregation, no per-user budgets, no dropouts, no target epsilon.
NOT_AUDITED_NAMES = (
    "budgets_file",
    "budget_column",
    "user_budgets",
    "threat_model",
    "secure",
    "key_bits",
    "test_keys",
    "epsilon",
    "metrics_path",
    "dropout",
    "dropout_at",
    "dropout_schedule",
    "calibration",
    "min_weight_sum",
    "n_max",
    "threshold",
)
NOT_AUDITED = {name: SETTING_DEFAULTS[name] for name in NOT_AUDITED_NAMES}
#: trainers.audit.DEFAULT_CANARIES and MAX_CANARIES, repeated so that parsing imports no torch
#: (a test keeps them equal).
DEFAULT_CANARIES = 1000
MAX_CANARIES = 100_000
#: trainers.algorithms.faults.FAULTS' names, repeated for the same reason.
FAULT_NAMES = ("noise", "clip", "weights")
#: The exit status of an audit whose lower bound exceeds the claimed upper bound.
VIOLATED = 3


class CanaryCount(click.ParamType):
    """--canaries: a whole count in [2, MAX_CANARIES], or a fraction of the users in (0, 1)."""

    name = "count"

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number; give a count or a fraction in (0, 1)", param, ctx)
        if 0 < number < 1:
            return number
        if number.is_integer() and 2 <= number <= MAX_CANARIES:
            return int(number)
        self.fail(
            f"{value} is neither a whole count in [2, {MAX_CANARIES:,}] nor a fraction of the users "
            "in (0, 1)",
            param,
            ctx,
        )


def _with_train_options(command: click.Command) -> click.Command:
    """`command` with `uldp train`'s options named in TRAIN_OPTIONS, in that order (train's
    --help lists them under headings, in another)."""
    by_name = {p.name: p for p in train_command.command.params}
    shared = [by_name[name] for name in TRAIN_OPTIONS if name in by_name]
    missing = set(TRAIN_OPTIONS) - {p.name for p in shared}
    assert not missing, f"uldp train has no options {sorted(missing)}"
    command.params[:0] = shared
    return command


@click.command("audit")
@click.option(
    "--canaries",
    type=CanaryCount(),
    default=None,
    help=f"Canaries planted, each included with probability 1/2: a count, or a fraction of the users "
    f"in (0, 1) (default: {DEFAULT_CANARIES:,} or the users, if fewer). More canaries, a stronger audit.",
)
@click.option(
    "--confidence",
    type=Interval(MIN_CONFIDENCE, 1.0, low_open=False),
    default=0.95,
    show_default=True,
    help="Confidence of the lower bound, in [0.5, 1): below 1/2 a bound is wrong more often than right.",
)
@click.option("--out", type=OutputFile(), default=None, help="Also write the JSON document to FILE.")
@click.option(
    "--plot",
    "plot_path",
    type=OutputFile(),
    default=None,
    help="PNG: the canaries' scores, included against left out, for each view.",
)
@click.option(
    "--break-mechanism",
    "fault",
    type=click.Choice(FAULT_NAMES),
    default=None,
    hidden=True,
    help="TESTS ONLY: break the mechanism on purpose (noise / 10, silo 0 unclipped, weights of 1).",
)
@format_option
@config_option
def command(canaries, confidence, out, plot_path, fault, fmt, **options):
    """Audit a training run: plant canaries, train once, and bound epsilon from below.

    Takes the flags of `uldp train`. Prints, for the released model (and, under user sampling,
    the server), the empirical lower bound at --confidence next to the accountants' upper bound
    for the same run. Exit status 3 if a lower bound exceeds its upper bound: the code does not
    do what the accounting assumes.

    \b
      uldp audit --algo uldp-avg --dataset heart-disease --users 400 --canaries 200
      uldp audit --algo uldp-group --group-k 1 --dataset creditcard --silos 1 --batch-size 3200
      uldp audit --algo unidp --distribution three-levels --dataset creditcard --silos 1
    """
    o = options
    if o["data"] is not None and any(
        o[name] is not None for name in ("data_path", "user_column", "label_column")
    ):
        raise click.UsageError("--data loads your own data: drop --data-path/--user-column/--label-column")
    if [o["dataset"] is not None, o["user_column"] is not None, o["data"] is not None].count(True) != 1:
        raise click.UsageError(
            "give --dataset NAME, your own table with --data-path and --user-column, or your own data "
            "with --data FILE.py:NAME"
        )
    ctx = click.get_current_context()
    # What `uldp train` refuses (an option the run would ignore, --alpha without --allocation
    # power), refused here by the same code.
    train_command.check_ignored(ctx, o["algo"], o["dataset"], o["user_column"], False, fmt, None, o["data"])
    train_command.check_subject(ctx, o["algo"], o["sigma"], None, o["allocation"], o["alpha"])
    from uldp.trainers.algorithms import get_algorithm
    from uldp.trainers.run_setup import chosen_settings

    chosen, _ = chosen_settings(o, get_algorithm(o["algo"]).record_level)
    rounds = chosen["rounds"]
    with library_errors():
        from uldp.trainers.algorithms import get_algorithm
        from uldp.trainers.audit import check_auditable

        check_auditable(o["algo"], fault)  # before loading data: one line, exit 2
        record_level = get_algorithm(o["algo"]).record_level
        if record_level and o["distribution"] is None:
            raise click.UsageError(f"{o['algo']} needs per-record budgets: give --distribution NAME")
        if not record_level and o["distribution"] is not None:  # --local-steps, --silo-q: check_ignored
            raise click.UsageError(
                f"--distribution applies to rpdp and unidp (per-record budgets), not {o['algo']}"
            )
        import torch

        from uldp.trainers.audit import audit, describe_fault
        from uldp.trainers.run_setup import prepare
        from uldp.trainers.threads import free_cpus

        torch.set_num_threads(o["threads"] or free_cpus())
        # `uldp train`'s preparation (the data, rPDP-FL's per-record rates with sigma calibrated
        # to them when none is given), with the train options audit does not take at their
        # defaults and the fault planted in the TrainConfig.
        settings = {**NOT_AUDITED, **o}
        data, cfg = prepare(settings, chosen, record_level, fields={"fault": fault})
        count = canaries if canaries is not None else min(DEFAULT_CANARIES, data.n_users)
        with round_progress(fmt, rounds, f"audit: {o['algo']} on {data.name}") as update:
            result = audit(
                data,
                cfg,
                canaries=count,
                confidence=confidence,
                model=None if chosen["model"] == "auto" else chosen["model"],
                loss=o["loss"],
                device=o["device"],
                on_round=lambda row: update(row["round"], f"epsilon {row['epsilon']:.4g}"),
            )
    document = _document(result, data, describe_fault(fault))
    if out is not None:
        atomic_write_text(out, json_text(document))
    if plot_path is not None:
        _plot(result, plot_path)
    _render(result, document, fmt)
    if result.violated:
        worst = max(result.views, key=lambda v: v.bound.epsilon - v.claimed)
        click.echo(
            f"Error: guarantee violated: the {worst.view}'s audited lower bound {worst.bound.epsilon:.3g} "
            f"exceeds the claimed upper bound {worst.claimed:.3g} at {worst.bound.confidence:.0%} confidence",
            err=True,
        )
        click.get_current_context().exit(VIOLATED)


_with_train_options(command)


def _document(result, data, fault_note: str | None) -> dict:
    summary = result.train.summary
    return {
        "command": "audit",
        "algo": result.algo,
        "unit": result.unit,
        "dataset": data.name,
        "source": data.source,
        "synthetic": bool(data.synthetic),
        "canaries": result.canaries.m,
        "included": int(result.canaries.included.sum()),
        "violated": result.violated,
        "views": [
            {
                **v.as_dict(),
                "upper_bounds": [{"accountant": a, "epsilon": e} for a, e in result.upper_bounds[v.view]],
            }
            for v in result.views
        ],
        "run": {
            key: summary.get(key)
            for key in ("users", "silos", "rounds", "sigma", "clip", "user_q", "delta", "metric", "epsilon")
        },
        "method": result.method(),
        "fault": fault_note,
        "seconds": {
            "train": round(result.train_s, 3),
            "audit": round(result.audit_s, 3),
            "accounting": round(result.accounting_s, 3),
        },
    }


COLUMNS = [
    ("view", "view"),
    ("lower_bound", "eps >= (audit)"),
    ("upper_bound", "eps <= (accountants)"),
    ("verdict", "verdict"),
    ("correct_of", "correct"),
    ("ceiling", "ceiling"),
]


def _render(result, document: dict, fmt: str) -> None:
    rows = [{**v.as_dict(), "correct_of": f"{v.bound.correct}/{v.bound.guesses}"} for v in result.views]
    c = result.canaries
    first = result.views[0].bound
    notes = [
        f"{c.m} canary {result.unit}s, {int(c.included.sum())} included; lower bounds at "
        f"{first.confidence:.0%} confidence, delta {first.delta:g}; correct: right guesses of those "
        f"made; ceiling: the most {c.m} canaries can show (every guess right)",
    ]
    if any(v.verdict == "too weak to say anything" for v in result.views):
        notes.append(
            "lower bound 0: at this noise the audit cannot tell the canaries apart well enough to say "
            "anything; plant more canaries (--canaries) for a stronger test"
        )
    if document["fault"]:
        notes.insert(0, document["fault"])
    data = " (SYNTHETIC data)" if document["synthetic"] else ""
    emit(
        f"Audit of {result.algo} on {document['dataset']}{data}: {c.m} canary {result.unit}s",
        COLUMNS,
        rows,
        fmt,
        assumptions=document["method"],
        document=document if fmt == "json" else None,
        notes=notes,
    )


def _plot(result, path) -> None:
    """Histograms of the canaries' scores, included against left out, one panel per view."""
    import numpy as np

    from ..figures import save_png, subplots

    views = result.views
    figure, axes = subplots(nrows=1, ncols=len(views), figsize=(5.5 * len(views), 3.6), squeeze=False)
    included = result.canaries.included
    for axis, view in zip(axes[0], views):
        scores = result.scores[view.view]
        bins = np.histogram_bin_edges(scores, bins=40)
        axis.hist(scores[included], bins=bins, alpha=0.6, label=f"included ({int(included.sum())})")
        axis.hist(scores[~included], bins=bins, alpha=0.6, label=f"left out ({int((~included).sum())})")
        axis.set_title(
            f"{view.view}: eps >= {view.bound.epsilon:.3g} (audit), <= {view.claimed:.3g} (accountant)",
            fontsize=9,
        )
        axis.set_xlabel("canary score")
        axis.set_ylabel("canaries")
        axis.legend(fontsize=8)
    save_png(figure, path)
