"""`uldp train`: run a ULDP-FL algorithm on a data set, with utility and epsilon per round."""

from __future__ import annotations

from pathlib import Path

import click

from ..config import config_option
from ..errors import library_errors
from ..files import atomic_write_bytes
from ..options import (
    AlgorithmChoice,
    AlgorithmOption,
    OutputFile,
    PositiveFloat,
    PositiveInt,
    Probability,
    delta_option,
    format_option,
)
from ..progress import progress_bar
from ..render import emit

DATASETS = ("mnist", "heart-disease", "gbsg2", "creditcard")
MODELS = ("auto", "cnn", "mlp", "logistic", "cox")
MAX_TABLE_ROWS = 15


class GroupK(click.ParamType):
    """uldp-group's k: an integer >= 1, `max` or `median` of the records per user."""

    name = "k"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() in ("max", "median"):
            return value.strip().lower()
        try:
            return PositiveInt().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(f"{value!r} is not an integer >= 1, max or median", param, ctx)


@click.command("train")
@click.option(
    "--algo", type=AlgorithmChoice(), required=True, cls=AlgorithmOption, help="Algorithm (ULDP-FL §3, §4.1):"
)
@click.option(
    "--dataset",
    type=click.Choice(DATASETS),
    default=None,
    help="Built-in data set; or give --data-path with --user-column/--label-column.",
)
@click.option(
    "--data-path",
    "--path",
    "data_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="creditcard: the Kaggle creditcard.csv; or your own CSV/Parquet table.",
)
@click.option("--user-column", default=None, help="Your table: column naming each record's user.")
@click.option("--label-column", default=None, help="Your table: label column (survival: TIME,EVENT).")
@click.option("--silo-column", default=None, help="Your table: column naming the silo (optional).")
@click.option(
    "--task",
    type=click.Choice(["binary", "multiclass", "survival"]),
    default="binary",
    show_default=True,
    help="Your table's task.",
)
@click.option("--rounds", type=PositiveInt(), default=10, show_default=True, help="Training rounds T.")
@click.option("--sigma", type=PositiveFloat(), default=5.0, show_default=True, help="Noise multiplier.")
@click.option("--clip", type=PositiveFloat(), default=1.0, show_default=True, help="Clipping bound C.")
@click.option(
    "--users", type=PositiveInt(), default=100, show_default=True, help="Users |U| to allocate records to."
)
@click.option(
    "--silos", type=PositiveInt(), default=None, help="Silos |S| (default: 5, or the data set's fixed silos)."
)
@click.option(
    "--allocation",
    type=click.Choice(["uniform", "zipf"]),
    default="uniform",
    show_default=True,
    help="Record allocation to users and silos (§5.1).",
)
@click.option(
    "--labels-per-user",
    type=PositiveInt(),
    default=None,
    help="Non-i.i.d. users: at most this many labels each.",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed for the data allocation and the initial model.",
)
@click.option(
    "--noise-seed",
    type=click.IntRange(min=0),
    default=None,
    help="Make noise and sampling reproducible (experiments only: anyone who knows it "
    "can remove the noise). Default: fresh OS entropy every run.",
)
@click.option(
    "--user-q",
    type=Probability(),
    default=1.0,
    show_default=True,
    help="User-level Poisson sampling rate per round (Algorithm 4), in (0, 1].",
)
@click.option(
    "--group-k",
    type=GroupK(),
    default="median",
    show_default=True,
    help="uldp-group: records kept per user, an integer >= 1, max or median.",
)
@click.option("--local-epochs", type=PositiveInt(), default=1, show_default=True, help="Local epochs Q.")
@click.option("--lr", type=PositiveFloat(), default=0.05, show_default=True, help="Local learning rate.")
@click.option(
    "--global-lr", type=PositiveFloat(), default=1.0, show_default=True, help="Global (server) learning rate."
)
@click.option(
    "--batch-size",
    type=PositiveInt(),
    default=32,
    show_default=True,
    help="Silo-level SGD / DP-SGD batch (default, uldp-naive, uldp-group).",
)
@click.option(
    "--local-batch-size",
    type=PositiveInt(),
    default=None,
    help="Per-user SGD batch (uldp-avg); default: all the user's records in one step.",
)
@delta_option
@click.option(
    "--model",
    type=click.Choice(MODELS),
    default="auto",
    show_default=True,
    help="auto: the paper's model for the data set.",
)
@click.option("--secure", is_flag=True, help="uldp-avg-w/-sgd-w: weight through Protocol 1 (Paillier).")
@click.option(
    "--key-bits", type=PositiveInt(), default=3072, show_default=True, help="--secure: Paillier modulus bits."
)
@click.option("--test-keys", is_flag=True, help="--secure: allow small, INSECURE keys (tests only).")
@click.option("--loop", is_flag=True, help="Train users one by one (the slow reference path).")
@click.option(
    "--metrics",
    "metrics_path",
    type=OutputFile(),
    default=None,
    help="Write one line per round to FILE.jsonl or FILE.csv.",
)
@click.option(
    "--checkpoint",
    "checkpoint_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Directory for a checkpoint after every round.",
)
@click.option("--resume", is_flag=True, help="Continue from the checkpoint in --checkpoint.")
@click.option(
    "--plot",
    "plot_path",
    type=OutputFile(),
    default=None,
    help="Draw utility, loss and epsilon against rounds to this PNG.",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="cuda: train on the GPU (must be present).",
)
@click.option(
    "--threads",
    type=PositiveInt(),
    default=None,
    help="torch CPU threads (default: torch's choice; 1 is steadiest on a busy machine).",
)
@format_option
@config_option
def command(
    algo,
    dataset,
    data_path,
    user_column,
    label_column,
    silo_column,
    task,
    rounds,
    sigma,
    clip,
    users,
    silos,
    allocation,
    labels_per_user,
    seed,
    noise_seed,
    user_q,
    group_k,
    local_epochs,
    lr,
    global_lr,
    batch_size,
    local_batch_size,
    delta,
    model,
    secure,
    key_bits,
    test_keys,
    loop,
    metrics_path,
    checkpoint_dir,
    resume,
    plot_path,
    device,
    threads,
    fmt,
):
    """Train with a ULDP-FL algorithm; report test loss, the task metric and user-level epsilon
    after every round.

    \b
      uldp train --algo uldp-avg --dataset mnist --rounds 20 --sigma 5 --users 100
      uldp train --algo uldp-avg-w --dataset creditcard --data-path creditcard.csv --metrics m.jsonl
      uldp train --algo uldp-group --group-k median --dataset heart-disease --plot run.png
      uldp train --algo uldp-avg --data-path my.csv --user-column patient --label-column y
    """
    _check_inputs(
        dataset,
        data_path,
        user_column,
        label_column,
        resume,
        checkpoint_dir,
        device,
        metrics_path,
        test_keys,
        secure,
    )
    with library_errors():
        import torch  # imported here: `uldp train --help` stays fast

        if threads:
            torch.set_num_threads(threads)

        from uldp.trainers.algorithms import TrainConfig
        from uldp.trainers.metrics_file import metrics_format
        from uldp.trainers.runner import train

        if metrics_path:
            metrics_format(metrics_path)
        data = _load(
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
        )
        cfg = TrainConfig(
            algo=algo,
            rounds=rounds,
            sigma=sigma,
            clip=clip,
            local_epochs=local_epochs,
            lr=lr,
            global_lr=global_lr,
            user_q=user_q,
            batch_size=batch_size,
            local_batch_size=local_batch_size,
            group_k=group_k,
            delta=delta,
            seed=seed,
            noise_seed=noise_seed,
            secure=secure,
            key_bits=key_bits,
            test_keys=test_keys,
            batched=not loop,
        )
        metric = data.metric
        with progress_bar(fmt, rounds, f"{algo} on {data.name}") as update:
            result = train(
                data,
                cfg,
                model_name=None if model == "auto" else model,
                device=device,
                metrics_path=metrics_path,
                checkpoint_dir=checkpoint_dir,
                resume=resume,
                on_round=lambda row: update(
                    completed=row["round"], status=f"{metric} {row[metric]:.4g}  eps {row['epsilon']:.4g}"
                ),
            )
    if plot_path:
        from uldp.trainers.plot import plot_runs

        kind = "synthetic" if data.synthetic else "real"
        atomic_write_bytes(
            plot_path,
            plot_runs({algo: result.history}, data.metric, title=f"{algo} on {data.name} ({kind} data)"),
        )
    _render(result, data, fmt, plot_path, metrics_path)


