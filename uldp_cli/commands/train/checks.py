"""`uldp train`'s input checks: each refusal one line naming the option, exit status 2 (issue 12).

`check_options` runs them in order: the data and outputs, the options the algorithm would ignore,
the dropout options (dropouts.py), the subject level's (subject_level.py, which also checks
--allocation's alpha and resolves sigma from --epsilon), then the personalised budgets, whose
sources span two families (ULDP-FL's --user-budgets, rPDP-FL's per-record budgets). The order is
written here, not derived from the families' order in `--help`: it decides which refusal a user
with two mistakes sees first. The family checks run whatever the algorithm: an option read from
--config that the algorithm ignores must still make sense with the others.
"""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from uldp.trainers.run_setup import ALGORITHM_OPTIONS as ALGORITHM_OPTIONS  # re-exported for tests
from uldp.trainers.run_setup import Spell, check_budget_sources, check_pairs, ignored_settings

from ...errors import library_errors
from ...options import given_source
from .dropouts import check_dropouts
from .subject_level import check_subject_options


def check_options(ctx: click.Context, options: dict[str, Any]) -> bool:
    """Refuse what the run cannot use, resolving in `options` what the checks decide; True when
    the run has personalised budgets (per record or per user). The decisions are the library's
    (uldp.trainers.run_setup, which `uldp.train` makes too), with the options' spellings."""
    o = options
    spell = spelling(ctx)
    check_inputs(o)
    check_ignored(
        ctx, o["algo"], o["dataset"], o["user_column"], o["secure"], o["fmt"], o["checkpoint_dir"], o["data"]
    )
    with library_errors():
        check_pairs(o, spell)
    check_dropouts(ctx, o)
    check_subject_options(ctx, o)
    with library_errors():
        return check_budget_sources(
            o["algo"],
            distribution=o["distribution"],
            budgets_file=o["budgets_file"],
            budget_column=o["budget_column"],
            user_budgets=o["user_budgets"],
            user_column=o["user_column"],
            user_q=o["user_q"],
            epsilon=o["epsilon"],
            spell=spell,
        )


def spelling(ctx: click.Context) -> Spell:
    """The command's spelling of a setting: its option (`budget_column` is --epsilon-column)."""
    opts = {p.name: p.opts[0] for p in ctx.command.params if p.opts}

    def spell(name: str) -> str:
        return opts.get(name, "--" + name.replace("_", "-"))

    return spell


def check_inputs(options: dict[str, Any]) -> None:
    """One source of data; --engine flower and the device."""
    dataset, data_path, user_column, label_column = (
        options[name] for name in ("dataset", "data_path", "user_column", "label_column")
    )
    device, engine = options["device"], options["engine"]
    own_table = user_column is not None or label_column is not None
    if options["data"] is not None:
        if dataset is not None or own_table or data_path is not None:
            given = "--dataset" if dataset is not None else "--data-path/--user-column/--label-column"
            raise click.UsageError(f"--data loads your own data: drop {given}")
    elif own_table:
        if dataset is not None:
            raise click.UsageError("--user-column/--label-column read your own table: drop --dataset")
        if data_path is None or user_column is None or label_column is None:
            raise click.UsageError(
                "your own table needs --data-path, --user-column (or --subject-column: the "
                "column naming each record's person) and --label-column"
            )
    elif dataset is None:
        raise click.UsageError(
            "give --dataset (mnist, heart-disease, gbsg2, creditcard), "
            "--data-path with --user-column and --label-column, or --data FILE.py:NAME (a loader)"
        )
    if engine == "flower" and device != "cpu":
        raise click.BadParameter(
            "--engine flower trains every silo in its own worker on the CPU; use --engine local "
            "for --device cuda",
            param_hint="'--device'",
        )
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise click.BadParameter(
                "cuda is not available on this machine; use --device cpu", param_hint="'--device'"
            )


def check_ignored(
    ctx: click.Context, algo, dataset, user_column, secure, fmt, checkpoint_dir, data=None
) -> None:
    """Refuse an option the run would ignore (run_setup.ignored_settings), rather than train as
    if it mattered (issue 12).

    On the command line it is refused (exit 2); from --config it is warned about once (a config
    shared by several algorithms, as examples/compare-algorithms.sh runs, is legitimate).
    """
    ignored = ignored_settings(
        algo,
        dataset=dataset,
        data=data,
        user_column=user_column,
        secure=secure,
        checkpoint_dir=checkpoint_dir,
        spell=spelling(ctx),
    )
    if fmt != "table":
        ignored["every"] = f"--format {fmt} always has every round"
    for name, why in ignored.items():
        source = given_source(ctx, name)
        if source is None:
            continue
        param = next((p for p in ctx.command.params if p.name == name), None)
        option = "--" + name.replace("_", "-")
        if param is not None and param.secondary_opts:  # a flag pair: name both spellings
            option = f"{param.opts[0]}/{param.secondary_opts[0]}"
        if source is ParameterSource.DEFAULT_MAP:
            click.echo(f"Warning: {option} from --config is ignored: {why}.", err=True)
        else:
            raise click.UsageError(f"{option} does not apply here: {why}; drop it", ctx)
