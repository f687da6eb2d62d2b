"""`uldp train --algo dp-fedavg-robust` as a user runs it: the epsilon it prints is `uldp dropout`'s
for the dropouts that happened, its table and JSON, and its refusals (one line, exit status 2)."""

from __future__ import annotations

import pytest

from tests.cli.invoke import command_runner
from uldp.accountants.tight.gaussian import gaussian_epsilon

train, train_json = command_runner("train")
dropout, dropout_json = command_runner("dropout")

BASE = ("--algo", "dp-fedavg-robust", "--dataset", "heart-disease", "--users", "40", "--noise-seed", "5")


def _schedule(tmp_path, rounds: int, participants=(0,), at="upload") -> str:
    path = tmp_path / "drops.csv"
    lines = [f"{t},{p},{at}" for t in range(1, rounds + 1) for p in participants]
    path.write_text("round,participant,at\n" + "\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("calibration", ["--calibration", "--no-calibration"])
def test_the_printed_epsilon_is_uldp_dropouts_for_the_dropouts_that_happened(tmp_path, calibration):
    """Heart-disease's 4 hospitals, all sampled (q = 1), one lost before its upload every round:
    `uldp dropout --silos-per-round 4 --dropout 0.25` describes exactly that round."""
    rounds = 6
    schedule = _schedule(tmp_path, rounds)

    def trained(*extra: str) -> dict:
        return train_json(
            *BASE, "--rounds", str(rounds), "--sigma", "1.3", "--dropout-schedule", schedule, *extra
        )

    def planned(rate: str) -> dict:
        return dropout_json(
            *("--sigma", "1.3", "--silo-q", "1", "--silos-per-round", "4", "--dropout", rate),
            *("--rounds", str(rounds), "--no-paper"),
        )

    run = trained(calibration)
    assert [r["dropped_upload"] for r in run["history"]] == [1] * rounds
    # q = 1: each view is a composition of plain Gaussians, printed exactly (issue 32, item 10)
    for view, field in (("model_multiplier", "epsilon"), ("server_multiplier", "server_epsilon")):
        mu = sum(1 / row[view] ** 2 for row in run["history"]) ** 0.5
        assert run["summary"][field] == pytest.approx(gaussian_epsilon(mu, 1e-5), abs=1e-9)
    calibrated = calibration == "--calibration"
    entry = next(e for e in planned("0.25")["results"] if e["calibrated"] == calibrated)
    assert run["summary"]["epsilon"] == entry["epsilon"]
    assert run["history"][-1]["model_multiplier"] == entry["multiplier"]
    if not calibrated:  # the uncalibrated aggregate is what the server would read under secure aggregation
        assert run["history"][-1]["model_multiplier"] == pytest.approx(1.3 * (3 / 4) ** 0.5)
    # Without --secure the server reads each message alone: far more than the aggregate's figure.
    assert run["summary"]["server_epsilon"] > entry["server_epsilon"]
    # With it the server holds the aggregate (and the calibration shares): `uldp dropout`'s server row.
    secure = trained(calibration, "--secure")
    assert secure["summary"]["server_epsilon"] == entry["server_epsilon"]
    assert secure["summary"]["epsilon"] == entry["epsilon"]
    assert run["summary"]["target_epsilon"] == planned("0")["results"][0]["epsilon"]
    assert (run["summary"]["epsilon"] > run["summary"]["target_epsilon"]) == (not calibrated)


def test_the_table_shows_who_dropped_and_the_target(tmp_path):
    result = train(*BASE, "--rounds", "3", "--sigma", "1", "--dropout", "0.5", "--no-calibration")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # rich wraps lines to the terminal's width
    assert "sampled" in text and "dropped" in text
    assert "target: epsilon" in text and "EXCEEDED by" in text
    assert "NO calibration" in text  # the assumptions say what the run did


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("--dropout", "1"), "Invalid value for '--dropout': 1 is not in [0, 1)"),
        (("--dropout", "-0.1"), "Invalid value for '--dropout'"),
        (("--dropout-at", "later"), "Invalid value for '--dropout-at'"),
        (("--threshold", "1", "--secure"), "Invalid value for '--threshold'"),
        (("--threshold", "3"), "--threshold sets secure aggregation's k, which only --secure runs"),
        (("--threshold", "5", "--secure"), "--threshold k = 5 is above the 4 participants"),
        (("--min-weight-sum", "0"), "Invalid value for '--min-weight-sum'"),
        (("--min-weight-sum", "9"), "--min-weight-sum n_0 = 9 is above the expected sampled weight"),
        (("--n-max", "0"), "Invalid value for '--n-max'"),
        (("--dropout-schedule", "missing.csv"), "Invalid value for '--dropout-schedule'"),
        (("--secure", "--key-bits", "2048"), "--key-bits does not apply here"),
    ],
)
def test_bad_input_is_one_line_and_status_2(args, text):
    result = train(*BASE, "--rounds", "1", *args)
    assert result.exit_code == 2, result.output
    assert text in result.output
    assert len(result.output.strip().splitlines()) <= 3  # click's usage lines and one Error: line
    assert "Traceback" not in result.output


def test_dropout_and_a_schedule_are_one_source(tmp_path):
    result = train(*BASE, "--rounds", "1", "--dropout", "0.1", "--dropout-schedule", _schedule(tmp_path, 1))
    assert (
        result.exit_code == 2 and "give --dropout RATE or --dropout-schedule FILE, not both" in result.output
    )


def test_a_malformed_schedule_is_named(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("round,participant,at\n1,9,upload\n")
    result = train(*BASE, "--rounds", "1", "--dropout-schedule", str(path))
    assert result.exit_code == 2
    assert "line 2: participant must be a silo number in [0, 3]" in result.output


@pytest.mark.parametrize("option", [("--dropout", "0.1"), ("--no-calibration",), ("--n-max", "10")])
def test_dropout_options_are_refused_by_other_algorithms(option):
    result = train("--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "1", *option)
    assert result.exit_code == 2
    shown = "--calibration/--no-calibration" if option[0] == "--no-calibration" else option[0]
    assert f"{shown} does not apply here: uldp-avg does not use it" in result.output


@pytest.mark.parametrize(
    ("command", "args"),
    [("account", ("--sigma", "1", "--rounds", "10")), ("calibrate", ("--epsilon", "3", "--rounds", "10"))],
)
def test_account_and_calibrate_point_to_uldp_dropout(command, args):
    run, _ = command_runner(command)
    result = run("--algo", "dp-fedavg-robust", *args)
    assert result.exit_code == 2
    assert "accounted from what each round released (its dropouts): use `uldp dropout`" in result.output
