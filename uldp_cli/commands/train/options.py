"""`uldp train`'s options that every algorithm family shares, by `--help` heading, with their
parse-time ranges and parameter types (each family's own options are in its module)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from uldp.accountants.private_sampling import MAX_SLOTS
from uldp.trainers.defaults import describe

from ...option_groups import OptionGroup
from ...options import (
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
)

DATASETS = ("mnist", "heart-disease", "gbsg2", "creditcard")
MODELS = ("auto", "cnn", "mlp", "logistic", "cox")
#: uldp.trainers.own_model's loss and metric names, repeated so that parsing does not import torch.
LOSSES = ("cross_entropy", "binary_cross_entropy", "cox", "mse")
METRICS = ("accuracy", "roc_auc", "c_index")
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
MAX_LOCAL_EPOCHS = 10_000
MAX_LOCAL_STEPS = 1_000_000
MAX_BATCH = 100_000_000
MAX_NOISE_SEED = 2**128 - 1  # the entropy drawn by default is 128 bits
MAX_THREADS = 1024
MAX_EVERY = MAX_ROUNDS
MAX_GROUP_K = 1_000_000
KEY_BITS_RANGE = (256, 16384)  # Paillier: >= 2048 unless --test-keys; 16384 takes minutes to make
#: uldp.trainers.checkpoint_file.CHECKPOINT_NAME, repeated so that parsing does not import torch (a test
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


class NameOrReference(click.ParamType):
    """A built-in name among `names` (None: any name) or the user's own code, `FILE.py:NAME` or
    `package.module:NAME` (uldp.trainers.references); only the form is checked here, the code is
    loaded before the run (one Error line if it fails)."""

    name = "name|reference"

    def __init__(self, names: tuple[str, ...] | None = None, what: str = "name") -> None:
        self.names = names
        self.what = what

    def convert(self, value, param, ctx):
        from uldp.trainers.references import FORMS, is_reference

        text = str(value).strip()
        if is_reference(text) or (self.names is None and text) or (self.names and text in self.names):
            return text
        known = f"one of {', '.join(self.names)}, or " if self.names else ""
        self.fail(f"{value!r} is not a {self.what}: give {known}{FORMS}", param, ctx)


class Reference(click.ParamType):
    """The user's own code: `FILE.py:NAME` or `package.module:NAME` (only the form checked here)."""

    name = "reference"

    def convert(self, value, param, ctx):
        from uldp.trainers.references import FORMS, is_reference

        text = str(value).strip()
        if not is_reference(text):
            self.fail(f"{value!r} names no code: give {FORMS}", param, ctx)
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


ALGORITHM = OptionGroup.of(
    "Algorithm",
    click.option(
        "--algo",
        type=AlgorithmChoice(),
        required=True,
        cls=AlgorithmOption,
        help="Algorithm (ULDP-FL §3, §4.1):",
    ),
)

DATA = OptionGroup.of(
    "Data",
    click.option(
        "--dataset",
        type=click.Choice(DATASETS),
        default=None,
        help="Built-in data set; or give --data-path with --user-column/--label-column, or --data.",
    ),
    click.option(
        "--data",
        "data",
        type=Reference(),
        default=None,
        metavar="FILE.py:NAME",
        help="Your own data: a loader (FILE.py:NAME or package.module:NAME, called with seed if it takes "
        "it) returning (x, y, users[, silos]), per-silo data or Datasets, or a FederatedData "
        "(docs/library.md).",
    ),
    click.option(
        "--data-path",
        "--path",
        "data_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="creditcard: the Kaggle creditcard.csv; or your own CSV/Parquet table.",
    ),
    click.option(
        "--user-column",
        "--subject-column",
        "user_column",
        default=None,
        help="Your table: column naming each record's user (its subject, for the subject-level algorithms).",
    ),
    click.option("--label-column", default=None, help="Your table: label column (survival: TIME,EVENT)."),
    click.option("--silo-column", default=None, help="Your table: column naming the silo (optional)."),
    click.option(
        "--task",
        type=click.Choice(["binary", "multiclass", "survival"]),
        default="binary",
        show_default=True,
        help="Your table's task.",
    ),
    click.option(
        "--users",
        type=PositiveInt(MAX_USERS),
        default=None,
        help=f"Users |U| to allocate records to, 1 to the records, at most {MAX_USERS:,} "
        f"({describe('users')}).",
    ),
    click.option(
        "--silos",
        type=PositiveInt(MAX_SILOS),
        default=None,
        help=f"Silos |S|, 1 to {MAX_SILOS:,} (default: 5, or the data set's fixed silos).",
    ),
    click.option(
        "--allocation",
        type=click.Choice(["uniform", "zipf", "power"]),
        default="uniform",
        show_default=True,
        help="Record allocation to users and silos (§5.1); power: each user's records over the silos by "
        "P(x; alpha) = alpha x^(alpha-1) (subject-level DP §4.2, --alpha).",
    ),
    click.option(
        "--alpha",
        type=Interval(1e-3, 1e3, low_open=False, high_open=False),
        default=None,
        help="--allocation power: alpha, in [0.001, 1000] (1: uniform; larger: a user's records on fewer "
        "silos).",
    ),
    click.option(
        "--labels-per-user",
        type=PositiveInt(MAX_LABELS_PER_USER),
        default=None,
        help=f"Non-i.i.d. users: at most this many labels each (1 to {MAX_LABELS_PER_USER:,}).",
    ),
    click.option(
        "--seed",
        type=IntegerIn(0, SEED_MAX),
        default=0,
        show_default=True,
        help="Seed for the data allocation and the initial model, 0 to 2**32-1.",
    ),
)

