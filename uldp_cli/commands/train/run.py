"""`uldp train`'s run: the rounds with their progress line and output locks, and what an
interrupted run has spent; the preparation before round 1 (the settings left out, the data, the
TrainConfig) is the library's, shared with `uldp.train` (uldp.trainers.run_setup)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import click

from ...locks import output_locks
from ...progress import round_progress, stage
from ...render import format_cell
from .options import CHECKPOINT_FILE

INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process stopped by Ctrl-C


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
    """The data's name before it is loaded, as `data.name` will give it (your own data: its
    loader's reference)."""
    if options["data"] is not None:
        return str(options["data"])
    if options["user_column"] is not None:
        return Path(options["data_path"]).name
    return str(options["dataset"])


def progress_label(algo: str, data_name: str, model: str | None = None) -> str:
    """What the progress lines begin with: the run (and your own model, `--model FILE.py:NAME`)."""
    from uldp.trainers.references import is_reference

    own = model is not None and is_reference(model)
    return f"{algo} on {data_name}" + (f", model {model}" if own else "")


def prepare(options: dict[str, Any], chosen: dict[str, Any], personal: bool):
    """(data, TrainConfig): the library's preparation (`run_setup.prepare`), with --epsilon-csv
    read as `uldp personalize` reads it."""
    from uldp.trainers.run_setup import prepare as prepare_run

    from .checks import spelling

    o = options
    return prepare_run(
        o,
        chosen,
        personal,
        spell=spelling(click.get_current_context()),
        record_budgets=None
        if o["budgets_file"] is None
        else lambda data: _file_budgets(data, o["budgets_file"], o["budget_column"]),
    )


def run_rounds(data, cfg, options: dict[str, Any], chosen: dict[str, Any], last: dict, tracker):
    """Train, with a progress line per round, the outputs locked and the rounds told to
    `tracker` (TensorBoard, MLflow: uldp.trainers.tracking); `last` keeps the last completed
    round's row, for the message if the run is interrupted."""
    from uldp.trainers.run_setup import metric_key, model_label, record_target
    from uldp.trainers.runner import train
    from uldp.trainers.tracking import run_settings

    o, rounds = options, chosen["rounds"]
    metric = metric_key(o["metric"], data)

    def on_round(row: dict) -> None:
        last.update(row)
        tracker.round(row)
        update(row["round"], _progress_text(row, metric))

    checkpoint_dir = o["checkpoint_dir"]
    if checkpoint_dir is not None:
        # A model refused below would leave an empty folder behind: check it before making one.
        check_model(data, cfg, o, chosen["model"])
        Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)  # its lock lives in it
    locked = {
        "--checkpoint": None if checkpoint_dir is None else Path(checkpoint_dir) / CHECKPOINT_FILE,
        "--metrics": o["metrics_path"],
    }
    label = progress_label(o["algo"], data.name, chosen["model"])
    with output_locks(locked), round_progress(o["fmt"], rounds, label) as update:
        tracker.start(run_settings(cfg, data, model_label(chosen["model"])))
        result = train(
            data,
            cfg,
            model=None if chosen["model"] == "auto" else chosen["model"],
            loss=o["loss"],
            metric=o["metric"],
            device=o["device"],
            metrics_path=o["metrics_path"],
            checkpoint_dir=checkpoint_dir,
            resume=o["resume"],
            overwrite=o["overwrite"],
            on_round=on_round,
            engine=o["engine"],
            on_stage=update.stage,
        )
        record_target(result.summary, o)
        tracker.finish(result.summary, result.assumptions)
        return result


def check_model(data, cfg, options: dict[str, Any], model: Any) -> None:
    """Resolve and build the run's model as the round loop will (`own_model.build_checked`), so
    that a model refused (it mixes users' records, misfits the loss) is refused before anything is
    written. It is built in a forked RNG under the run's seed: the run's random state is untouched."""
    import torch

    from uldp.trainers.own_model import build_checked, resolve_model

    spec = resolve_model(model, data=data, loss=options["loss"], metric=options["metric"])
    with torch.random.fork_rng():
        torch.manual_seed(cfg.seed)
        build_checked(spec, data)


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
