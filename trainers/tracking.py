"""A run's rounds in TensorBoard and MLflow (`uldp train --tensorboard DIR --mlflow URI`).

A `Tracker` hears a run four times: `start(settings)` before round 1 (the hyper-parameters:
algo, sigma, clip, rounds, user_q, delta, ...), `round(row)` after every completed round (the
runner's `on_round` row: test loss, the task metric, the user-level `epsilon` of the released
model and, under user sampling, the server's view `server_epsilon`, `elapsed_s`, and the tiers
of personalised or the figures of subject-level runs), `finish(summary, assumptions)` once the
run ends, and `close()`. Every numeric value of a row but "round" is a scalar, logged at step
= the row's round, so a chart's x axis is the round whatever the engine or a resume did.

A resumed run (`--resume`) hears only its new rounds. TensorBoard's writer is opened at the
first round it is told of with `purge_step` = that round: TensorBoard's loader (its Python
`EventAccumulator`, `tensorboard --load_fast=false`) then hides whatever earlier event files in
the folder logged for that round and later ones (a run that went past its checkpoint before it
stopped), so each round shows once, with the values of the run that continues. MLflow keeps
runs apart: a resumed run is a new MLflow run in the same experiment, tagged
`uldp.resumed_at_round`, whose metrics start at that step.

Both packages are optional (`pip install 'uldp[tracking]'`) and imported when a tracker is made,
so a missing one is one `InvalidParameter` line before any round runs. MLflow's usage telemetry
is switched off (`MLFLOW_DISABLE_TELEMETRY`, unless the caller set it): a privacy tool sends
nothing anywhere the user did not name.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from uldp.errors import InvalidParameter

if TYPE_CHECKING:
    from .algorithms.base import TrainConfig
    from .data import FederatedData

INSTALL = "pip install 'uldp[tracking]'"
DEFAULT_EXPERIMENT = "uldp"
# MLflow's own limits (mlflow/utils/validation.py): longer values are refused, so they are cut.
MLFLOW_PARAM_LENGTH = 6000
MLFLOW_TAG_LENGTH = 8000
MLFLOW_BATCH = 100  # params or tags per log_batch call
MLFLOW_METRICS_BATCH = 1000
# MLflow names: letters, digits, _ - . space : / (anything else, e.g. a metric "<lambda>", is refused).
_MLFLOW_NAME = re.compile(r"[^\w\-. :/]")
# MLflow's database stores, which mlflow-skinny leaves to SQLAlchemy and Alembic.
DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
# A run that stopped before `finish`: interrupted (MLflow's KILLED) or by an error (FAILED).
STOPPED, FAILED, FINISHED = "KILLED", "FAILED", "FINISHED"


class Tracker(Protocol):
    """Where a run's settings, rounds and assumptions are logged."""

    def start(self, settings: Mapping[str, object]) -> None: ...

    def round(self, row: Mapping[str, object]) -> None: ...

    def finish(self, summary: Mapping[str, object], assumptions: Mapping[str, object]) -> None: ...

    def close(self, status: str = STOPPED) -> None:
        """End what is still open; a run that never finished is marked `status`."""


def scalars(row: Mapping[str, object]) -> dict[str, float]:
    """The values of `row` a chart shows: every real number but "round" (booleans, None and text
    such as a dropout round's note are not)."""
    return {
        key: float(value)  # type: ignore[arg-type]
        for key, value in row.items()
        if key != "round" and isinstance(value, numbers.Real) and not isinstance(value, bool)
    }


def plain(value: object) -> bool | int | float | str:
    """`value` as a hyper-parameter both tools take: a bool, number or text (None as "none")."""
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return "none" if value is None else str(value)


def markdown(mapping: Mapping[str, object]) -> str:
    """One `- **key**: value` line per entry (TensorBoard's text tab and MLflow's description
    render Markdown)."""
    return "\n".join(f"- **{key}**: {value}" for key, value in mapping.items())


def run_settings(
    cfg: TrainConfig, data: FederatedData | None = None, model: str | None = None
) -> dict[str, bool | int | float | str]:
    """What `start` logs for a run of `cfg`: every setting of `TrainConfig` (ULDP-FL Table 1 and
    the other algorithms' knobs), and the data set's and model's names and sizes when given.

    `cfg.noise_seed` is logged as the caller gave it (None: fresh entropy, which never leaves
    the run; an integer the user fixed, which the run's assumptions print too)."""
    out = {key: plain(value) for key, value in dataclasses.asdict(cfg).items()}
    if data is not None:
        out.update(
            dataset=data.name,
            users=int(data.n_users),
            silos=int(data.n_silos),
            train_records=int(len(data.y_train)),
            test_records=int(len(data.y_test)),
            metric=data.metric,
        )
    if model is not None:
        out["model"] = model
    return out


