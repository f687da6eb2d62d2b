"""`uldp train`'s run: the settings the user left out, the data, the TrainConfig, the rounds with
their progress line and output locks, and what an interrupted run has spent."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import click

from uldp.trainers.defaults import train_defaults

from ...locks import output_locks
from ...progress import round_progress, stage
from ...render import format_cell
from .dropouts import dropout_settings
from .family import Family
from .options import CHECKPOINT_FILE

INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process stopped by Ctrl-C

#: The settings whose defaults depend on the (data set, algorithm): trainers/defaults.py.
DEFAULTED = ("users", "rounds", "sigma", "lr", "global_lr", "local_epochs", "model")

#: uldp train's options that `train_config` takes as they are (uldp audit hands over the same).
CONFIG_OPTIONS = (
    "clip",
    "user_q",
    "batch_size",
    "local_batch_size",
    "group_k",
    "delta",
    "seed",
    "noise_seed",
    "loop",
    "local_steps",
    "silo_q",
)


def chosen_settings(options: dict[str, Any], personal: bool) -> tuple[dict[str, Any], list[str]]:
    """(the settings, each given or from the defaults; the names of those left to the defaults,
    as the notes list them). With budgets and no --sigma the noise is calibrated to them."""
    from uldp.trainers.algorithms import get_algorithm

    algo, dataset = options["algo"], options["dataset"]
    given = {name: options[name] for name in DEFAULTED}
    chosen = {k: v if v is not None else train_defaults(dataset, algo)[k] for k, v in given.items()}
    spec = get_algorithm(algo)
    calibrated = personal and given["sigma"] is None and spec.private  # default adds no noise
    if calibrated:
        chosen["sigma"] = None  # calibrated to the budgets (trainers/rates.py)
    defaulted = [k.replace("_", "-") for k, v in given.items() if v is None and k != "model"]
    if calibrated or (spec.subject_level and (options["epsilon"] is not None or algo == "localgroupdp")):
        defaulted.remove("sigma")  # calibrated to the budgets, not a default (the notes say so)
    return chosen, defaulted


def load_data(
    dataset,
    data_path,
    user_column,
    label_column,
    silo_column,
    task,
    users,
    silos,
    allocation,
    labels_per_user,
    seed,
    budget_column=None,
    alpha=None,
):
    """A built-in data set allocated to users and silos, or the user's own table."""
    if user_column is not None:
        from uldp.trainers.data import load_table

        return load_table(
            data_path,
            user_column=user_column,
            label_column=label_column,
            silo_column=silo_column,
            silos=silos,
            task=task,
            seed=seed,
            budget_column=budget_column,
        )
    from uldp.trainers.data import load_dataset

    return load_dataset(
        dataset,
        users=users,
        silos=silos,
        allocation=allocation,
        seed=seed,
        labels_per_user=labels_per_user,
        path=data_path,
        **({} if alpha is None else {"alpha": alpha}),
    )


def train_config(algo: str, rounds: int, chosen: dict, *, loop: bool, local_steps, silo_q, **fields):
    """The run's TrainConfig from uldp train's options (uldp audit builds its run the same way).

    `chosen` holds the resolved sigma, local epochs and learning rates; --local-steps and
    --silo-q left unset keep TrainConfig's defaults; `fields` go in as they are.
    """
    from uldp.trainers.algorithms import TrainConfig

    return TrainConfig(
        algo=algo,
        rounds=rounds,
        sigma=chosen["sigma"],
        local_epochs=chosen["local_epochs"],
        lr=chosen["lr"],
        global_lr=chosen["global_lr"],
        batched=not loop,
        **({} if local_steps is None else {"local_steps": local_steps}),
        **({} if silo_q is None else {"silo_q": silo_q}),
        **fields,
    )


def start(options: dict[str, Any]) -> None:
    """torch's threads; the Flower extra, checked before the data load so a missing (or broken)
    one is said at once. torch is imported here, not at the top: `uldp train --help` stays fast.
    Under --engine flower the imports take seconds, so the run's first stage says so."""
    from uldp.trainers.flower.deployment import current_grid

    flower = options["engine"] == "flower"
    # In process the imports pass unremarked; in a deployment's ServerApp Flower is loaded already.
    fmt = options["fmt"] if flower and current_grid() is None else "json"
    with stage(fmt, progress_label(options["algo"], _data_name(options)), "loading Flower and Ray..."):
        import torch

        from uldp.trainers.threads import free_cpus

        torch.set_num_threads(options["threads"] or free_cpus())
        if flower:
            _import_flower()


