"""TensorBoard and MLflow per round (trainers/tracking.py): what a run logs is read back with each
tool's own reader (TensorBoard's EventAccumulator, MLflow's MlflowClient on a SQLite store in a
temporary folder: no network)."""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest

from uldp.errors import InvalidParameter
from uldp.trainers.algorithms import TrainConfig
from uldp.trainers.runner import train
from uldp.trainers.tracking import (
    FAILED,
    FINISHED,
    MLflowTracker,
    TensorBoardTracker,
    run_settings,
    scalars,
    trackers,
)

from .synthetic import make_data

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
plugin_data = pytest.importorskip("tensorboard.plugins.hparams.plugin_data_pb2")

SETTINGS = {
    "algo": "uldp-avg",
    "sigma": 5.0,
    "rounds": 3,
    "user_q": 0.5,
    "group_k": "median",
    "noise_seed": None,
}


def row(t: int, loss: float) -> dict:
    """A round's row as the runner builds it, with what a chart must leave out."""
    return {
        "round": t,
        "loss": loss,
        "accuracy": 0.5 + 0.1 * t,
        "epsilon": 1.0 * t,
        "server_epsilon": 3.0 * t,
        "tier1_epsilon_model": math.inf,
        "delta": 1e-5,
        "sampled_users": 4,
        "note": "no participant sampled",
        "server_multiplier": None,
        "secure": True,
        "elapsed_s": 0.25 * t,
    }


def read_events(folder: Path):
    accumulator = event_accumulator.EventAccumulator(str(folder))
    accumulator.Reload()
    return accumulator


def series(accumulator, tag: str) -> list[tuple[int, float]]:
    return [(event.step, event.value) for event in accumulator.Scalars(tag)]


def text(accumulator, tag: str) -> str:
    (event,) = accumulator.Tensors(f"{tag}/text_summary")
    return event.tensor_proto.string_val[0].decode()


def test_scalars_are_the_numbers_of_a_row_but_its_round():
    assert scalars(row(2, 0.5)) == {
        "loss": 0.5,
        "accuracy": 0.7,
        "epsilon": 2.0,
        "server_epsilon": 6.0,
        "tier1_epsilon_model": math.inf,
        "delta": 1e-5,
        "sampled_users": 4.0,
        "elapsed_s": 0.5,
    }


def test_tensorboard_holds_each_round_the_settings_and_the_assumptions(tmp_path):
    with trackers(tensorboard=tmp_path / "tb") as tracker:
        tracker.start(SETTINGS)
        for t in (1, 2, 3):
            tracker.round(row(t, loss=1.0 / t))
        tracker.finish({"epsilon": 3.0}, {"randomness": "128 fresh bits", "check": "`uldp account ...`"})
    events = read_events(tmp_path / "tb")
    assert set(events.Tags()["scalars"]) == set(scalars(row(1, 1.0)))
    assert series(events, "epsilon") == [(1, 1.0), (2, 2.0), (3, 3.0)]
    assert series(events, "server_epsilon") == [(1, 3.0), (2, 6.0), (3, 9.0)]
    assert [step for step, _ in series(events, "elapsed_s")] == [1, 2, 3]
    assert series(events, "tier1_epsilon_model")[0][1] == math.inf
    hparams = events.PluginTagToContent("hparams")
    start = plugin_data.HParamsPluginData.FromString(hparams["_hparams_/session_start_info"])
    logged = start.session_start_info.hparams
    assert logged["algo"].string_value == "uldp-avg" and logged["sigma"].number_value == 5.0
    assert logged["noise_seed"].string_value == "none"
    experiment = plugin_data.HParamsPluginData.FromString(hparams["_hparams_/experiment"]).experiment
    assert {info.name.tag for info in experiment.metric_infos} == set(scalars(row(1, 1.0)))
    assert "- **randomness**: 128 fresh bits" in text(events, "assumptions")
    assert "- **epsilon**: 3.0" in text(events, "summary")
    assert "- **user_q**: 0.5" in text(events, "settings")


