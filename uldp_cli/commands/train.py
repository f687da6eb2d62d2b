"""`uldp train`: run a ULDP-FL algorithm on a data set, with utility and epsilon per round."""

from __future__ import annotations

import os
from pathlib import Path

import click
from click.core import ParameterSource

from uldp.trainers.defaults import describe, train_defaults

from ..aliases import AliasedOption
from ..config import config_option
from ..errors import library_errors
from ..files import atomic_write_bytes
from ..locks import output_locks
from ..options import (
    SEED_MAX,
    AlgorithmChoice,
    AlgorithmOption,
    EpsilonBudget,
    IntegerIn,
    Interval,
    NoiseMultiplier,
    OutputFile,
    PositiveFloat,
    PositiveInt,
    can_create_in,
    delta_option,
    format_option,
    given_source,
)
from ..progress import round_progress
from ..render import emit, format_cell
from ..signals import Terminated

DATASETS = ("mnist", "heart-disease", "gbsg2", "creditcard")
MODELS = ("auto", "cnn", "mlp", "logistic", "cox")
MAX_TABLE_ROWS = 15

# Parse-time ranges (issue 12): where the maths, the float32 model or memory stops being
# meaningful; each option's --help and docs/train.md ("Ranges") state them.
CLIP_RANGE = (1e-6, 1e6)  # parameter-norm units; sigma * C must stay far inside float32 (3.4e38)
MAX_LR = 1e6
MAX_GLOBAL_LR = 1e9  # ULDP-AVG divides the server step by q |U| |S| (Algorithm 3 line 6)
MIN_USER_Q = 1e-6  # the server step divides by q: a smaller q only magnifies noise to overflow
MAX_ROUNDS = 100_000
MAX_USERS = 10_000_000
MAX_SILOS = 10_000
MAX_LABELS_PER_USER = 10_000
MAX_GROUP_K = 1_000_000
MAX_LOCAL_EPOCHS = 10_000
MAX_LOCAL_STEPS = 1_000_000
#: uldp.accountants.budgets.DISTRIBUTIONS, repeated so that parsing does not import numpy (a test
#: keeps the two equal).
BUDGET_DISTRIBUTIONS = (
    "three-levels",
    "bounded-pareto",
    "bounded-mix-gauss",
    "group-3",
    "group-100",
    "individual-1000",
)
MAX_BATCH = 100_000_000
MAX_NOISE_SEED = 2**128 - 1  # the entropy drawn by default is 128 bits
KEY_BITS_RANGE = (256, 16384)  # Paillier: >= 2048 unless --test-keys; 16384 takes minutes to make
MAX_THREADS = 1024
MAX_EVERY = MAX_ROUNDS
#: uldp.trainers.runner.CHECKPOINT_NAME, repeated so that parsing does not import torch (a test
#: keeps the two equal).
CHECKPOINT_FILE = "checkpoint.pt"


class CheckpointDir(click.ParamType):
    """--checkpoint DIR: refused at parse time, before any training, if a checkpoint could not be
    written there (empty path, a file, a read-only or missing parent) (issue 12)."""

    name = "directory"

    def convert(self, value, param, ctx):
        text = os.fsdecode(value) if isinstance(value, (str, bytes, os.PathLike)) else str(value)
        if not text.strip():
            self.fail("an empty path; give a directory", param, ctx)
        path = Path(text)
        if path.exists() and not path.is_dir():
            self.fail(f"{path} is a file; give a directory", param, ctx)
        if (path / CHECKPOINT_FILE).is_dir():
            self.fail(f"{path / CHECKPOINT_FILE} is a directory, not a checkpoint; remove it", param, ctx)
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent  # the directory that `mkdir -p` would create it in
        if not existing.is_dir() or not can_create_in(existing.resolve()):
            self.fail(f"{path}: directory {existing} is not writable", param, ctx)
        return text


