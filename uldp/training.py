"""`uldp.train`: `uldp train` as a call, on your own torch model and your own data.

    run = uldp.train(make_model, "mnist", algo="uldp-avg", rounds=5, sigma=3.0, noise_seed=1)
    run.model       # the trained torch.nn.Module, final parameters loaded
    run.history     # one row per round: loss, the metric, epsilon (and server_epsilon), ...
    run.epsilon, run.server_epsilon, run.delta
    run.guarantees  # what `uldp report --run` states of the run (trainers/run_report.py)

As Opacus' `PrivacyEngine.make_private(module=..., data_loader=...)` wraps the user's own
objects, `uldp.train` takes the model as anything `own_model.resolve_model` takes (a built-in
name, a factory, `FILE.py:NAME`, an `nn.Module`) and the data as a built-in data set's name or
anything `own_data.as_federated` takes (arrays with one user id per record, per-silo Datasets,
a loader's reference). Each keyword is the snake_case name of a `uldp train` option
(docs/cli.md; `checkpoint` is `--checkpoint`, `metrics` is `--metrics`), with the command's
defaults (trainers/defaults.py), and the run is prepared by the same code as the command's
(`uldp.trainers.run_setup`) and trained by the same round loop (`runner.train`): with the same
seeds both give the same rounds. Bad input raises `uldp.InvalidParameter` naming the keyword,
an unknown keyword or one the algorithm does not read included.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .errors import DataError, InvalidParameter, UldpError
from .trainers.run_setup import SETTING_DEFAULTS

if TYPE_CHECKING:
    from uldp.accountants.statements.statement import Statement
    from uldp.trainers.run_record import RunFiles

#: The keywords `**algorithm_settings` may hold, with `uldp train`'s defaults: the options of
#: the algorithm families and of the data, by the command's parameter names (the call names
#: `secure`, `epsilon` and `metrics` itself; a budgets CSV is the command's `--epsilon-csv`).
ALGORITHM_SETTINGS: dict[str, Any] = {
    name: default
    for name, default in SETTING_DEFAULTS.items()
    if name not in ("secure", "epsilon", "metrics_path", "budgets_file")
}


@dataclass
class TrainRun:
    """A finished run: the trained model, its rounds and what they guarantee.

    `history`: one row per round, as `uldp train --metrics` writes them (loss, the metric,
    `epsilon`, `server_epsilon` under user sampling, `delta`, ...). `summary` and `assumptions`:
    what `uldp train --format json` prints under those keys. `guarantees`: the run's statement
    (`Statement.as_dict()` follows report-schema.json), what `uldp report --run METRICS` gives
    for this run: every accountant, the server's view, the attack bounds, the caveats.
    """

    model: Any
    history: list[dict]
    summary: dict
    assumptions: dict
    files: RunFiles = field(repr=False)  # the run's record and rows, as `uldp report --run` reads them
    settings: dict = field(default_factory=dict)

    @cached_property
    def guarantees(self) -> Statement:
        """The run's statement, made on first use (every accountant: a second or so)."""
        from uldp.trainers.run_report import run_statement

        return run_statement(self.files)

    @property
    def epsilon(self) -> float:
        """The epsilon the run has spent after its last round (inf: not private), at its level:
        user level for the user-level algorithms (the released model's view; `server_epsilon`
        the server's under user sampling); for the subject-level ones (Marathe & Kanani) the
        worst subject's federation-wide figure (the rows' `subject_epsilon_federation`;
        `item_epsilon` the item-level one); for the record-level ones (rpdp, unidp) per record:
        the largest budget tier's (each tier's, both threat models, in `guarantees`)."""
        if not self.history:
            return math.inf
        row = self.history[-1]
        value = row.get("subject_epsilon_federation", row.get("epsilon"))
        return math.inf if value is None else float(value)

    @property
    def item_epsilon(self) -> float | None:
        """A subject-level run's item-level epsilon (one record's), where the algorithm states
        one; None otherwise."""
        value = self.history[-1].get("item_epsilon") if self.history else None
        return None if value is None else float(value)

    @property
    def server_epsilon(self) -> float | None:
        """Against the server that samples users (ULDP-FL Remark 1); None without user sampling."""
        value = self.history[-1].get("server_epsilon") if self.history else None
        return None if value is None else float(value)

    @property
    def delta(self) -> float:
        return float(self.summary["delta"])

    @property
    def metric(self) -> str:
        """The history rows' key of the task metric (accuracy, roc_auc, c_index, or your own)."""
        return str(self.summary["metric"])


