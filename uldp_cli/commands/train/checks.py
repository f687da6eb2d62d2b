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

from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from ...options import given_source
from .dropouts import check_dropouts
from .options import CHECKPOINT_FILE
from .subject_level import check_subject_options

#: The options an algorithm may leave unused (AlgorithmSpec.options), by parameter name.
ALGORITHM_OPTIONS = {
    "sigma": "sigma",
    "clip": "clip",
    "lr": "lr",
    "global_lr": "global_lr",
    "local_epochs": "local_epochs",
    "batch_size": "batch_size",
    "local_batch_size": "local_batch_size",
    "group_k": "group_k",
    "loop": "batched",
    "local_steps": "local_steps",
    "silo_q": "silo_q",
    "dropout": "dropout",
    "dropout_at": "dropout_at",
    "dropout_schedule": "dropout_schedule",
    "calibration": "calibration",
    "min_weight_sum": "min_weight_sum",
    "n_max": "n_max",
    "threshold": "threshold",
    "epsilon": "target_epsilon",
}


def check_options(ctx: click.Context, options: dict[str, Any]) -> bool:
    """Refuse what the run cannot use, resolving in `options` what the checks decide; True when
    the run has personalised budgets (per record or per user)."""
    o = options
    check_inputs(o)
    check_ignored(ctx, o["algo"], o["dataset"], o["user_column"], o["secure"], o["fmt"], o["checkpoint_dir"])
    check_dropouts(ctx, o)
    check_subject_options(ctx, o)
    return check_budgets(
        o["algo"],
        o["distribution"],
        o["budgets_file"],
        o["budget_column"],
        o["user_budgets"],
        o["user_column"],
        o["user_q"],
    )


def check_inputs(options: dict[str, Any]) -> None:
    """One source of data; --resume, --overwrite and --test-keys with what they need; the device."""
    dataset, data_path, user_column, label_column = (
        options[name] for name in ("dataset", "data_path", "user_column", "label_column")
    )
    resume, overwrite, checkpoint_dir = options["resume"], options["overwrite"], options["checkpoint_dir"]
    device, engine = options["device"], options["engine"]
    own_table = user_column is not None or label_column is not None
    if own_table:
        if dataset is not None:
            raise click.UsageError("--user-column/--label-column read your own table: drop --dataset")
        if data_path is None or user_column is None or label_column is None:
            raise click.UsageError(
                "your own table needs --data-path, --user-column (or --subject-column: the "
                "column naming each record's person) and --label-column"
            )
    elif dataset is None:
        raise click.UsageError(
            "give --dataset (mnist, heart-disease, gbsg2, creditcard) or "
            "--data-path with --user-column and --label-column"
        )
    if resume and checkpoint_dir is None:
        raise click.UsageError("--resume needs --checkpoint DIR")
    if resume and overwrite:
        raise click.UsageError("--resume continues the checkpoint, --overwrite replaces it: give one")
    if resume and not (Path(checkpoint_dir) / CHECKPOINT_FILE).exists():
        # Starting afresh instead would hide a wrong folder, a lost checkpoint or a typo (issue 32).
        raise click.BadParameter(
            f"{checkpoint_dir} holds no checkpoint ({CHECKPOINT_FILE}) to continue; drop --resume "
            "to start a fresh run",
            param_hint="'--resume'",
        )
    if options["test_keys"] and not options["secure"]:
        raise click.UsageError("--test-keys only applies with --secure")
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


def check_ignored(ctx: click.Context, algo, dataset, user_column, secure, fmt, checkpoint_dir) -> None:
    """Refuse an option the run would ignore, rather than train as if it mattered (issue 12).

    On the command line it is refused (exit 2); from --config it is warned about once (a config
    shared by several algorithms, as examples/compare-algorithms.sh runs, is legitimate).
    """
    from uldp.trainers.algorithms import get_algorithm

    spec = get_algorithm(algo)
    ignored: dict[str, str] = {}
    for name, field in ALGORITHM_OPTIONS.items():
        if field not in spec.options:
            uses = sorted(
                f"--{o.replace('_', '-')}"
                for o, f in ALGORITHM_OPTIONS.items()
                if f in spec.options and o != "loop"
            )
            ignored[name] = f"{algo} does not use it (it takes {', '.join(uses) or 'none of these'})"
    if user_column is not None:
        for name in ("users", "allocation", "alpha", "labels_per_user"):
            ignored[name] = "your own table names its users (--user-column)"
    else:
        ignored["task"] = "it describes your own table (--user-column); a built-in data set has its task"
        ignored["silo_column"] = "it describes your own table (--user-column)"
        if dataset != "creditcard":
            ignored["data_path"] = f"{dataset} is built in; only creditcard reads --data-path"
    if not spec.record_level:
        ignored["threat_model"] = f"it chooses the threat model of rpdp/unidp's rates, and {algo} has none"
    else:
        ignored["user_q"] = f"{algo} samples silos (--silo-q) and records, not users"
    if spec.subject_level:
        ignored["user_q"] = (
            f"{algo} trains every member every round and samples items (q from --batch-size), not users"
        )
    if not secure:
        ignored["key_bits"] = "it sizes Protocol 1's keys, which only --secure uses"
    elif spec.observed:
        why = f"{algo}'s secure aggregation agrees X25519 keys, it has no Paillier keys to size"
        ignored["key_bits"] = ignored["test_keys"] = why
    if fmt != "table":
        ignored["every"] = f"--format {fmt} always has every round"
    if checkpoint_dir is None:
        ignored["overwrite"] = "it replaces a --checkpoint DIR, and none was given"
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


def check_budgets(algo, distribution, budgets_file, budget_column, user_budgets, user_column, user_q) -> bool:
    """Refuse budgets an algorithm cannot use, and more than one source (one line, exit 2); True
    when the run has personalised budgets (issue 14).

    The sources: --distribution, --epsilon-csv (its --epsilon-column, default epsilon), or
    --epsilon-column alone, a column of your own table.
    """
    from uldp.trainers.algorithms import get_algorithm, user_budget_names

    spec = get_algorithm(algo)
    table_column = budget_column is not None and budgets_file is None
    given = [
        name
        for name, value in (
            ("--distribution", distribution),
            ("--epsilon-csv", budgets_file),
            ("--epsilon-column", budget_column if table_column else None),
        )
        if value is not None
    ]
    if user_budgets is not None:
        if not spec.user_budgets:
            names = user_budget_names()
            raise click.UsageError(
                f"--user-budgets applies to {', '.join(names[:-1])} and {names[-1]}, not {algo}"
            )
        if user_q != 1.0:
            raise click.UsageError("--user-budgets samples every user at its own q_u; drop --user-q")
    if len(given) > 1:
        raise click.UsageError(f"give one source of per-record budgets, not {' and '.join(given)}")
    if given and spec.user_budgets:
        raise click.UsageError(
            f"{given[0]} gives per-record budgets (rpdp, unidp, default); {algo} protects users: "
            "give --user-budgets FILE|NAME"
        )
    if given and not (spec.record_level or not spec.private):
        raise click.UsageError(f"{given[0]} applies to rpdp, unidp and default, not {algo}")
    if spec.record_level and not given:
        raise click.UsageError(
            f"{algo} needs each record's budget: give --distribution NAME, --epsilon-csv FILE, or "
            "--epsilon-column COLUMN of your own table"
        )
    if table_column and user_column is None:
        raise click.UsageError(
            "--epsilon-column without --epsilon-csv names a column of your own table (--data-path "
            "with --user-column)"
        )
    return bool(given) or user_budgets is not None