class GroupK(click.ParamType):
    """uldp-group's k: an integer >= 1, `max` or `median` of the records per user."""

    name = "k"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip().lower() in ("max", "median"):
            return value.strip().lower()
        try:
            return PositiveInt(MAX_GROUP_K).convert(value, param, ctx)
        except click.BadParameter:
            self.fail(f"{value!r} is not an integer in [1, {MAX_GROUP_K}], max or median", param, ctx)


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
@click.option(
    "--user-column",
    "--subject-column",
    "user_column",
    default=None,
    help="Your table: column naming each record's user (its subject, for the subject-level algorithms).",
)
@click.option("--label-column", default=None, help="Your table: label column (survival: TIME,EVENT).")
@click.option("--silo-column", default=None, help="Your table: column naming the silo (optional).")
@click.option(
    "--task",
    type=click.Choice(["binary", "multiclass", "survival"]),
    default="binary",
    show_default=True,
    help="Your table's task.",
)
@click.option(
    "--rounds",
    type=PositiveInt(MAX_ROUNDS),
    default=None,
    help=f"Training rounds T, 1 to {MAX_ROUNDS:,} ({describe('rounds')}).",
)
@click.option(
    "--sigma",
    type=NoiseMultiplier(),
    default=None,
    help=f"Noise multiplier, in [1e-6, 1e6] ({describe('sigma')}; with per-record or per-user budgets: "
    "calibrated to them).",
)
@click.option(
    "--epsilon",
    type=EpsilonBudget(),
    default=None,
    help="userldp/localgroupdp/higradavgdp: calibrate the noise so that the worst subject's "
    "federation-wide epsilon after --rounds is at most this (localitemdp: its item-level epsilon); "
    "instead of --sigma.",
)
@click.option(
    "--clip",
    type=Interval(*CLIP_RANGE, low_open=False, high_open=False),
    default=1.0,
    show_default=True,
    help="Clipping bound C, in [1e-6, 1e6].",
)
@click.option(
    "--users",
    type=PositiveInt(MAX_USERS),
    default=None,
    help=f"Users |U| to allocate records to, 1 to the records, at most {MAX_USERS:,} ({describe('users')}).",
)
@click.option(
    "--silos",
    type=PositiveInt(MAX_SILOS),
    default=None,
    help=f"Silos |S|, 1 to {MAX_SILOS:,} (default: 5, or the data set's fixed silos).",
)
@click.option(
    "--allocation",
    type=click.Choice(["uniform", "zipf", "power"]),
    default="uniform",
    show_default=True,
    help="Record allocation to users and silos (§5.1); power: each user's records over the silos by "
    "P(x; alpha) = alpha x^(alpha-1) (subject-level DP §4.2, --alpha).",
)
@click.option(
    "--alpha",
    type=Interval(1e-3, 1e3, low_open=False, high_open=False),
    default=None,
    help="--allocation power: alpha, in [0.001, 1000] (1: uniform; larger: a user's records on fewer silos).",
)
@click.option(
    "--labels-per-user",
    type=PositiveInt(MAX_LABELS_PER_USER),
    default=None,
    help=f"Non-i.i.d. users: at most this many labels each (1 to {MAX_LABELS_PER_USER:,}).",
)
@click.option(
    "--seed",
    type=IntegerIn(0, SEED_MAX),
    default=0,
    show_default=True,
    help="Seed for the data allocation and the initial model, 0 to 2**32-1.",
)
@click.option(
    "--noise-seed",
    type=IntegerIn(0, MAX_NOISE_SEED),
    default=None,
    help="Make noise and sampling reproducible, 0 to 2**128-1 (experiments only: anyone who "
    "knows it can remove the noise). Default: fresh OS entropy every run.",
)
@click.option(
    "--user-q",
    type=Interval(MIN_USER_Q, 1.0, low_open=False, high_open=False),
    default=1.0,
    show_default=True,
    help="User-level Poisson sampling rate per round (Algorithm 4), in [1e-6, 1].",
)
@click.option(
    "--group-k",
    type=GroupK(),
    default="median",
    show_default=True,
    help=f"uldp-group: records kept per user, an integer in [1, {MAX_GROUP_K:,}], max or median; "
    "localgroupdp: Z, a subject's items kept per member (default there: max, none dropped).",
)
@click.option(
    "--distribution",
    type=click.Choice(BUDGET_DISTRIBUTIONS),
    default=None,
    help="rpdp/unidp/default: draw each record's budget from an rPDP-FL scenario (seeded by --seed, "
    "as `uldp personalize --distribution` draws them).",
)
@click.option(
    "--epsilon-csv",
    "budgets_file",
    cls=AliasedOption,
    aliases=("--budgets",),
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="rpdp/unidp/default: CSV of per-record budgets, e.g. what `uldp personalize --out` wrote "
    "(column id: the data's record numbers from 1, else one row per record in order).",
)
@click.option(
    "--epsilon-column",
    "budget_column",
    cls=AliasedOption,
    aliases=("--budget-column",),
    default=None,
    help="rpdp/unidp/default: the column holding each record's budget (> 0): of --epsilon-csv "
    "(default: epsilon), else of your own table (--data-path with --user-column).",
)
@click.option(
    "--user-budgets",
    default=None,
    metavar="FILE|NAME",
    help="uldp-avg(-w)/uldp-sgd(-w): each user's budget, a CSV (columns user, epsilon) or a "
    "scenario name drawn with --seed; user u is then sampled at its own q_u.",
)
@click.option(
    "--local-steps",
    type=PositiveInt(MAX_LOCAL_STEPS),
    default=None,
    help=f"rpdp/unidp: DP-SGD steps tau per round on a sampled silo, 1 to {MAX_LOCAL_STEPS:,} (default: 50).",
)
@click.option(
    "--silo-q",
    type=Interval(MIN_USER_Q, 1.0, low_open=False, high_open=False),
    default=None,
    help="rpdp/unidp: Poisson sampling rate lambda of a silo per round, in [1e-6, 1] (default: 1).",
)
@click.option(
    "--threat-model",
    type=click.Choice(["untrusted", "server"]),
    default=None,
    help="rpdp: the threat model the rates q are computed for (both are printed; default: untrusted).",
)
@click.option(
    "--dropout",
    type=Interval(0.0, 1.0, low_open=False, high_open=True),
    default=None,
    help="dp-fedavg-robust: probability that a sampled participant drops out, i.i.d. per round, in "
    "[0, 1) (default: 0).",
)
@click.option(
    "--dropout-at",
    type=click.Choice(["upload", "calibration"]),
    default=None,
    help="dp-fedavg-robust: where --dropout's participants are lost: before their upload, or after "
    "it and before their calibration share (default: upload).",
)
@click.option(
    "--dropout-schedule",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="dp-fedavg-robust: replay the dropouts of a CSV with columns round,participant,at "
    "(participants are silo numbers from 0; at is upload or calibration).",
)
@click.option(
    "--calibration/--no-calibration",
    default=None,
    help="dp-fedavg-robust: the noise calibration step of Algorithm 2 (default: on; off shows the "
    "privacy lost to dropouts).",
)
@click.option(
    "--min-weight-sum",
    type=PositiveFloat(MAX_USERS),
    default=None,
    help="dp-fedavg-robust: n_0 of Algorithm 3, the least weight sum a round works with; the first "
    "noise shares are drawn for it (default: none, Algorithm 2).",
)
@click.option(
    "--n-max",
    type=PositiveInt(MAX_BATCH),
    default=None,
    help="dp-fedavg-robust: weights w_i = min(n_i / n_max, 1) from each participant's records "
    "(default: every weight 1).",
)
@click.option(
    "--threshold",
    type=IntegerIn(2, MAX_SILOS),
    default=None,
    help=f"dp-fedavg-robust --secure: Shamir's threshold k, 2 to {MAX_SILOS:,} (default: a majority "
    "of each round's sample).",
)
@click.option(
    "--local-epochs",
    type=PositiveInt(MAX_LOCAL_EPOCHS),
    default=None,
    help=f"Local epochs Q, 1 to {MAX_LOCAL_EPOCHS:,} ({describe('local_epochs')}).",
)
@click.option(
    "--lr",
    type=PositiveFloat(MAX_LR),
    default=None,
    help=f"Local learning rate, in (0, 1e6] ({describe('lr')}).",
)
@click.option(
    "--global-lr",
    type=PositiveFloat(MAX_GLOBAL_LR),
    default=None,
    help=f"Global (server) learning rate, in (0, 1e9] ({describe('global_lr')}).",
)
@click.option(
    "--batch-size",
    type=PositiveInt(MAX_BATCH),
    default=32,
    show_default=True,
    help="Silo-level SGD / DP-SGD batch, 1 to 1e8 (default, uldp-naive, uldp-group).",
)
@click.option(
    "--local-batch-size",
    type=PositiveInt(MAX_BATCH),
    default=None,
    help="Per-user SGD batch, 1 to 1e8 (uldp-avg); default: all the user's records in one step.",
)
@delta_option
@click.option(
    "--model",
    type=click.Choice(MODELS),
    default=None,
    help=f"auto: the paper's model for the data set ({describe('model')}).",
)
@click.option(
    "--secure",
    is_flag=True,
    help="uldp-avg-w/-sgd-w: weight through Protocol 1 (Paillier); dp-fedavg-robust: secure "
    "aggregation of the uploads (Algorithm 3).",
)
@click.option(
    "--key-bits",
    type=IntegerIn(*KEY_BITS_RANGE),
    default=3072,
    show_default=True,
    help="--secure: Paillier modulus bits, 2048 to 16384 (from 256 with --test-keys).",
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
    type=CheckpointDir(),
    default=None,
    help="Directory for a checkpoint after every round (created if missing; locked while a run uses it).",
)
@click.option("--resume", is_flag=True, help="Continue from the checkpoint in --checkpoint.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace a checkpoint already in --checkpoint DIR (without it, such a DIR is refused).",
)
@click.option(
    "--every",
    type=PositiveInt(MAX_EVERY),
    default=None,
    help=f"Table: show every N-th round and the last (default: N so that at most {MAX_TABLE_ROWS} "
    "rows show; --metrics and --format json/csv always have every round).",
)
@click.option(
    "--plot",
    "plot_path",
    type=OutputFile(),
    default=None,
    help="Draw utility, loss and epsilon against rounds to this PNG.",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "flower"]),
    default="local",
    show_default=True,
    help="local: every silo in this process; flower: each silo a separate party (a Flower "
    "ClientApp on its own SuperNode) in Flower's simulation engine (the 'flower' extra; docs/flower.md).",
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
    type=PositiveInt(MAX_THREADS),
    default=None,
    help=f"torch CPU threads, 1 to {MAX_THREADS} (default: the CPUs free now, this process's CPUs minus the "
    "1-minute load average, at least 1; docs/performance.md).",
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
    epsilon,
    clip,
    users,
    silos,
    allocation,
    alpha,
    labels_per_user,
    seed,
    noise_seed,
    user_q,
    group_k,
    distribution,
    budgets_file,
    budget_column,
    user_budgets,
    local_steps,
    silo_q,
    threat_model,
    dropout,
    dropout_at,
    dropout_schedule,
    calibration,
    min_weight_sum,
    n_max,
    threshold,
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
    overwrite,
    every,
    plot_path,
    engine,
    device,
    threads,
    fmt,
):
    """Train with a ULDP-FL algorithm; report test loss, the task metric and user-level epsilon
    after every round.

    \b
      uldp train --algo uldp-avg --dataset mnist
      uldp train --algo uldp-avg-w --dataset creditcard --data-path creditcard.csv --metrics m.jsonl
      uldp train --algo uldp-group --group-k median --dataset heart-disease --plot run.png
      uldp train --algo uldp-avg --data-path my.csv --user-column patient --label-column y
      uldp train --algo rpdp --dataset heart-disease --distribution three-levels --local-steps 10
      uldp train --algo dp-fedavg-robust --dataset mnist --silos 500 --user-q 0.1 --dropout 0.1
      uldp train --algo higradavgdp --dataset mnist --silos 16 --epsilon 4 --local-steps 10
    """
    _check_inputs(
        dataset,
        data_path,
        user_column,
        label_column,
        resume,
        overwrite,
        checkpoint_dir,
        device,
        metrics_path,
        test_keys,
        secure,
        engine,
    )
    check_ignored(click.get_current_context(), algo, dataset, user_column, secure, fmt, checkpoint_dir)
    _check_dropouts(dropout, dropout_schedule, threshold, secure)
    subject_level, sigma, epsilon = check_subject(
        click.get_current_context(), algo, sigma, epsilon, allocation, alpha
    )
    if subject_level and given_source(click.get_current_context(), "group_k") is None:
        group_k = "max"  # LocalGroupDP: Z bounds every subject's items at a member, none dropped
    personal = _check_budgets(
        algo, distribution, budgets_file, budget_column, user_budgets, user_column, user_q
    )
    # What the user left out comes from the (data set, algorithm) defaults: trainers/defaults.py.
    given = {
        "users": users,
        "rounds": rounds,
        "sigma": sigma,
        "lr": lr,
        "global_lr": global_lr,
        "local_epochs": local_epochs,
        "model": model,
    }
    chosen = {k: v if given[k] is not None else train_defaults(dataset, algo)[k] for k, v in given.items()}
    calibrated = personal and sigma is None and _private(algo)  # default adds no noise
    if calibrated:
        chosen["sigma"] = None  # calibrated to the budgets (trainers/rates.py)
    rounds = chosen["rounds"]
    last: dict = {}  # the last completed round's row, for the message if interrupted
    try:
        with library_errors():
            import torch  # imported here: `uldp train --help` stays fast

            from uldp.trainers.threads import free_cpus

            torch.set_num_threads(threads or free_cpus())
            if engine == "flower":  # before the data load: a missing extra is said at once
                import flwr.simulation  # noqa: F401
                import ray  # noqa: F401

            from uldp.trainers.algorithms import TrainConfig
            from uldp.trainers.metrics_file import metrics_format
            from uldp.trainers.runner import train

            if metrics_path:
                metrics_format(metrics_path)
            data = load_data(
                dataset,
                data_path,
                user_column,
                label_column,
                silo_column,
                task,
                chosen["users"],
                silos,
                allocation,
                labels_per_user,
                seed,
                budget_column if budgets_file is None else None,
                alpha,
            )
            subject_fields: dict = {}
            if subject_level:
                from uldp.trainers.subject_accounting import prepare_subject_run

                data, setup = prepare_subject_run(
                    data,
                    algo,
                    epsilon=epsilon,
                    sigma=None if epsilon is not None else chosen["sigma"],
                    group_k=group_k,
                    batch_size=batch_size,
                    local_steps=local_steps or TrainConfig.local_steps,
                    rounds=rounds,
                    delta=delta,
                    seed=seed,
                )
                chosen["sigma"] = setup.sigma
                subject_fields = {"item_q": setup.item_q, "target_epsilon": epsilon}
                if setup.group is not None:
                    subject_fields["group_budget"] = setup.group.item_epsilon * setup.group.z
                    group_k = setup.group.z
            if personal:
                from uldp.trainers.algorithms import get_algorithm
                from uldp.trainers.rates import personalize_data

                data, personal_sigma = personalize_data(
                    data,
                    algo=algo,
                    record_level=get_algorithm(algo).record_level,
                    record_budgets=_file_budgets(data, budgets_file, budget_column),
                    distribution=distribution,
                    user_budgets_from=user_budgets,
                    seed=seed,
                    sigma=chosen["sigma"],
                    local_steps=local_steps or TrainConfig.local_steps,
                    rounds=rounds,
                    silo_q=silo_q or 1.0,
                    delta=delta,
                    threat_model=threat_model or "untrusted",
                    batch_size=batch_size,
                )
                chosen["sigma"] = personal_sigma if personal_sigma is not None else chosen["sigma"]
            cfg = train_config(
                algo,
                rounds,
                chosen,
                clip=clip,
                user_q=user_q,
                batch_size=batch_size,
                local_batch_size=local_batch_size,
                group_k=group_k,
                delta=delta,
                seed=seed,
                noise_seed=noise_seed,
                loop=loop,
                local_steps=local_steps,
                silo_q=silo_q,
                secure=secure,
                key_bits=key_bits,
                test_keys=test_keys,
                **({} if threat_model is None else {"threat_model": threat_model}),
                **_dropout_settings(
                    dropout, dropout_at, dropout_schedule, calibration, min_weight_sum, n_max, threshold
                ),
                **subject_fields,
            )
            metric = data.metric

            def on_round(row: dict) -> None:
                last.update(row)
                update(row["round"], _progress_text(row, metric, rounds))

            if checkpoint_dir is not None:
                Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)  # its lock lives in it
            locked = {
                "--checkpoint": None if checkpoint_dir is None else Path(checkpoint_dir) / CHECKPOINT_FILE,
                "--metrics": metrics_path,
            }
            with output_locks(locked), round_progress(fmt, rounds, f"{algo} on {data.name}") as update:
                result = train(
                    data,
                    cfg,
                    model_name=None if chosen["model"] == "auto" else chosen["model"],
                    device=device,
                    metrics_path=metrics_path,
                    checkpoint_dir=checkpoint_dir,
                    resume=resume,
                    overwrite=overwrite,
                    on_round=on_round,
                    engine=engine,
                )
    except KeyboardInterrupt:
        _interrupted(last, rounds, checkpoint_dir, resume)
    except Terminated as signal_exit:  # SIGTERM, SIGHUP: the same report, status 128 + signum
        _interrupted(last, rounds, checkpoint_dir, resume, status=signal_exit.code)
    if plot_path:
        from uldp.trainers.plot import plot_runs

        kind = "synthetic" if data.synthetic else "real"
        atomic_write_bytes(
            plot_path,
            plot_runs(
                {algo: result.history},
                data.metric,
                title=f"{algo} on {data.name} ({kind} data): {result.summary['users']} users, "
                f"sigma {result.summary['sigma']:g}, delta {delta:g}",
            ),
        )
    defaulted = [k.replace("_", "-") for k, v in given.items() if v is None and k != "model"]
    if calibrated or (subject_level and (epsilon is not None or algo == "localgroupdp")):
        defaulted.remove("sigma")  # calibrated to the budgets, not a default (the notes say so)
    _render(result, data, fmt, plot_path, metrics_path, every, defaulted)


INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process stopped by Ctrl-C


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


def _progress_text(row: dict, metric: str, rounds: int) -> str:
    """One round's line: the task metric and the epsilon spent, both views under user sampling."""
    text = f"{metric.replace('_', '-')} {format_cell(row[metric])}  epsilon {format_cell(row['epsilon'])}"
    if "server_epsilon" in row:
        text += f" (server {format_cell(row['server_epsilon'])})"
    if "dropped_upload" in row:  # dp-fedavg-robust
        text += f"  dropped {row['dropped_upload'] + row['dropped_calibration']}/{row['participants']}"
    return text


def _interrupted(last: dict, rounds: int, checkpoint_dir, resume: bool, status=INTERRUPTED) -> None:
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


def _check_inputs(
    dataset,
    data_path,
    user_column,
    label_column,
    resume,
    overwrite,
    checkpoint_dir,
    device,
    metrics_path,
    test_keys,
    secure,
    engine,
) -> None:
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
    if test_keys and not secure:
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


def _check_dropouts(dropout, dropout_schedule, threshold, secure) -> None:
    """One source of dropouts; secure aggregation's threshold only with --secure."""
    if dropout is not None and dropout_schedule is not None:
        raise click.UsageError("give --dropout RATE or --dropout-schedule FILE, not both")
    if threshold is not None and not secure:
        raise click.UsageError(
            "--threshold sets secure aggregation's k, which only --secure runs; add --secure"
        )