def train(
    model: Any = None,
    data: Any = None,
    *,
    algo: str = "uldp-avg",
    loss: Any = None,
    metric: Any = None,
    rounds: int | None = None,
    sigma: float | None = None,
    clip: float = 1.0,
    user_q: float = 1.0,
    lr: float | None = None,
    local_epochs: int | None = None,
    delta: float = 1e-5,
    epsilon: float | None = None,
    seed: int = 0,
    noise_seed: int | None = None,
    engine: str = "local",
    secure: bool = False,
    checkpoint: Any = None,
    resume: bool = False,
    overwrite: bool = False,
    metrics: Any = None,
    tensorboard: Any = None,
    mlflow: str | None = None,
    on_round: Callable[[dict], None] | None = None,
    device: str = "cpu",
    **algorithm_settings: Any,
) -> TrainRun:
    """Train `model` on `data` with `algo` (ULDP-FL §3, or any registered algorithm), as
    `uldp train` does, and return the trained model with its rounds and guarantees.

    `epsilon`: calibrate sigma so that the user-level epsilon after `rounds` is at most this
    (instead of `sigma`): the plan-accounted algorithms (uldp-*, as `uldp calibrate --algo`)
    and the subject-level ones. `checkpoint` (a directory) with `resume` continues a run;
    `metrics` writes its rows (FILE.jsonl or FILE.csv) and the record `uldp report --run`
    reads; `tensorboard` (a directory) and `mlflow` (a tracking URI) log each round.
    `on_round(row)` hears each completed round. `**algorithm_settings`: the other options of
    `uldp train` (users, silos, batch_size, local_steps, group_k, silo_q, dropout, ...).
    """
    from uldp.trainers.algorithms import get_algorithm
    from uldp.trainers.run_setup import (
        check_budget_sources,
        check_pairs,
        chosen_settings,
        model_label,
        prepare,
        record_target,
    )
    from uldp.trainers.tracking import run_settings, trackers

    unknown = sorted(set(algorithm_settings) - set(ALGORITHM_SETTINGS))
    if unknown:
        raise InvalidParameter(
            f"uldp.train() got an unknown keyword {unknown[0]!r}; it takes the options of `uldp train` "
            f"by their snake_case names: {', '.join(sorted(ALGORITHM_SETTINGS))} besides its named ones"
        )
    spec = get_algorithm(algo)
    _check_integers(
        {"rounds": rounds, "local_epochs": local_epochs, "seed": seed, "noise_seed": noise_seed},
        algorithm_settings,
    )
    named = {
        "sigma": sigma,
        "clip": clip,
        "user_q": user_q,
        "lr": lr,
        "local_epochs": local_epochs,
        "epsilon": epsilon,
        "secure": secure,
        "overwrite": overwrite,
    }
    defaults = {**NAMED_DEFAULTS, **ALGORITHM_SETTINGS}
    given = {k: v for k, v in {**algorithm_settings, **named}.items() if v != defaults[k]}
    settings: dict[str, Any] = {
        **ALGORITHM_SETTINGS,
        **algorithm_settings,
        **_data_settings(data, algorithm_settings),
        "algo": algo,
        "model": model,
        "loss": loss,
        "metric": metric,
        "rounds": rounds,
        "sigma": sigma,
        "clip": clip,
        "user_q": user_q,
        "lr": lr,
        "local_epochs": local_epochs,
        "delta": delta,
        "epsilon": epsilon,
        "seed": seed,
        "noise_seed": noise_seed,
        "engine": engine,
        "secure": secure,
        "checkpoint_dir": None if checkpoint is None else str(checkpoint),
        "resume": resume,
        "overwrite": overwrite,
        "metrics_path": None if metrics is None else str(metrics),
        "device": device,
    }
    _refuse_ignored(algo, given, settings)
    _check_settings(settings, spec)
    check_pairs(settings)
    personal = check_budget_sources(
        algo,
        distribution=settings["distribution"],
        budget_column=settings["budget_column"],
        user_budgets=settings["user_budgets"],
        user_column=settings["user_column"],
        user_q=user_q,
        epsilon=epsilon,
    )
    chosen, _ = chosen_settings(settings, personal)
    tracker = trackers(tensorboard, mlflow)  # a missing package is said before the data loads
    with _keywords_named(), tracker:
        prepared, cfg = prepare(settings, chosen, personal)
        from uldp.trainers.runner import train as run_rounds

        tracker.start(run_settings(cfg, prepared, model_label(chosen["model"])))

        def each_round(row: dict) -> None:
            tracker.round(row)
            if on_round is not None:
                on_round(row)

        result = run_rounds(
            prepared,
            cfg,
            model=None if chosen["model"] == "auto" else chosen["model"],
            loss=loss,
            metric=metric,
            device=device,
            metrics_path=settings["metrics_path"],
            checkpoint_dir=settings["checkpoint_dir"],
            resume=resume,
            overwrite=overwrite,
            on_round=each_round,
            engine=engine,
        )
        record_target(result.summary, settings)
        tracker.finish(result.summary, result.assumptions)
    return TrainRun(
        model=result.model,
        history=result.history,
        summary=result.summary,
        assumptions=result.assumptions,
        files=_run_files(result, prepared, cfg, settings),
        settings={**settings, **chosen, "sigma": cfg.sigma},
    )


