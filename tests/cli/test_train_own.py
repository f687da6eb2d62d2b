"""`uldp train --model/--data/--loss/--metric` and `--epsilon` for the uldp-* algorithms: what only
the command does (parse-time forms, refusals of options your own data makes meaningless, the
calibration note, `uldp audit` on the same references). The call's side is
tests/test_library_training.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.fuzz import assert_contract, run
from tests.test_library_training import OWN

METRIC = """

def balanced(outputs, y):
    import numpy as np

    predicted = outputs.argmax(axis=1)
    return float(np.mean([np.mean(predicted[y == c] == c) for c in np.unique(y)]))
"""


@pytest.fixture
def own(tmp_path: Path) -> Path:
    path = tmp_path / "own.py"
    path.write_text(OWN + METRIC)
    return path


def _refused(*args: str) -> str:
    result = run(*args)
    assert_contract(result, args)
    assert result.exit_code == 2, result.stdout
    return result.stderr


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--model", "resnet", "--dataset", "mnist"], "'resnet' is not a model"),
        (["--loss", "hinge", "--dataset", "mnist"], "'hinge' is not a loss"),
        (["--data", "no-code-here", "--model", "cnn"], "names no code"),
        (["--data", "{own}:load", "--dataset", "mnist"], "--data loads your own data: drop --dataset"),
        (["--data", "{own}:load", "--users", "5"], "--users does not apply here: your own data"),
        (["--data", "{own}:load", "--silos", "2"], "--silos does not apply here"),
        (["--data", "{own}:load", "--sigma", "1", "--epsilon", "2"], "not both"),
        (
            ["--dataset", "heart-disease", "--user-budgets", "three-levels", "--epsilon", "4"],
            "give --epsilon (one target for every user) or --user-budgets (one budget per user), not both",
        ),
        (["--data", "{own}:load", "--resume", "--checkpoint", "{own}.d"], "holds no checkpoint"),
        (["--dataset", "mnist"], None),  # the algorithm below: default takes no --epsilon
    ],
)
def test_the_commands_refusals(own: Path, extra: list[str], said: str | None) -> None:
    args = ["train", "--algo", "uldp-avg", *(a.replace("{own}", str(own)) for a in extra)]
    if said is None:
        args = ["train", "--algo", "default", "--dataset", "mnist", "--epsilon", "2"]
        said = "--epsilon does not apply here"
    assert said in _refused(*args)


def test_own_metric_and_loss_by_reference_and_name(own: Path, tmp_path: Path) -> None:
    metrics = tmp_path / "m.csv"
    args = ["train", "--algo", "uldp-avg", "--data", f"{own}:load", "--model", f"{own}:make"]
    args += ["--loss", "cross_entropy", "--metric", f"{own}:balanced", "--rounds", "2", "--noise-seed", "1"]
    result = run(*args, "--metrics", str(metrics), "--format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["summary"]["metric"] == "balanced"
    assert all(0 <= row["balanced"] <= 1 for row in document["history"])
    assert document["summary"]["model"] == f"{own}:make" and document["summary"]["dataset"] == "tiny"
    assert metrics.read_text().splitlines()[0].split(",")[2] == "balanced"
    table = run(*args)
    assert table.exit_code == 0, table.stderr
    assert "balanced" in table.stdout and f"model{own}:make" in "".join(table.stdout.split())


def test_epsilon_calibrates_a_uldp_algorithm_and_says_so(own: Path) -> None:
    args = ["train", "--algo", "uldp-avg", "--data", f"{own}:load", "--rounds", "3", "--epsilon", "3"]
    result = run(*args, "--user-q", "0.5", "--noise-seed", "1", "--format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    spent = document["history"][-1]["epsilon"]
    assert spent <= 3 and spent == pytest.approx(3, rel=1e-2)
    # The sigma a run calibrates is the one `uldp calibrate --algo` finds for the same plan.
    sigma = document["summary"]["sigma"]
    calibrated = run(
        "calibrate",
        *("--algo", "uldp-avg", "--epsilon", "3", "--rounds", "3", "--user-q", "0.5"),
        *("--silos", str(document["summary"]["silos"]), "--format", "json"),
    )
    assert json.loads(calibrated.stdout)["sigma"] == pytest.approx(sigma, rel=1e-3)
    assert document["summary"]["epsilon_target"] == 3
    table = "".join(run(*args, "--user-q", "0.5", "--noise-seed", "1").stdout.split())
    assert "calibratedsothattheuser-levelepsilon" in table
    # Under user sampling the server, which draws the sample, sees more (ULDP-FL Remark 1).
    server = document["history"][-1]["server_epsilon"]
    assert server > spent and "againsttheserver,whichdrawsthesample:" in table


def test_audit_takes_the_same_references(own: Path) -> None:
    args = ["audit", "--algo", "uldp-avg", "--data", f"{own}:load", "--model", f"{own}:make"]
    result = run(*args, "--rounds", "1", "--canaries", "4", "--noise-seed", "1", "--format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["dataset"] == "tiny" and document["canaries"] == 4
    assert "--users does not apply here" in _refused(*args, "--users", "5")
    assert "--data loads your own data" in _refused(*args, "--label-column", "y")


def test_the_loss_and_metric_names_are_the_librarys() -> None:
    from uldp.cli.commands.train.options import LOSSES, METRICS
    from uldp.trainers import own_model

    assert tuple(own_model.LOSSES) == LOSSES
    assert tuple(own_model.METRIC_NAMES) == METRICS