def check_subject(ctx: click.Context, algo, sigma, epsilon, allocation, alpha):
    """(subject level?, sigma, epsilon): the subject-level algorithms' noise comes from --sigma or
    --epsilon, not both (one on the command line overrides the other from --config); --alpha
    belongs to --allocation power."""
    from uldp.trainers.algorithms import get_algorithm

    if (allocation == "power") != (alpha is not None):
        raise click.UsageError(
            "--allocation power needs --alpha" if alpha is None else "--alpha applies to --allocation power"
        )
    spec = get_algorithm(algo)
    if not spec.subject_level:
        return False, sigma, epsilon
    if sigma is not None and epsilon is not None:
        from_config = {
            name for name in ("sigma", "epsilon") if given_source(ctx, name) is ParameterSource.DEFAULT_MAP
        }
        if from_config == {"epsilon"}:
            epsilon = None  # the command line's --sigma overrides the config's epsilon
        elif from_config == {"sigma"}:
            sigma = None
        else:
            raise click.UsageError("give --sigma or --epsilon (a target to calibrate sigma to), not both")
    if algo == "localgroupdp" and epsilon is None:
        raise click.UsageError(
            "localgroupdp's noise sigma_Z comes from its budget (Corollary 3.5): give --epsilon"
        )
    return True, sigma, epsilon