MODEL = OptionGroup.of(
    "Model and training",
    click.option(
        "--model",
        type=NameOrReference(MODELS, "model"),
        default=None,
        metavar="NAME|FILE.py:NAME",
        help=f"{', '.join(MODELS)} (auto: the paper's model for the data set, {describe('model')}), or "
        "your own: a factory FILE.py:NAME or package.module:NAME returning a torch.nn.Module (called "
        "with feature_shape, n_classes, n_outputs, task if it takes them).",
    ),
    click.option(
        "--loss",
        type=NameOrReference(LOSSES, "loss"),
        default=None,
        metavar="NAME|FILE.py:NAME",
        help=f"{', '.join(LOSSES)}, or your own (output, y) -> mean loss (default: the task's).",
    ),
    click.option(
        "--metric",
        type=NameOrReference(METRICS, "metric"),
        default=None,
        metavar="NAME|FILE.py:NAME",
        help=f"{', '.join(METRICS)}, or your own (outputs, y) -> float over the test set (default: the "
        "task's).",
    ),
    click.option(
        "--rounds",
        type=PositiveInt(MAX_ROUNDS),
        default=None,
        help=f"Training rounds T, 1 to {MAX_ROUNDS:,} ({describe('rounds')}).",
    ),
    click.option(
        "--local-epochs",
        type=PositiveInt(MAX_LOCAL_EPOCHS),
        default=None,
        help=f"Local epochs Q, 1 to {MAX_LOCAL_EPOCHS:,} ({describe('local_epochs')}).",
    ),
    click.option(
        "--lr",
        type=PositiveFloat(MAX_LR),
        default=None,
        help=f"Local learning rate, in (0, 1e6] ({describe('lr')}).",
    ),
    click.option(
        "--global-lr",
        type=PositiveFloat(MAX_GLOBAL_LR),
        default=None,
        help=f"Global (server) learning rate, in (0, 1e9] ({describe('global_lr')}).",
    ),
    click.option(
        "--batch-size",
        type=PositiveInt(MAX_BATCH),
        default=32,
        show_default=True,
        help="Silo-level SGD / DP-SGD batch, 1 to 1e8 (default, uldp-naive, uldp-group).",
    ),
    click.option(
        "--local-steps",
        type=PositiveInt(MAX_LOCAL_STEPS),
        default=None,
        help=f"rpdp/unidp: DP-SGD steps tau per round on a sampled silo; userldp, localgroupdp, higradavgdp, "
        f"localitemdp: mini-batches per member and round; 1 to {MAX_LOCAL_STEPS:,} (default: 50).",
    ),
)

PRIVACY = OptionGroup.of(
    "Privacy",
    click.option(
        "--sigma",
        type=NoiseMultiplier(),
        default=None,
        help=f"Noise multiplier, in [1e-6, 1e6] ({describe('sigma')}; with per-record or per-user budgets: "
        "calibrated to them).",
    ),
    click.option(
        "--epsilon",
        type=EpsilonBudget(),
        default=None,
        help="A target instead of --sigma, the noise calibrated to it before round 1: uldp-*: the "
        "user-level epsilon (released model) after --rounds, as `uldp calibrate --algo`; userldp/"
        "localgroupdp/higradavgdp: the worst subject's federation-wide epsilon after --rounds "
        "(localitemdp: its item-level epsilon).",
    ),
    click.option(
        "--clip",
        type=Interval(*CLIP_RANGE, low_open=False, high_open=False),
        default=1.0,
        show_default=True,
        help="Clipping bound C, in [1e-6, 1e6].",
    ),
    delta_option,
    click.option(
        "--user-q",
        type=Interval(MIN_USER_Q, 1.0, low_open=False, high_open=False),
        default=1.0,
        show_default=True,
        help="User-level Poisson sampling rate per round (Algorithm 4), in [1e-6, 1].",
    ),
    # Under the common heading: two families read it (rPDP-FL's clients, Baek et al.'s participants).
    click.option(
        "--silo-q",
        type=Interval(MIN_USER_Q, 1.0, low_open=False, high_open=False),
        default=None,
        help="Silo-level Poisson sampling rate per round, in [1e-6, 1] (default: 1): rpdp/unidp's "
        "lambda (rPDP-FL), dp-fedavg-robust's q (Baek et al., the silos are its participants).",
    ),
    click.option(
        "--group-k",
        type=GroupK(),
        default="median",
        show_default=True,
        help=f"uldp-group: records kept per user, an integer in [1, {MAX_GROUP_K:,}], max or median; "
        "localgroupdp: Z, a subject's items kept per member (default there: max, none dropped).",
    ),
    click.option(
        "--noise-seed",
        type=IntegerIn(0, MAX_NOISE_SEED),
        default=None,
        help="Make noise and sampling reproducible, 0 to 2**128-1 (experiments only: anyone who "
        "knows it can remove the noise). Default: fresh OS entropy every run.",
    ),
)