def _import_flower() -> None:
    """Flower's simulation and Ray; a broken install (a binary that does not load, or one of
    their own modules missing) is the environment's failure, not the missing extra."""
    from uldp.trainers.flower.ray_session import IMPORT_FAILED, engine_failure

    try:
        import flwr.simulation  # noqa: F401
        import ray  # noqa: F401
    except ModuleNotFoundError as error:
        if (error.name or "").startswith(("ray.", "flwr.")):  # installed, but incomplete
            raise engine_failure(IMPORT_FAILED, error) from error
        raise  # the missing 'flower' extra: named with its install line (uldp.cli.errors)
    except ImportError as error:  # installed but broken: the environment's, not a bug
        raise engine_failure(IMPORT_FAILED, error) from error


def _data_name(options: dict[str, Any]) -> str:
    """The data's name before it is loaded, as `data.name` will give it."""
    if options["user_column"] is not None:
        return Path(options["data_path"]).name
    return str(options["dataset"])


def progress_label(algo: str, data_name: str) -> str:
    """What the progress lines begin with: the run."""
    return f"{algo} on {data_name}"


def prepare(options: dict[str, Any], chosen: dict[str, Any], family: Family, personal: bool):
    """(data, TrainConfig): the data loaded and prepared before round 1, by the family (the
    subject level's noise) and by the personalised budgets (each record's or user's rate q)."""
    from uldp.trainers.algorithms import TrainConfig
    from uldp.trainers.metrics_file import metrics_format

    o = options
    if o["metrics_path"]:
        metrics_format(o["metrics_path"])
    data = load_data(
        o["dataset"],
        o["data_path"],
        o["user_column"],
        o["label_column"],
        o["silo_column"],
        o["task"],
        chosen["users"],
        o["silos"],
        o["allocation"],
        o["labels_per_user"],
        o["seed"],
        budget_column=o["budget_column"] if o["budgets_file"] is None else None,
        alpha=o["alpha"],
    )
    fields: dict[str, Any] = {}
    if family.prepare is not None:
        data, fields = family.prepare(data, o, chosen)
    if personal:
        from uldp.trainers.algorithms import get_algorithm
        from uldp.trainers.rates import personalize_data

        data, personal_sigma = personalize_data(
            data,
            algo=o["algo"],
            record_level=get_algorithm(o["algo"]).record_level,
            record_budgets=_file_budgets(data, o["budgets_file"], o["budget_column"]),
            distribution=o["distribution"],
            user_budgets_from=o["user_budgets"],
            seed=o["seed"],
            sigma=chosen["sigma"],
            local_steps=o["local_steps"] or TrainConfig.local_steps,
            rounds=chosen["rounds"],
            silo_q=o["silo_q"] or 1.0,
            delta=o["delta"],
            threat_model=o["threat_model"] or "untrusted",
            batch_size=o["batch_size"],
        )
        chosen["sigma"] = personal_sigma if personal_sigma is not None else chosen["sigma"]
    cfg = train_config(
        o["algo"],
        chosen["rounds"],
        chosen,
        **{name: o[name] for name in CONFIG_OPTIONS},
        secure=o["secure"],
        key_bits=o["key_bits"],
        test_keys=o["test_keys"],
        **({} if o["threat_model"] is None else {"threat_model": o["threat_model"]}),
        **dropout_settings(o),
        **fields,
    )
    return data, cfg