#: The options of `uldp train` whose refusals (made in the shared preparation and the model's
#: checks, which name the command's option) name a keyword of `uldp.train` instead.
_KEYWORDS = {"--model": "model", "--data": "data", "--loss": "loss", "--metric": "metric"}


@contextlib.contextmanager
def _keywords_named() -> Iterator[None]:
    """A refusal that starts with one of `uldp train`'s options (`--model: ...`) raised again
    naming the call's keyword (`model: ...`): the caller of `uldp.train` gave no option."""
    try:
        yield
    except (InvalidParameter, DataError) as error:
        text = str(error)
        for option, word in _KEYWORDS.items():
            rest = text[len(option) :]
            if (
                type(error) in (InvalidParameter, DataError)
                and text.startswith(option)
                and rest[:1] in (":", " ")
            ):
                raise type(error)(word + rest) from error
        raise


def _data_settings(data: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """`data` as the command's data settings: a built-in name is `dataset`, anything else (a
    loader's reference, arrays, Datasets, a FederatedData) is the user's own `data`."""
    from uldp.trainers.data import DATASETS
    from uldp.trainers.references import is_reference

    if data is None:
        if settings.get("user_column") is None:
            raise InvalidParameter(
                f"data: give a built-in data set ({', '.join(DATASETS)}), your own data (arrays with one "
                "user id per record, per-silo Datasets, a FederatedData) or a loader FILE.py:NAME"
            )
        return {"dataset": None, "data": None}
    if settings.get("user_column") is not None:
        raise InvalidParameter("user_column reads your own table (data_path): leave data out")
    if isinstance(data, str) and not is_reference(data):
        if data not in DATASETS:
            raise InvalidParameter(
                f"data must be a built-in data set ({', '.join(DATASETS)}), a loader FILE.py:NAME or "
                f"package.module:NAME, or your own data, got {data!r}"
            )
        return {"dataset": data, "data": None}
    return {"dataset": None, "data": data}


#: The named keywords' defaults that a refusal compares with (given: a value other than these).
NAMED_DEFAULTS: dict[str, Any] = {
    "sigma": None,
    "clip": 1.0,
    "user_q": 1.0,
    "lr": None,
    "local_epochs": None,
    "epsilon": None,
    "secure": False,
    "overwrite": False,
}

#: The keywords that take a whole number (`uldp train`'s integer options).
INTEGER_SETTINGS = frozenset(
    {
        "rounds", "local_epochs", "seed", "noise_seed", "users", "silos", "labels_per_user",
        "batch_size", "local_batch_size", "local_steps", "key_bits", "n_max", "threshold",
        "sampling_slots",
    }
)  # fmt: skip


def _check_integers(named: dict[str, Any], settings: dict[str, Any]) -> None:
    """A keyword that takes a whole number given anything else (a float, a bool, a string)."""
    for name, value in {**named, **settings}.items():
        if name not in INTEGER_SETTINGS or value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidParameter(f"{name} must be an int, got {value!r}")


def _refuse_ignored(algo: str, given: dict[str, Any], settings: dict[str, Any]) -> None:
    """A keyword the run would not read is refused, as `uldp train` refuses the option
    (`run_setup.ignored_settings`: the algorithm's, the data's, secure aggregation's)."""
    from uldp.trainers.run_setup import ignored_settings

    ignored = ignored_settings(
        algo,
        dataset=settings["dataset"],
        data=settings["data"],
        user_column=settings["user_column"],
        secure=settings["secure"],
        checkpoint_dir=settings["checkpoint_dir"],
    )
    for name in given:
        if name in ignored:
            raise InvalidParameter(f"{name}: {ignored[name]}; drop it")


def _check_settings(settings: dict[str, Any], spec) -> None:
    """What `uldp train`'s checks refuse that the library does not refuse by itself, and the
    settings they resolve (subject level: Z; dp-fedavg-robust: the silos' rate is `silo_q`)."""
    s = settings
    if s["sigma"] is not None and s["epsilon"] is not None:
        raise InvalidParameter("give sigma or epsilon (a target to calibrate sigma to), not both")
    if s["algo"] == "localgroupdp" and s["epsilon"] is None:
        raise InvalidParameter(
            "localgroupdp's noise sigma_Z comes from its budget (Corollary 3.5): give epsilon"
        )
    if (s["allocation"] == "power") != (s["alpha"] is not None):
        raise InvalidParameter(
            "allocation 'power' needs alpha" if s["alpha"] is None else "alpha applies to allocation 'power'"
        )
    if spec.subject_level and s["group_k"] == ALGORITHM_SETTINGS["group_k"]:
        s["group_k"] = "max"  # LocalGroupDP: Z bounds every subject's items at a member, none dropped
    if spec.observed:  # dp-fedavg-robust samples silos: the trainer reads their rate as user_q
        if s["silo_q"] is not None:
            s["user_q"] = s["silo_q"]
        s["silo_q"] = None
    s["budgets_file"] = None  # a budgets CSV is the command's (--epsilon-csv); here: budget_column
    if s["engine"] == "flower" and s["device"] != "cpu":
        raise InvalidParameter("engine 'flower' trains every silo in its own worker on the CPU: device 'cpu'")
    if s["device"] not in ("cpu", "cuda"):
        raise InvalidParameter(f"device must be cpu or cuda, got {s['device']!r}")
    if s["device"] == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise InvalidParameter("device: cuda is not available on this machine; use 'cpu'")


def _run_files(result, data, cfg, settings: dict[str, Any]) -> RunFiles:
    """The run as `uldp report --run` reads it: its metrics file and record when it wrote them,
    else the same record built in memory with its rows."""
    from uldp.trainers.run_record import RunFiles, kind_of, read_run, run_record

    if settings["metrics_path"] is not None:
        return read_run(settings["metrics_path"])
    plan_params = None
    if kind_of(cfg.algo) == "plan":
        from uldp.trainers.algorithms import make_algorithm
        from uldp.trainers.runner import build_silos

        plan_params = make_algorithm(cfg, build_silos(data), data.task).plan_params(
            cfg, cfg.rounds, data.n_silos
        )
    noise_fixed = cfg.noise_seed is not None or _checkpoint_noise_fixed(settings)
    record = run_record(
        cfg,
        data,
        plan_params,
        noise_fixed,
        finished=True,
        rounds_done=len(result.history),
        assumptions=result.assumptions,
    )
    return RunFiles(record, list(result.history), "this run")


def _checkpoint_noise_fixed(settings: dict[str, Any]) -> bool:
    """Whether a resumed run's checkpoint ran with a fixed noise seed (its record says)."""
    if settings["checkpoint_dir"] is None:
        return False
    from pathlib import Path

    from uldp.trainers.run_record import read_checkpoint_run

    path = Path(settings["checkpoint_dir"])
    try:
        return bool(read_checkpoint_run(path).record["noise_fixed"])
    except UldpError:  # no checkpoint written (no round completed): nothing was resumed
        return False
