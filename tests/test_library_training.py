"""`uldp.train` (uldp/training.py): the command `uldp train` as a call on your own model and data.

The call and the command prepare a run through one code path (uldp.trainers.run_setup) and train
it with one round loop, so with the same seeds they give the same rounds; the call returns the
trained model, whose parameters are the run's last; a checkpoint resumes through the call as
through the command; and what the command refuses with one `Error:` line and exit status 2, the
call refuses with `uldp.InvalidParameter`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import uldp
from tests.cli.fuzz import assert_contract, run
from uldp.trainers.data.own_data import federated_data

#: A user's own module: a factory, a loader, and the mistakes the tests make on purpose.
OWN = """
import numpy as np
from torch import nn

from uldp.trainers.data.own_data import federated_data


def make(feature_shape, n_classes):
    return nn.Sequential(nn.Linear(feature_shape[0], 8), nn.ReLU(), nn.Linear(8, n_classes))


def load(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(160, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0).astype(int)
    users = [f"u{i}" for i in rng.integers(0, 16, size=160)]
    silos = rng.integers(0, 2, size=160)
    return federated_data(x, y, users, silos, name="tiny", source="SYNTHETIC, drawn by a test", seed=seed)


def not_a_model(feature_shape):
    return "a string"


def no_users(seed=0):
    x = np.zeros((10, 3), dtype=np.float32)
    return x, np.zeros(10, dtype=int)
"""

SETTINGS = {"rounds": 2, "sigma": 2.0, "lr": 0.3, "global_lr": 5.0, "user_q": 0.5, "seed": 3, "noise_seed": 7}
FLAGS = [f"--{k.replace('_', '-')}" if i % 2 == 0 else str(v) for k, v in SETTINGS.items() for i in (0, 1)]


@pytest.fixture
def own(tmp_path: Path) -> Path:
    path = tmp_path / "own.py"
    path.write_text(OWN)
    return path


def _same_rows(mine: list[dict], theirs: list[dict]) -> None:
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        assert set(a) == set(b)
        for key in a:
            if key == "elapsed_s":
                continue
            if isinstance(a[key], float):
                assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), key
            else:
                assert a[key] == b[key], key


def test_the_call_equals_the_command_on_your_own_model_and_data(own: Path, tmp_path: Path) -> None:
    from uldp.trainers.references import load_reference

    make, load = load_reference(f"{own}:make", "t"), load_reference(f"{own}:load", "t")
    call = uldp.train(make, load(seed=3), algo="uldp-avg", **SETTINGS)
    metrics = tmp_path / "m.jsonl"
    args = ["train", "--algo", "uldp-avg", "--model", f"{own}:make", "--data", f"{own}:load", *FLAGS]
    result = run(*args, "--metrics", str(metrics), "--format", "json")
    assert result.exit_code == 0, result.stderr
    command = json.loads(result.stdout)
    _same_rows(call.history, command["history"])
    assert call.summary["dataset"] == command["summary"]["dataset"] == "tiny"
    assert call.server_epsilon is not None and call.server_epsilon > call.epsilon  # user sampling
    assert call.epsilon == command["history"][-1]["epsilon"]
    # The guarantees the call states are `uldp report --run`'s for the command's metrics file.
    report = run("report", "--run", str(metrics), "--format", "json")
    assert report.exit_code == 0, report.stderr
    stated = json.loads(report.stdout)
    assert call.guarantees.as_dict()["claims"] == stated["claims"]
    assert any("equal" in check for check in call.guarantees.checks)


def test_run_model_holds_the_final_parameters(own: Path) -> None:
    from uldp.trainers.references import load_reference

    data = load_reference(f"{own}:load", "t")(seed=0)
    run_ = uldp.train(load_reference(f"{own}:make", "t"), data, rounds=2, sigma=1.0, lr=0.3, noise_seed=1)
    assert isinstance(run_.model, torch.nn.Module)
    with torch.no_grad():
        outputs = run_.model(torch.as_tensor(data.x_test))
        loss = torch.nn.functional.cross_entropy(outputs, torch.as_tensor(data.y_test, dtype=torch.long))
        accuracy = float((outputs.argmax(1).numpy() == data.y_test).mean())
    assert float(loss) == pytest.approx(run_.history[-1]["loss"], rel=1e-5)
    assert accuracy == pytest.approx(run_.history[-1][run_.metric])


def test_checkpoint_and_resume_through_the_call(own: Path, tmp_path: Path) -> None:
    from uldp.trainers.references import load_reference

    make, data = load_reference(f"{own}:make", "t"), load_reference(f"{own}:load", "t")(seed=0)
    settings = {"sigma": 1.0, "lr": 0.3, "noise_seed": 5, "user_q": 0.5}
    whole = uldp.train(make, data, rounds=2, **settings)
    checkpoint = tmp_path / "ck"
    first = uldp.train(make, data, rounds=1, checkpoint=checkpoint, **settings)
    assert len(first.history) == 1
    with pytest.raises(uldp.InvalidParameter, match="already holds a checkpoint"):
        uldp.train(make, data, rounds=2, checkpoint=checkpoint, **settings)
    resumed = uldp.train(make, data, rounds=2, checkpoint=checkpoint, resume=True, **settings)
    _same_rows(resumed.history, whole.history)
    for mine, theirs in zip(resumed.model.parameters(), whole.model.parameters()):
        assert torch.allclose(mine, theirs, atol=1e-6)


def test_epsilon_calibrates_sigma_as_uldp_calibrate_does(own: Path) -> None:
    from uldp.trainers.references import load_reference

    data = load_reference(f"{own}:load", "t")(seed=0)
    run_ = uldp.train(None, data, algo="uldp-avg", rounds=3, epsilon=4.0, noise_seed=1)
    assert run_.epsilon <= 4.0 and run_.epsilon == pytest.approx(4.0, rel=1e-2)
    planned = uldp.calibrate(epsilon=4.0, algo="uldp-avg", rounds=3, silos=data.n_silos)
    assert run_.summary["sigma"] == pytest.approx(planned.sigma, rel=1e-3)


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"learning_rate": 0.1}, "'learning_rate'"),
        ({"local_steps": 3}, "local_steps: uldp-avg does not use it"),
        ({"sigma": 1.0, "epsilon": 2.0}, "sigma or epsilon"),
        ({"resume": True}, "resume needs checkpoint"),
    ],
)
def test_bad_keywords_are_refused_by_name(keywords: dict, named: str) -> None:
    data = federated_data([[0.0], [1.0]] * 5, [0, 1] * 5, list(range(10)), n_silos=1)
    with pytest.raises(uldp.InvalidParameter) as refused:
        uldp.train(None, data, rounds=1, **keywords)
    assert named in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("keywords", "said"),
    [
        ({"model": "no_such_file.py:make"}, "model: no such file 'no_such_file.py'"),
        ({"data": "no_such_file.py:load"}, "data: no such file 'no_such_file.py'"),
        ({"loss": "hinge"}, "loss must be one of cross_entropy"),
        ({"metric": "recall"}, "metric must be one of"),
    ],
)
def test_the_calls_refusals_name_its_keywords_not_the_commands_options(keywords: dict, said: str) -> None:
    """The preparation `uldp train` shares says `--model: ...`; the call says `model: ...`."""
    data = federated_data([[0.0], [1.0]] * 5, [0, 1] * 5, list(range(10)), n_silos=1)
    given = {"model": None, "data": data, **keywords}
    with pytest.raises(uldp.InvalidParameter) as refused:
        uldp.train(given.pop("model"), given.pop("data"), rounds=1, **given)
    assert str(refused.value).startswith(said) and "--" not in str(refused.value).split()[0]


def test_a_data_name_that_is_not_built_in_is_refused() -> None:
    with pytest.raises(uldp.InvalidParameter, match="built-in data set"):
        uldp.train(None, "cifar", rounds=1)


@pytest.mark.parametrize(
    ("option", "name", "said"),
    [
        ("--model", "no_such_factory", "no attribute 'no_such_factory'"),
        ("--model", "not_a_model", "not a torch.nn.Module"),
        ("--data", "no_users", "--data"),
    ],
)
def test_a_broken_reference_is_one_error_line_and_nothing_written(
    own: Path, tmp_path: Path, option: str, name: str, said: str
) -> None:
    metrics, checkpoint = tmp_path / "m.jsonl", tmp_path / "ck"
    given = {"--model": f"{own}:make", "--data": f"{own}:load", option: f"{own}:{name}"}
    args = ["train", "--algo", "uldp-avg", *[w for pair in given.items() for w in pair], "--rounds", "1"]
    result = run(*args, "--metrics", str(metrics), "--checkpoint", str(checkpoint))
    assert_contract(result, args)
    assert result.exit_code == 2 and said in result.stderr, result.stderr
    assert not metrics.exists() and not list(tmp_path.glob("m.jsonl*"))
    assert not checkpoint.exists()  # the model is checked before the checkpoint's folder is made


def test_a_missing_file_is_one_error_line(tmp_path: Path) -> None:
    result = run(
        "train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--model", f"{tmp_path}/x.py:make"
    )
    assert_contract(result, [])
    assert result.exit_code == 2 and "no such file" in result.stderr


def test_uldp_train_is_an_entry_point() -> None:
    from uldp.training import TrainRun, train

    assert uldp.train is train and uldp.TrainRun is TrainRun
    assert {"train", "TrainRun"} <= set(dir(uldp))
    assert math.isinf(TrainRun(None, [], {"delta": 1e-5}, {}, None).epsilon)  # type: ignore[arg-type]


def test_the_examples_model_fits_the_examples_data_and_keeps_users_apart() -> None:
    from uldp.trainers.own_model import build_checked, resolve_model
    from uldp.trainers.references import load_reference

    root = Path(__file__).resolve().parents[1] / "examples"
    data = load_reference(f"{root}/own_data.py:load", "--data")(seed=0)
    assert data.n_users == 120 and data.n_silos == 3 and data.synthetic
    spec = resolve_model(f"{root}/own_model.py:make_model", data=data)
    model = build_checked(spec, data)  # refused if it mixed records (BatchNorm) or misfit the loss
    assert any(isinstance(m, torch.nn.GroupNorm) for m in model.modules())
    assert model(torch.as_tensor(data.x_test[:2])).shape == (2, data.n_classes)


def test_tensorboard_hears_every_round_of_the_call(own: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from uldp.trainers.references import load_reference

    data = load_reference(f"{own}:load", "t")(seed=0)
    heard: list[dict] = []
    run_ = uldp.train(None, data, rounds=2, noise_seed=1, tensorboard=tmp_path / "tb", on_round=heard.append)
    assert [row["round"] for row in heard] == [1, 2]
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    logged = [(e.step, e.value) for e in events.Scalars("epsilon")]
    assert logged == [(row["round"], pytest.approx(row["epsilon"])) for row in run_.history]


def test_the_calls_defaults_are_the_commands() -> None:
    import inspect

    from uldp.cli.commands.train import command
    from uldp.trainers.run_setup import SETTING_DEFAULTS
    from uldp.training import ALGORITHM_SETTINGS

    named = {
        name: p.default
        for name, p in inspect.signature(uldp.train).parameters.items()
        if p.kind is p.KEYWORD_ONLY and name not in ("loss", "metric", "on_round")
    }
    renamed = {"checkpoint": "checkpoint_dir", "metrics": "metrics_path"}
    params = {p.name: p for p in command.params}
    compared = 0
    # The call's own defaults, its settings' and the table `uldp audit` fixes its settings from.
    for name, default in [*named.items(), *ALGORITHM_SETTINGS.items(), *SETTING_DEFAULTS.items()]:
        param = params[renamed.get(name, name)]
        theirs = param.default
        if type(theirs).__name__ == "Sentinel" or theirs is None and param.is_flag:
            continue  # a flag pair's UNSET: its value is the off side
        if isinstance(theirs, (list, tuple)) and not theirs:
            theirs = None
        assert default == theirs, name
        compared += 1
    assert compared > 60


@pytest.mark.parametrize(("algo", "user_q"), [("uldp-group", 1.0), ("uldp-sgd", 0.5)])
def test_epsilon_calibrates_each_plan_to_at_most_the_target(algo: str, user_q: float) -> None:
    from uldp.trainers.algorithms import make_algorithm
    from uldp.trainers.run_setup import chosen_settings, prepare
    from uldp.trainers.runner import build_silos
    from uldp.training import ALGORITHM_SETTINGS

    settings = {
        **ALGORITHM_SETTINGS,
        **{"algo": algo, "dataset": "heart-disease", "data": None, "model": None, "rounds": 3},
        **{"sigma": None, "clip": 1.0, "user_q": user_q, "lr": None, "local_epochs": None, "delta": 1e-5},
        **{"epsilon": 4.0, "seed": 0, "noise_seed": None, "budgets_file": None, "secure": False},
    }
    chosen, _ = chosen_settings(settings, False)
    data, cfg = prepare(settings, chosen, False)
    plan = make_algorithm(cfg, build_silos(data), data.task).plan_params(cfg, cfg.rounds, data.n_silos)
    assert plan["sigma"] == cfg.sigma and plan["user_q"] == user_q
    spent = uldp.account(algo=algo, delta=1e-5, **plan).epsilon
    assert spent <= 4.0 and spent == pytest.approx(4.0, rel=2e-2)
    # A little less noise would exceed the target: the sigma found is the smallest.
    assert uldp.account(algo=algo, delta=1e-5, **{**plan, "sigma": cfg.sigma * 0.97}).epsilon > 4.0


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"user_budgets": "three-levels", "epsilon": 4.0}, "give epsilon (one target for every user) or"),
        ({"distribution": "three-levels"}, "distribution gives per-record budgets"),
        ({"users": 5}, "users: your own data"),
        ({"silos": 7}, "silos: your own data"),
        ({"task": "regression"}, "task: it describes your own table"),
        ({"threshold": 3, "algo": "dp-fedavg-robust"}, "threshold sets secure aggregation's k"),
        ({"test_keys": True}, "test_keys only applies with secure"),
        ({"key_bits": 2048}, "key_bits: it sizes Protocol 1's keys"),
        ({"user_q": 0.3, "algo": "userldp", "sigma": 2.0}, "user_q: userldp trains every member"),
        ({"rounds": 2.5}, "rounds must be an int, got 2.5"),
        ({"rounds": True}, "rounds must be an int, got True"),
        ({"batch_size": 3.0, "algo": "uldp-naive"}, "batch_size must be an int"),
    ],
)
def test_what_the_command_refuses_the_call_refuses(keywords: dict, named: str) -> None:
    data = federated_data([[0.0], [1.0]] * 5, [0, 1] * 5, list(range(10)), n_silos=1)
    if "distribution" in keywords or "task" in keywords:
        data = "heart-disease"
    with pytest.raises(uldp.InvalidParameter) as refused:
        uldp.train(None, data, **{"rounds": 1, **keywords})
    assert named in str(refused.value) and "\n" not in str(refused.value)


def test_resume_without_a_checkpoint_in_the_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(uldp.InvalidParameter, match="holds no checkpoint"):
        uldp.train(None, "heart-disease", rounds=1, checkpoint=tmp_path, resume=True)


def test_the_epsilon_is_the_runs_level() -> None:
    from uldp.training import TrainRun

    subject = {"epsilon": 2.0, "item_epsilon": 2.0, "subject_epsilon_federation": 9.0}
    run_ = TrainRun(None, [subject], {"delta": 1e-5}, {}, None)  # type: ignore[arg-type]
    assert run_.epsilon == 9.0 and run_.item_epsilon == 2.0
    user = TrainRun(None, [{"epsilon": 3.0}], {"delta": 1e-5}, {}, None)  # type: ignore[arg-type]
    assert user.epsilon == 3.0 and user.item_epsilon is None


def test_resuming_a_target_with_other_rounds_is_refused(own: Path, tmp_path: Path) -> None:
    from uldp.trainers.references import load_reference

    data = load_reference(f"{own}:load", "t")(seed=0)
    first = uldp.train(None, data, rounds=1, epsilon=4.0, noise_seed=1, checkpoint=tmp_path)
    with pytest.raises(uldp.InvalidParameter) as refused:
        uldp.train(None, data, rounds=2, epsilon=4.0, noise_seed=1, checkpoint=tmp_path, resume=True)
    assert f"resume with sigma {first.summary['sigma']:.6g} instead of epsilon" in str(refused.value)
    resumed = uldp.train(
        None, data, rounds=2, sigma=first.summary["sigma"], noise_seed=1, checkpoint=tmp_path, resume=True
    )
    assert len(resumed.history) == 2