def run_rounds(data, cfg, options: dict[str, Any], chosen: dict[str, Any], last: dict):
    """Train, with a progress line per round and the outputs locked; `last` keeps the last
    completed round's row, for the message if the run is interrupted."""
    from uldp.trainers.runner import train

    o, rounds, metric = options, chosen["rounds"], data.metric

    def on_round(row: dict) -> None:
        last.update(row)
        update(row["round"], _progress_text(row, metric))

    checkpoint_dir = o["checkpoint_dir"]
    if checkpoint_dir is not None:
        Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)  # its lock lives in it
    locked = {
        "--checkpoint": None if checkpoint_dir is None else Path(checkpoint_dir) / CHECKPOINT_FILE,
        "--metrics": o["metrics_path"],
    }
    with (
        output_locks(locked),
        round_progress(o["fmt"], rounds, progress_label(o["algo"], data.name)) as update,
    ):
        return train(
            data,
            cfg,
            model_name=None if chosen["model"] == "auto" else chosen["model"],
            device=o["device"],
            metrics_path=o["metrics_path"],
            checkpoint_dir=checkpoint_dir,
            resume=o["resume"],
            overwrite=o["overwrite"],
            on_round=on_round,
            engine=o["engine"],
            on_stage=update.stage,
        )


def _file_budgets(data, path, budget_column):
    """The training records' budgets from --epsilon-csv, read as `uldp personalize` reads it (its
    column `id` names the records, else one row per record); None without the option."""
    if path is None:
        return None
    from uldp.trainers.budget_sources import record_budgets_by_id

    from ...personalize_io import read_budgets

    column = budget_column or "epsilon"
    read = read_budgets(Path(path), column, "id", id_given=False)
    ids = read.ids if read.id_name == "id" else None
    named = f"{path} (column {column!r}" + (", records by 'id')" if ids is not None else ")")
    return record_budgets_by_id(data, ids, read.values, named)


def _progress_text(row: dict, metric: str) -> str:
    """One round's line: the task metric and the epsilon spent, both views under user sampling."""
    text = f"{metric.replace('_', '-')} {format_cell(row[metric])}  epsilon {format_cell(row['epsilon'])}"
    if "server_epsilon" in row:
        text += f" (server {format_cell(row['server_epsilon'])})"
    if "dropped_upload" in row:  # dp-fedavg-robust
        text += f"  dropped {row['dropped_upload'] + row['dropped_calibration']}/{row['participants']}"
    return text


def interrupted(last: dict, rounds: int, checkpoint_dir, resume: bool, status=INTERRUPTED) -> NoReturn:
    """Ctrl-C (or SIGTERM, SIGHUP): say what was completed and spent, how to resume, and exit
    with status 130 (128 + the signal's number)."""
    import shlex
    import sys

    if last:
        if "subject_epsilon_federation" in last:  # the subject-level algorithms
            spent = (
                f"epsilon {format_cell(last['epsilon'])} (delta {last['delta']:g}; the worst subject's "
                f"federation-wide {format_cell(last['subject_epsilon_federation'])})"
            )
        elif "tier1_epsilon_untrusted" in last:  # rpdp / unidp: per record, each with its budget
            spent = (
                f"record-level epsilon up to {format_cell(last['epsilon'])} (delta {last['delta']:g}; "
                "each budget tier's own in --metrics)"
            )
        else:
            spent = f"user-level epsilon {format_cell(last['epsilon'])} (delta {last['delta']:g})"
        if "server_epsilon" in last:
            spent += f", {format_cell(last['server_epsilon'])} against the server that samples users"
        lines = [
            f"Interrupted after round {last['round']} of {rounds}: the model after round "
            f"{last['round']} has spent {spent}."
        ]
    elif resume:
        lines = [f"Interrupted before this run completed a round: {checkpoint_dir} is unchanged."]
    else:
        lines = [f"Interrupted before round 1 of {rounds} completed: no round was released."]
    argv = [a for a in sys.argv[1:] if a != "--overwrite"]
    if "--resume" not in argv:
        argv.append("--resume")
    if checkpoint_dir is None:
        lines.append("No --checkpoint DIR was given, so the run cannot be resumed.")
    elif last:
        lines.append(f"Resume from round {last['round'] + 1} with: {shlex.join(['uldp', *argv])}")
    elif resume:
        lines.append(f"Resume with: {shlex.join(['uldp', *argv])}")
    else:
        lines.append(f"No round completed: {checkpoint_dir} holds no checkpoint of this run.")
    for line in lines:
        try:
            click.echo(line, err=True)
        except OSError:
            break  # SIGHUP: the terminal is gone
    sys.exit(status)