def as_if_written_earlier(folder: Path) -> None:
    """Date the event files in `folder` a minute back, as a run stopped before this one would
    have: TensorBoard reads a folder's files in name order, which begins with the writer's
    second (within one second two writers of one process are ordered by a counter, as text)."""
    for path in folder.glob("events.out.tfevents.*"):
        stamp = path.name.split(".")[3]
        path.rename(path.with_name(path.name.replace(f".{stamp}.", f".{int(stamp) - 60:010d}.", 1)))


def test_a_resumed_run_replaces_the_rounds_logged_after_its_checkpoint(tmp_path):
    first = TensorBoardTracker(tmp_path)
    first.start(SETTINGS)
    for t in (1, 2, 3):  # round 3 was logged, but the run stopped before its checkpoint was kept
        first.round(row(t, loss=10.0 + t))
    first.close()
    as_if_written_earlier(tmp_path)
    resumed = TensorBoardTracker(tmp_path)  # --resume from the checkpoint of round 2
    resumed.start(SETTINGS)
    for t in (3, 4):
        resumed.round(row(t, loss=20.0 + t))
    resumed.finish({}, {"resumed from": "ck/checkpoint.pt"})
    resumed.close()
    assert series(read_events(tmp_path), "loss") == [(1, 11.0), (2, 12.0), (3, 23.0), (4, 24.0)]


def test_no_tracker_writes_nothing_and_a_file_is_not_a_tensorboard_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with trackers() as tracker:
        tracker.start(SETTINGS)
        tracker.round(row(1, 1.0))
        tracker.finish({}, {})
    assert tracker.trackers == () and list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidParameter, match=r"^--tensorboard .*file: not a folder"):
        TensorBoardTracker(tmp_path / "file")


@pytest.mark.parametrize(
    "module, make, line",
    [
        (
            "tensorboard",
            lambda path: trackers(tensorboard=path),
            "--tensorboard needs the tensorboard package",
        ),
        (
            "mlflow",
            lambda path: trackers(mlflow="sqlite:///x.db"),
            "--mlflow needs the mlflow-skinny package",
        ),
    ],
)
def test_a_missing_package_names_the_option_and_the_extra(tmp_path, monkeypatch, module, make, line):
    from uldp.cli.errors import install_hint, with_install_hints

    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails as if not installed
    with pytest.raises(InvalidParameter) as raised:
        make(tmp_path)
    assert str(raised.value) == f"{line}: pip install 'uldp[tracking]'"
    # What `uldp train` prints: the install from a checkout too.
    assert with_install_hints(str(raised.value), raised.value) == f"{line}: {install_hint('tracking')}"


@pytest.fixture
def mlflow_uri(tmp_path, monkeypatch) -> str:
    """A folder store in `tmp_path`: MLflow's SQLite store (what docs/train.md suggests, and the
    same client calls) spends 3 to 10 s on its schema migrations when it is created."""
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return (tmp_path / "mlruns").as_uri()


def mlflow_run(uri: str, experiment: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, experiment
    return client, client.search_runs([found.experiment_id], order_by=["start_time"])


def history(client, run, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))