SECURE = OptionGroup.of(
    "Secure computation",
    click.option(
        "--secure",
        is_flag=True,
        help="uldp-avg-w/-sgd-w: weight through Protocol 1 (Paillier); dp-fedavg-robust: secure "
        "aggregation of the uploads (Algorithm 3).",
    ),
    click.option(
        "--key-bits",
        type=IntegerIn(*KEY_BITS_RANGE),
        default=3072,
        show_default=True,
        help="--secure: Paillier modulus bits, 2048 to 16384 (from 256 with --test-keys).",
    ),
    click.option("--test-keys", is_flag=True, help="--secure: allow small, INSECURE keys (tests only)."),
    click.option(
        "--private-sampling",
        is_flag=True,
        help="uldp-avg-w/-sgd-w --secure: draw the user sample by oblivious transfer (ULDP-FL §4.1), "
        "so the server never learns it and its view is amplified too; --user-q is rounded to m/P.",
    ),
    click.option(
        "--sampling-slots",
        type=IntegerIn(2, MAX_SLOTS),
        default=100,
        show_default=True,
        help=f"--private-sampling: P, the slots per user (q is m/P), 2 to {MAX_SLOTS:,}.",
    ),
    click.option(
        "--audit-rate",
        type=Interval(0.0, 1.0, low_open=False, high_open=True),
        default=0.05,
        show_default=True,
        help="--private-sampling: each user's slots are audited with this probability a round "
        "(a server that cheats on k users escapes with probability (1 - a)^k).",
    ),
)

ENGINE = OptionGroup.of(
    "Engine",
    click.option(
        "--engine",
        type=click.Choice(["local", "flower"]),
        default="local",
        show_default=True,
        help="local: every silo in this process; flower: each silo a separate party (a Flower "
        "ClientApp on its own SuperNode) in Flower's simulation engine (the 'flower' extra; docs/flower.md).",
    ),
    click.option(
        "--device",
        type=click.Choice(["cpu", "cuda"]),
        default="cpu",
        show_default=True,
        help="cuda: train on the GPU (must be present).",
    ),
    click.option(
        "--threads",
        type=PositiveInt(MAX_THREADS),
        default=None,
        help=f"torch CPU threads, 1 to {MAX_THREADS} (default: the CPUs free now, this process's CPUs minus "
        "the 1-minute load average, at least 1; docs/performance.md).",
    ),
    click.option("--loop", is_flag=True, help="Train users one by one (the slow reference path)."),
)

OUTPUT = OptionGroup.of(
    "Output",
    format_option,
    click.option(
        "--metrics",
        "metrics_path",
        type=OutputFile(),
        default=None,
        help="Write one line per round to FILE.jsonl or FILE.csv.",
    ),
    click.option(
        "--plot",
        "plot_path",
        type=OutputFile(),
        default=None,
        help="Draw utility, loss and epsilon against rounds to this PNG.",
    ),
    click.option(
        "--every",
        type=PositiveInt(MAX_EVERY),
        default=None,
        help=f"Table: show every N-th round and the last (default: N so that at most {MAX_TABLE_ROWS} "
        "rows show; --metrics and --format json/csv always have every round).",
    ),
    click.option(
        "--checkpoint",
        "checkpoint_dir",
        type=CheckpointDir(),
        default=None,
        help="Directory for a checkpoint after every round (created if missing; locked while a run uses it).",
    ),
    click.option("--resume", is_flag=True, help="Continue from the checkpoint in --checkpoint."),
    click.option(
        "--tensorboard",
        type=click.Path(file_okay=False),
        default=None,
        metavar="DIR",
        help="Log every round to TensorBoard event files in DIR (the 'tracking' extra).",
    ),
    click.option(
        "--mlflow",
        default=None,
        metavar="URI",
        help="Log the settings, every round and the guarantees to MLflow at this tracking URI (the "
        "'tracking' extra).",
    ),
    click.option(
        "--overwrite",
        is_flag=True,
        help="Replace a checkpoint already in --checkpoint DIR (without it, such a DIR is refused).",
    ),
)