def _dropout_settings(dropout, dropout_at, dropout_schedule, calibration, min_weight_sum, n_max, threshold):
    """The dp-fedavg-robust fields of TrainConfig the user gave (the others keep its defaults)."""
    given = {
        "dropout": dropout,
        "dropout_at": dropout_at,
        "dropout_schedule": dropout_schedule,
        "calibration": calibration,
        "min_weight_sum": min_weight_sum,
        "n_max": n_max,
        "threshold": threshold,
    }
    return {k: v for k, v in given.items() if v is not None}


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


def _file_budgets(data, path, budget_column):
    """The training records' budgets from --epsilon-csv, read as `uldp personalize` reads it (its
    column `id` names the records, else one row per record); None without the option."""
    if path is None:
        return None
    from uldp.trainers.budget_sources import record_budgets_by_id

    from ..personalize_io import read_budgets

    column = budget_column or "epsilon"
    read = read_budgets(Path(path), column, "id", id_given=False)
    ids = read.ids if read.id_name == "id" else None
    named = f"{path} (column {column!r}" + (", records by 'id')" if ids is not None else ")")
    return record_budgets_by_id(data, ids, read.values, named)


def _check_budgets(
    algo, distribution, budgets_file, budget_column, user_budgets, user_column, user_q
) -> bool:
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


