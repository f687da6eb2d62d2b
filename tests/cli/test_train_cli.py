"""`uldp train` end to end on every built-in data set, bad input, config, resume and plot."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from uldp.cli.main import cli

from .invoke import command_runner

run, run_json = command_runner("train")


def account_epsilon(command: str) -> float:
    args = command.split()[2:] + ["--format", "json"]
    result = CliRunner().invoke(cli, ["account", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["results"][0]["epsilon"]


@pytest.mark.parametrize(
    "dataset,algo,metric,extra",
    [
        ("mnist", "uldp-avg", "accuracy", ["--users", "20", "--lr", "0.1"]),
        ("creditcard", "uldp-avg-w", "roc_auc", ["--users", "20", "--user-q", "0.5"]),
        (
            "heart-disease",
            "uldp-group",
            "accuracy",
            ["--users", "20", "--group-k", "2", "--batch-size", "64"],
        ),
        ("gbsg2", "uldp-sgd", "c_index", ["--users", "20"]),
    ],
)
def test_one_round_on_each_dataset(dataset, algo, metric, extra, tmp_path):
    metrics = tmp_path / "m.jsonl"
    doc = run_json(
        "--algo",
        algo,
        "--dataset",
        dataset,
        "--rounds",
        "2",
        "--sigma",
        "3",
        "--metrics",
        str(metrics),
        *extra,
    )
    summary = doc["summary"]
    assert summary["dataset"] == dataset and summary["metric"] == metric
    assert isinstance(summary["synthetic"], bool) and summary["source"]
    assert (dataset == "creditcard") == summary["synthetic"]  # no creditcard.csv given
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["round"] for r in rows] == [1, 2]
    assert all({"round", "loss", "epsilon", metric} <= r.keys() for r in rows)
    assert rows == [{k: r[k] for k in rows[0]} for r in doc["history"]]
    # The epsilon is the one `uldp account` prints for the same settings.
    command = doc["assumptions"]["check"].strip("`").split("`")[0]
    assert account_epsilon(command) == pytest.approx(summary["epsilon"], rel=1e-12)


def test_table_output_names_the_data_source():
    result = run("--algo", "uldp-naive", "--dataset", "creditcard", "--users", "10", "--rounds", "1")
    assert result.exit_code == 0, result.output
    assert "SYNTHETIC" in result.output and "epsilon" in result.output
    assert "Assumptions" in result.output and "2|S|C" in result.output


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--algo", "uldp-avg", "--dataset", "cifar"], "--dataset"),
        (["--algo", "uldp-group", "--dataset", "mnist", "--group-k", "0"], "--group-k"),
        (["--algo", "uldp-group", "--dataset", "mnist", "--group-k", "many"], "--group-k"),
        (["--algo", "uldp-avg", "--dataset", "mnist", "--user-q", "0"], "--user-q"),
        (["--algo", "uldp-avg", "--dataset", "mnist", "--user-q", "1.5"], "--user-q"),
        (["--algo", "fedprox", "--dataset", "mnist"], "--algo"),
        (["--algo", "uldp-avg"], "--dataset"),
        (["--algo", "uldp-avg", "--dataset", "mnist", "--metrics", "m.txt"], "--metrics"),
        (["--algo", "uldp-avg", "--dataset", "mnist", "--resume"], "--checkpoint"),
        (["--algo", "uldp-avg", "--dataset", "mnist", "--secure"], "--secure"),
        (["--algo", "uldp-group", "--dataset", "gbsg2"], "Cox"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run(*args, "--rounds", "1", "--users", "5")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and needle in lines[0], result.output


def test_unknown_column_in_own_table(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("patient,a,b,y\n" + "".join(f"{i % 4},{i},{i * 2 % 7},{i % 2}\n" for i in range(40)))
    result = run(
        "--algo",
        "uldp-avg",
        "--data-path",
        str(table),
        "--user-column",
        "person",
        "--label-column",
        "y",
        "--rounds",
        "1",
    )
    assert result.exit_code == 2 and "person" in result.output
    assert len(result.output.strip().splitlines()) == 1
    doc = run_json(
        "--algo",
        "uldp-avg",
        "--data-path",
        str(table),
        "--user-column",
        "patient",
        "--label-column",
        "y",
        "--rounds",
        "1",
        "--silos",
        "2",
    )
    assert doc["summary"]["users"] == 4 and doc["history"][0]["round"] == 1


def test_config_file_with_flags_overriding(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("algo: uldp-avg\ndataset: creditcard\nusers: 10\nrounds: 3\nsigma: 2\n")
    doc = run_json("--config", str(config), "--rounds", "1")
    assert doc["summary"]["rounds"] == 1 and doc["summary"]["sigma"] == 2


def test_resume_and_plot(tmp_path):
    common = [
        "--algo",
        "uldp-avg",
        "--dataset",
        "creditcard",
        "--users",
        "10",
        "--checkpoint",
        str(tmp_path / "ck"),
        "--metrics",
        str(tmp_path / "m.csv"),
        "--noise-seed",
        "3",
    ]
    first = run_json(*common, "--rounds", "1")
    resumed = run_json(*common, "--rounds", "2", "--resume", "--plot", str(tmp_path / "p.png"))
    whole = run_json(
        "--algo", "uldp-avg", "--dataset", "creditcard", "--users", "10", "--rounds", "2", "--noise-seed", "3"
    )
    assert resumed["history"][0] == first["history"][0]
    assert [r["loss"] for r in resumed["history"]] == [r["loss"] for r in whole["history"]]
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len((tmp_path / "m.csv").read_text().splitlines()) == 3


def test_secure_weighting_runs_protocol_1_and_matches_the_plaintext_run():
    args = [
        "--algo",
        "uldp-avg-w",
        "--dataset",
        "heart-disease",
        "--users",
        "6",
        "--rounds",
        "1",
        "--secure",
        "--test-keys",
        "--key-bits",
        "512",
        "--noise-seed",
        "5",
    ]
    secure = run_json(*args)
    plain = run_json(*[a for a in args if a not in ("--secure", "--test-keys", "--key-bits", "512")])
    assert secure["history"][0]["loss"] == pytest.approx(plain["history"][0]["loss"], abs=1e-5)