class Trackers:
    """Several trackers heard as one (none: every call does nothing); a context manager whose
    exit closes them, marking an unfinished run FAILED after an error and KILLED after Ctrl-C."""

    def __init__(self, *trackers: Tracker) -> None:
        self.trackers = trackers

    def start(self, settings: Mapping[str, object]) -> None:
        for tracker in self.trackers:
            tracker.start(settings)

    def round(self, row: Mapping[str, object]) -> None:
        for tracker in self.trackers:
            tracker.round(row)

    def finish(self, summary: Mapping[str, object], assumptions: Mapping[str, object]) -> None:
        for tracker in self.trackers:
            tracker.finish(summary, assumptions)

    def close(self, status: str = STOPPED) -> None:
        for tracker in self.trackers:
            tracker.close(status)

    def __enter__(self) -> Trackers:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
            return
        # The run's own error matters more than a tracker's failure to record that it stopped.
        with suppress(Exception):
            self.close(STOPPED if issubclass(kind, KeyboardInterrupt) else FAILED)


def trackers(
    tensorboard: str | os.PathLike | None = None,
    mlflow: str | None = None,
    *,
    experiment: str | None = None,
    run_name: str | None = None,
) -> Trackers:
    """The trackers a run asked for: TensorBoard event files in folder `tensorboard`, an MLflow
    run at tracking URI `mlflow` (in `experiment`, default "uldp"; named `run_name`); with
    neither, a `Trackers` that does nothing."""
    chosen: list[Tracker] = []
    if tensorboard is not None:
        chosen.append(TensorBoardTracker(tensorboard))
    if mlflow is not None:
        chosen.append(MLflowTracker(mlflow, experiment=experiment, run_name=run_name))
    return Trackers(*chosen)


def _missing(option: str, packages: str) -> InvalidParameter:
    noun = "packages" if " and " in packages else "package"
    return InvalidParameter(f"{option} needs the {packages} {noun}: {INSTALL}")


class TensorBoardTracker:
    """Event files in `log_dir` (torch's `SummaryWriter`): one scalar chart per row value,
    the settings in the HParams tab and as text, the summary and assumptions as text."""

    def __init__(self, log_dir: str | os.PathLike, *, option: str = "--tensorboard") -> None:
        try:
            import tensorboard  # noqa: F401  (torch's module below hides its absence behind its own error)
            from torch.utils.tensorboard import SummaryWriter
            from torch.utils.tensorboard.summary import hparams
        except ImportError:
            raise _missing(option, "tensorboard") from None
        self.log_dir = Path(log_dir)
        if self.log_dir.exists() and not self.log_dir.is_dir():
            raise InvalidParameter(
                f"{option} {log_dir}: not a folder (TensorBoard writes a folder of event files)"
            )
        self._summary_writer, self._hparams = SummaryWriter, hparams
        self._writer: Any = None
        self._settings: dict[str, bool | int | float | str] = {}
        self._last_round = 0

    def start(self, settings: Mapping[str, object]) -> None:
        # Written with the first round: only then is the step known to purge from on a resume.
        self._settings = {key: plain(value) for key, value in settings.items()}

    def round(self, row: Mapping[str, object]) -> None:
        step = int(row["round"])  # type: ignore[call-overload]
        values = scalars(row)
        writer = self._open(step, list(values))
        for key, value in values.items():
            writer.add_scalar(key, value, step)
        writer.flush()  # the chart follows the run, not SummaryWriter's two-minute flush
        self._last_round = step

    def finish(self, summary: Mapping[str, object], assumptions: Mapping[str, object]) -> None:
        writer = self._open(None, [])
        writer.add_text("summary", markdown(summary), self._last_round)
        writer.add_text("assumptions", markdown(assumptions), self._last_round)
        writer.flush()

    def close(self, status: str = STOPPED) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _open(self, first_round: int | None, metrics: list[str]) -> Any:
        """The writer, opened on first use: purging from `first_round` on (a resumed run replaces
        what an earlier writer logged for its rounds), with the settings at step 0."""
        if self._writer is None:
            self._writer = self._summary_writer(str(self.log_dir), purge_step=first_round)
            if self._settings:
                # Into this run's own event file (SummaryWriter.add_hparams would start another
                # run in a subfolder), so the HParams tab pairs the settings with its charts.
                file_writer = self._writer._get_file_writer()
                for part in self._hparams(self._settings, dict.fromkeys(metrics, 0.0)):
                    file_writer.add_summary(part)
                self._writer.add_text("settings", markdown(self._settings), 0)
        return self._writer