def test_mlflow_holds_params_metrics_per_round_and_the_assumptions(mlflow_uri):
    with trackers(mlflow=mlflow_uri, experiment="hand rows", run_name="first") as tracker:
        tracker.start(SETTINGS)
        for t in (1, 2):
            tracker.round({**row(t, loss=1.0 / t), "<lambda>": 0.5})
        tracker.finish({"epsilon": 2.0, "model": "cnn"}, {"randomness": "fresh", "check": "x" * 9000})
    with trackers(mlflow=mlflow_uri, experiment="hand rows") as resumed:
        resumed.start(SETTINGS)
        resumed.round(row(3, loss=0.3))
    client, (first, second) = mlflow_run(mlflow_uri, "hand rows")
    assert first.info.status == FINISHED and first.info.run_name == "first"
    assert first.data.params["algo"] == "uldp-avg" and first.data.params["noise_seed"] == "none"
    assert history(client, first, "epsilon") == [(1, 1.0), (2, 2.0)]
    assert history(client, first, "server_epsilon") == [(1, 3.0), (2, 6.0)]
    assert history(client, first, "_lambda_") == [(1, 0.5), (2, 0.5)]  # MLflow refuses "<" in names
    assert set(first.data.metrics) == {*scalars(row(1, 1.0)), "_lambda_"}
    tags = first.data.tags
    assert tags["assumption.randomness"] == "fresh" and tags["summary.model"] == "cnn"
    assert len(tags["assumption.check"]) == 8000  # MLflow's longest tag, cut
    assert tags["mlflow.note.content"].startswith("- **randomness**: fresh\n")
    assert "uldp.resumed_at_round" not in tags
    # Left without `finish` (as by Ctrl-C): KILLED; a resumed run is tagged with its first round.
    assert second.info.status == "KILLED" and second.data.tags["uldp.resumed_at_round"] == "3"
    assert history(client, second, "loss") == [(3, 0.3)]


def test_an_mlflow_run_stopped_by_an_error_is_failed_and_a_bad_uri_one_line(mlflow_uri, monkeypatch):
    with pytest.raises(RuntimeError), trackers(mlflow=mlflow_uri, experiment="failing") as tracker:
        tracker.start(SETTINGS)
        raise RuntimeError("the run broke")
    _, (run,) = mlflow_run(mlflow_uri, "failing")
    assert run.info.status == FAILED
    with pytest.raises(InvalidParameter, match=r"^--mlflow nosuch://x: .*unsupported URI"):
        MLflowTracker("nosuch://x")
    with monkeypatch.context() as without:
        without.setitem(sys.modules, "sqlalchemy", None)  # mlflow-skinny alone: no database store
        with pytest.raises(InvalidParameter) as raised:
            MLflowTracker("sqlite:///mlflow.db")
    assert str(raised.value) == (
        "--mlflow sqlite:///mlflow.db needs the sqlalchemy and alembic packages: pip install 'uldp[tracking]'"
    )
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    with pytest.raises(InvalidParameter, match=r"^--mlflow file:///tmp/m: .*sqlite:///mlflow.db"):
        MLflowTracker("file:///tmp/m")


def test_a_training_run_logs_every_round_with_both_epsilons(mlflow_uri, tmp_path):
    data = make_data("binary", n=120, users=8, silos=2, features=4)
    cfg = TrainConfig(algo="uldp-avg", rounds=2, sigma=1.0, clip=0.5, user_q=0.5, noise_seed=0)
    with trackers(tensorboard=tmp_path / "tb", mlflow=mlflow_uri, experiment="training") as tracker:
        tracker.start(run_settings(cfg, data, "logistic"))
        result = train(data, cfg, model_name="logistic", on_round=tracker.round)
        tracker.finish(result.summary, result.assumptions)
    expected = {key: [(r["round"], r[key]) for r in result.history] for key in ("epsilon", "server_epsilon")}
    assert expected["server_epsilon"][-1][1] > expected["epsilon"][-1][1]  # the server knows the sample
    events = read_events(tmp_path / "tb")
    client, (run,) = mlflow_run(mlflow_uri, "training")
    for key, points in expected.items():
        assert history(client, run, key) == points
        logged = series(events, key)  # float32 in event files
        assert [step for step, _ in logged] == [step for step, _ in points]
        assert [value for _, value in logged] == pytest.approx([value for _, value in points], rel=1e-6)
    roc_auc = [value for _, value in series(events, "roc_auc")]
    assert roc_auc == pytest.approx([r["roc_auc"] for r in result.history], rel=1e-6)
    assert run.data.params["users"] == "8" and run.data.params["model"] == "logistic"
    assert run.data.tags["assumption.randomness"] == result.assumptions["randomness"]
    assert re.search(r"- \*\*check\*\*: .*uldp account --algo uldp-avg", text(events, "assumptions"))