#: The hyper-parameters the notes restate, when the algorithm reads them (AlgorithmSpec.options).
SETTINGS_SHOWN = (
    ("sigma", "sigma"),
    ("clip", "clip"),
    ("lr", "lr"),
    ("global_lr", "global lr"),
    ("local_epochs", "local epochs"),
)


def _render(result, data, fmt: str, plot_path, metrics_path, every: int | None, defaulted: list[str]) -> None:
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
    sampled = "server_epsilon" in summary
    tiers = summary.get("tiers")
    epsilon_columns = (
        [("epsilon", "epsilon (model)"), ("server_epsilon", "epsilon (server)")]
        if sampled
        else [("epsilon", "epsilon")]
    )
    rows = result.history
    subject_level = summary.get("level") == "subject"
    if tiers:
        epsilon_columns, rows = _tier_columns(tiers, summary, rows, fmt)
    if subject_level:
        epsilon_columns = _subject_columns(summary["algo"])
    columns = [
        ("round", "round"),
        ("loss", "test loss"),
        (metric, metric.replace("_", "-")),
        *epsilon_columns,
        *(_dropout_columns(rows) if "target_epsilon" in summary else []),
        ("elapsed_s", "elapsed s"),
    ]
    notes = [
        f"{summary['algo']} on {data.name} ({'SYNTHETIC data' if data.synthetic else 'real data'}), "
        f"{summary['users']} users, {summary['silos']} silos, model {summary['model']} "
        f"({summary['parameters']} parameters)"
    ]
    from uldp.trainers.algorithms import get_algorithm
    from uldp.trainers.algorithms.registry import TRAINING_OPTIONS

    reads = get_algorithm(summary["algo"]).options  # default has no sigma or clip to report
    settings = ", ".join(
        [f"{summary['rounds']} rounds"]
        + [
            f"{label} {summary[key]:g}"
            for key, label in SETTINGS_SHOWN
            if key in reads and summary.get(key) is not None
        ]
    )
    defaulted = [d for d in defaulted if d.replace("-", "_") not in TRAINING_OPTIONS - reads]
    if defaulted:
        settings += f" (defaults: {', '.join(defaulted)}; docs/train.md)"
    notes.append(settings)
    if sampled and not tiers and "target_epsilon" not in summary:
        notes.append(
            "epsilon (model): the released models, amplified by user sampling; epsilon (server): "
            "against the server, which draws the sample and so gets no amplification (Remark 1)"
        )
    if tiers:
        notes.extend(_tier_notes(tiers, summary))
    if "target_epsilon" in summary:
        notes.extend(_dropout_notes(summary, result.history))
    if subject_level:
        notes.extend(_subject_notes(summary, result.history))
    if fmt == "table":
        step = every or -(-len(rows) // MAX_TABLE_ROWS)
        if step > 1:
            rows = [r for i, r in enumerate(rows) if (i + 1) % step == 0 or i == len(rows) - 1]
            notes.append(
                f"the table shows every {_ordinal(step)} round and the last ({len(rows)} of "
                f"{len(result.history)}; --every 1 shows all); --metrics and --format json have every round"
            )
    kind = "SYNTHETIC data" if data.synthetic else "real data"
    for key, path in outputs.items():
        if path:
            notes.append(f"{key} written to {Path(path)}")
    emit(
        f"uldp train: {summary['algo']} on {data.name} ({kind})",
        columns,
        rows,
        fmt,
        assumptions=dict(result.assumptions),
        document=document,
        notes=notes,
    )


def _subject_columns(algo: str) -> list[tuple[str, str]]:
    """The subject-level run's epsilons: the worst subject's at its busiest member and across the
    federation, and the algorithm's own (item level, user-level LDP)."""
    columns = [
        ("subject_epsilon_member", "eps subject (member)"),
        ("subject_epsilon_federation", "eps subject (federation)"),
    ]
    if algo in ("localitemdp", "localgroupdp"):
        columns.append(("item_epsilon", "eps item"))
    if algo == "userldp":
        columns.append(("user_ldp_epsilon", "eps user LDP"))
    return columns


def _subject_notes(summary: dict, history: list[dict]) -> list[str]:
    """What the subject-level figures are for, the target, and the mini-batches' make-up."""
    algo = summary["algo"]
    level = "item-level" if algo == "localitemdp" else "worst subject's federation-wide"
    notes = [
        f"{summary['subjects']} subjects (the data's users) over {summary['silos']} members (silos); "
        f"items sampled at q = {summary['item_q']:.4g} per mini-batch, {summary['local_steps']} "
        "mini-batches per member per round; eps subject: the worst subject's (member: at its busiest "
        "member; federation: horizontal composition, Theorem 3.9)"
        + (
            f"; subjects {summary['member_subject']} and {summary['federation_subject']}"
            if "member_subject" in summary
            else ""
        )
    ]
    if summary.get("epsilon_target") is not None and history:
        spent = history[-1]["epsilon"]
        notes.append(
            f"sigma {summary['sigma']:.6g} calibrated so that the {level} epsilon after "
            f"{len(history)} rounds is at most --epsilon {summary['epsilon_target']:g}: "
            f"{format_cell(spent)}"
        )
    if algo == "localgroupdp":
        notes.append(
            f"LocalGroupDP: Z = {summary['group_size']} items per subject and member (--group-k), "
            f"sigma_Z for the per-member budget E = {summary['group_budget']:.4g} (Corollary 3.5)"
        )
    if algo == "localitemdp":
        notes.append(
            "localitemdp's epsilon is item level (its guarantee); its eps subject columns bound a "
            "subject with m items at a member (sensitivity m C)"
        )
    for key, what in (
        ("batch_z", "largest subject group per mini-batch (Z, Fig. 1(c))"),
        ("batch_subjects", "distinct subjects per mini-batch (Fig. 1(d))"),
    ):
        seen = summary.get(key)
        if seen:
            notes.append(f"{what}: " + _histogram_text(seen))
    return notes


def _histogram_text(seen: dict) -> str:
    """'value: count' pairs, the mean first; long ones shortened to their quartiles."""
    values = [(int(v), n) for v, n in seen.items()]
    total = sum(n for _, n in values)
    mean = sum(v * n for v, n in values) / total
    if len(values) <= 8:
        return f"mean {mean:.2f} over {total} mini-batches; " + ", ".join(f"{v}: {n}" for v, n in values)
    spread = []
    for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
        count = 0
        for v, n in values:
            count += n
            if count >= fraction * total:
                spread.append(v)
                break
    return f"mean {mean:.1f} over {total} mini-batches; min/quartiles/max " + "/".join(map(str, spread))


def _dropout_columns(rows: list[dict]) -> list[tuple[str, str]]:
    """dp-fedavg-robust: who was sampled and who dropped, per round (the calibration column only
    when someone dropped there)."""
    columns = [("participants", "sampled"), ("dropped_upload", "dropped")]
    if any(r.get("dropped_calibration") for r in rows):
        columns.append(("dropped_calibration", "dropped at calibration"))
    return columns


def _dropout_notes(summary: dict, history: list[dict]) -> list[str]:
    """dp-fedavg-robust: the epsilon spent against the run's target, and the rounds not released."""
    spent, target = summary["epsilon"], summary["target_epsilon"]
    compare = "met" if spent <= target * (1 + 1e-9) else f"EXCEEDED by {100 * (spent / target - 1):.1f}%"
    dropped = sum(r["dropped_upload"] + r["dropped_calibration"] for r in history)
    sampled = sum(r["participants"] for r in history)
    notes = [
        f"target: epsilon {format_cell(target)} after {summary['rounds']} rounds without dropouts "
        f"(`uldp dropout --dropout 0`); spent by the released model: {format_cell(spent)}, target "
        f"{compare}; {dropped} of {sampled} sampled participants dropped out"
        + ("" if summary["calibration"] else " (--no-calibration: their noise shares were not replaced)")
    ]
    skipped = [r for r in history if not r["released"]]
    if skipped:
        reasons = sorted({r["note"] for r in skipped})
        if len(reasons) > 3:  # each refusal names its own counts: the first ones say enough
            reasons = [*reasons[:3], f"and {len(reasons) - 3} more (the rows' note)"]
        notes.append(
            f"{len(skipped)} of {len(history)} rounds released nothing and spent nothing: "
            + "; ".join(reasons)
        )
    return notes


def _tier_columns(tiers: list[dict], summary: dict, rows: list[dict], fmt: str):
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


def _tier_notes(tiers: list[dict], summary: dict) -> list[str]:
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


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _private(algo: str) -> bool:
    from uldp.trainers.algorithms import get_algorithm

    return get_algorithm(algo).private