class MLflowTracker:
    """One MLflow run at tracking URI `uri` (MLflow's client API: no global active run): the
    settings as params, every row value as a metric at step = round, the assumptions as tags
    `assumption.<key>` and as the run's description, the summary as tags `summary.<key>`."""

    def __init__(
        self,
        uri: str,
        experiment: str | None = None,
        run_name: str | None = None,
        *,
        option: str = "--mlflow",
    ) -> None:
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # before mlflow is first imported
        try:
            import mlflow  # noqa: F401  (first: its absence, not a submodule's, is what fails)
            from mlflow.entities import Metric, Param, RunTag
            from mlflow.exceptions import MlflowException
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise _missing(option, "mlflow-skinny") from None
        self.uri, self.option = str(uri), option
        if self.uri.partition(":")[0].partition("+")[0] in DATABASE_SCHEMES:
            try:
                import alembic  # noqa: F401
                import sqlalchemy  # noqa: F401
            except ImportError:
                # Without them MLflow calls a database URI "unsupported", which misleads.
                raise _missing(f"{option} {self.uri}", "sqlalchemy and alembic") from None
        self.experiment = experiment or DEFAULT_EXPERIMENT
        self.run_name = run_name
        self._entities = Metric, Param, RunTag
        self._error = MlflowException
        try:
            with self._reported():
                self._client = MlflowClient(tracking_uri=self.uri)
        except InvalidParameter as error:
            if "MLFLOW_ALLOW_FILE_STORE" not in str(error):
                raise
            # MLflow 3 refuses its folder store (`mlruns`, `file:`) unless told otherwise.
            raise InvalidParameter(
                f"{option} {self.uri}: MLflow no longer writes to a folder store by default; give a "
                "database URI such as sqlite:///mlflow.db (or set MLFLOW_ALLOW_FILE_STORE=true)"
            ) from error
        self.run_id: str | None = None
        self._ended = False
        self._first_round: int | None = None

    def start(self, settings: Mapping[str, object]) -> None:
        """Create the run (and the experiment if new) and log `settings` as its params."""
        _, Param, _ = self._entities
        from uldp import __version__

        with self._reported():
            found = self._client.get_experiment_by_name(self.experiment)
            experiment_id = found.experiment_id if found else self._client.create_experiment(self.experiment)
            run = self._client.create_run(
                experiment_id, run_name=self.run_name, tags={"uldp.version": __version__}
            )
            self.run_id = run.info.run_id
            params = [Param(_name(k), str(plain(v))[:MLFLOW_PARAM_LENGTH]) for k, v in settings.items()]
            for chunk in _chunks(params, MLFLOW_BATCH):
                self._client.log_batch(self.run_id, params=chunk)

    def round(self, row: Mapping[str, object]) -> None:
        Metric, _, _ = self._entities
        run_id = self._run()
        step = int(row["round"])  # type: ignore[call-overload]
        stamp = int(time.time() * 1000)
        metrics = [Metric(_name(key), value, stamp, step) for key, value in scalars(row).items()]
        with self._reported():
            if self._first_round is None and step > 1:
                self._client.set_tag(run_id, "uldp.resumed_at_round", str(step))
            self._first_round = self._first_round or step
            for chunk in _chunks(metrics, MLFLOW_METRICS_BATCH):
                self._client.log_batch(run_id, metrics=chunk)

    def finish(self, summary: Mapping[str, object], assumptions: Mapping[str, object]) -> None:
        """Tag the run with what it assumed and its summary, and end it FINISHED."""
        _, _, RunTag = self._entities
        run_id = self._run()
        tags = [RunTag(_name(f"assumption.{k}"), _cut(v)) for k, v in assumptions.items()]
        tags += [RunTag(_name(f"summary.{k}"), _cut(plain(v))) for k, v in summary.items()]
        # MLflow shows this tag as the run's description, above its metrics.
        tags.append(RunTag("mlflow.note.content", _cut(markdown(assumptions))))
        with self._reported():
            for chunk in _chunks(tags, MLFLOW_BATCH):
                self._client.log_batch(run_id, tags=chunk)
            self._client.set_terminated(run_id, status=FINISHED)
        self._ended = True

    def close(self, status: str = STOPPED) -> None:
        if self.run_id is not None and not self._ended:
            self._ended = True
            with self._reported():
                self._client.set_terminated(self.run_id, status=status)

    def _run(self) -> str:
        """The run's id; a tracker told of a round before `start` starts a run without params."""
        if self.run_id is None:
            self.start({})
        assert self.run_id is not None
        return self.run_id

    def _reported(self) -> AbstractContextManager[None]:
        return _reported(self._error, f"{self.option} {self.uri}")


@contextmanager
def _reported(error_type: type[BaseException], where: str) -> Iterator[None]:
    """An MLflow error (an unknown URI scheme, a store that refuses, a server that does not
    answer) as one InvalidParameter line naming the option and the URI."""
    try:
        yield
    except error_type as error:
        message = " ".join(str(getattr(error, "message", error)).split())
        raise InvalidParameter(f"{where}: {message}") from error


def _name(key: str) -> str:
    return _MLFLOW_NAME.sub("_", key)


def _cut(value: object) -> str:
    text = str(value)
    return text if len(text) <= MLFLOW_TAG_LENGTH else text[: MLFLOW_TAG_LENGTH - 1] + "…"


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for begin in range(0, len(items), size):
        yield items[begin : begin + size]