def _check_inputs(
    dataset,
    data_path,
    user_column,
    label_column,
    resume,
    checkpoint_dir,
    device,
    metrics_path,
    test_keys,
    secure,
) -> None:
    own_table = user_column is not None or label_column is not None
    if own_table:
        if dataset is not None:
            raise click.UsageError("--user-column/--label-column read your own table: drop --dataset")
        if data_path is None or user_column is None or label_column is None:
            raise click.UsageError("your own table needs --data-path, --user-column and --label-column")
    elif dataset is None:
        raise click.UsageError(
            "give --dataset (mnist, heart-disease, gbsg2, creditcard) or "
            "--data-path with --user-column and --label-column"
        )
    if resume and checkpoint_dir is None:
        raise click.UsageError("--resume needs --checkpoint DIR")
    if test_keys and not secure:
        raise click.UsageError("--test-keys only applies with --secure")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise click.BadParameter(
                "cuda is not available on this machine; use --device cpu", param_hint="'--device'"
            )


def _load(
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
):
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
    )


def _render(result, data, fmt: str, plot_path, metrics_path) -> None:
    metric = data.metric
    summary = dict(result.summary)
    outputs = {"metrics": metrics_path, "plot": plot_path}
    document = {
        "command": "train",
        "summary": summary,
        "assumptions": result.assumptions,
        "outputs": {k: str(v) for k, v in outputs.items() if v},
        "history": result.history,
    }
    columns = [
        ("round", "round"),
        ("loss", "test loss"),
        (metric, metric.replace("_", "-")),
        ("epsilon", "epsilon"),
        ("elapsed_s", "elapsed s"),
    ]
    rows = result.history
    if fmt == "table" and len(rows) > MAX_TABLE_ROWS:
        step = -(-len(rows) // MAX_TABLE_ROWS)
        rows = [r for i, r in enumerate(rows) if i % step == 0 or i == len(rows) - 1]
    kind = "SYNTHETIC data" if data.synthetic else "real data"
    assumptions = dict(result.assumptions)
    notes = [
        f"{summary['algo']} on {data.name} ({kind}), {summary['users']} users, {summary['silos']} "
        f"silos, model {summary['model']} ({summary['parameters']} parameters)"
    ]
    for key, path in outputs.items():
        if path:
            notes.append(f"{key} written to {Path(path)}")
    emit(
        f"uldp train: {summary['algo']} on {data.name} ({kind})",
        columns,
        rows,
        fmt,
        assumptions=assumptions,
        document=document,
        notes=notes,
    )
