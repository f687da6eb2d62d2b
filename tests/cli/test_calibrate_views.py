"""`uldp calibrate` with user sampling prints both views and targets the one asked for; progress
goes to a terminal only; `--plot` draws the curve (issue 11 points 5 and 7)."""

import contextlib
import json

from click.testing import CliRunner

from uldp.accountants.account import known_participation_epsilon
from uldp.cli.main import cli

from .invoke import command_runner

run, run_json = command_runner("calibrate")
SAMPLED = ["--epsilon", "3", "--algo", "uldp-avg", "--user-q", "0.3", "--rounds", "100"]


def test_both_views_printed_and_the_model_is_the_default():
    doc = run_json(*SAMPLED)
    assert doc["view"] == "model" and doc["epsilon"] == doc["epsilon_model"] <= 3
    server = known_participation_epsilon(doc["sigma"], 0.3, 100, 1e-5).epsilon
    assert doc["epsilon_server"] == server > 3  # the server sees more than the budget


def test_view_server_meets_the_budget_for_the_server():
    doc = run_json(*SAMPLED, "--view", "server")
    assert doc["view"] == "server" and doc["epsilon"] == doc["epsilon_server"] <= 3
    assert known_participation_epsilon(doc["sigma"], 0.3, 100, 1e-5).epsilon <= 3
    assert known_participation_epsilon(doc["sigma"] - 0.001, 0.3, 100, 1e-5).epsilon > 3
    assert doc["epsilon_model"] < doc["epsilon_server"]


def test_table_names_the_view_and_warns_about_the_server():
    result = run(*SAMPLED)
    assert result.exit_code == 0, result.output
    assert "epsilon" in result.output and "server" in result.output
    assert "--view server calibrates for it" in " ".join(result.output.split())
    assert "--view" in CliRunner().invoke(cli, ["calibrate", "--help"]).output
    assert "[default: model]" in " ".join(CliRunner().invoke(cli, ["calibrate", "--help"]).output.split())


def test_view_server_without_user_sampling_is_refused():
    result = run("--epsilon", "3", "--q", "0.01", "--steps", "1000", "--view", "server")
    assert result.exit_code == 2 and "Error:" in result.output and "--view" in result.output


def test_progress_shows_each_evaluation_on_a_terminal(monkeypatch):
    seen = []

    @contextlib.contextmanager
    def fake_status(fmt, initial="accounting"):
        yield seen.append

    monkeypatch.setattr("uldp.cli.commands.calibrate.status", fake_status)
    result = run("--epsilon", "3", "--q", "0.01", "--steps", "1000")
    assert result.exit_code == 0, result.output
    assert any("evaluation" in text and "sigma" in text and "epsilon" in text for text in seen)


def test_progress_never_in_json_or_csv():
    for fmt in ("json", "csv"):
        result = CliRunner().invoke(cli, ["calibrate", *SAMPLED, "--format", fmt])
        assert result.exit_code == 0
        assert "evaluation 1" not in result.output and "calibrating" not in result.output
    json.loads(CliRunner().invoke(cli, ["calibrate", *SAMPLED, "--format", "json"]).output)


def test_plot_is_written(tmp_path):
    out = tmp_path / "curve.png"
    result = run(*SAMPLED, "--plot", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plot written to" in result.output and "curve.png" in result.output
    steps = tmp_path / "steps.png"
    assert run("--epsilon", "3", "--q", "0.01", "--sigma", "5", "--plot", str(steps)).exit_code == 0
    assert steps.stat().st_size > 10_000
