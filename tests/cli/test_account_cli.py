"""`uldp account` end to end, as a user and a script would run it."""

import json
import subprocess
import sys

import pytest

from uldp.accountants.account import known_participation_epsilon, record_level
from uldp.trainers.algorithms import plan_algorithm

from .invoke import command_runner

FIG2 = ["--sigma", "5", "--q", "0.01", "--steps", "100000"]


run, run_json = command_runner("account")


def test_fig2_json_contract():
    doc = run_json(*FIG2, "--k", "1,2", "--k", "4", "--group-method", "rdp,normal")
    results = doc["results"]
    assert [(r["k"], r["method"]) for r in results] == [
        (1, "record"),
        (2, "rdp"),
        (2, "normal"),
        (4, "rdp"),
        (4, "normal"),
    ]
    for r in results:
        assert {"epsilon", "delta", "k", "method", "accountant", "conversion", "order"} <= r.keys()
        assert r["delta"] == 1e-5 and r["bound"] == "upper"
    assert results[0]["epsilon"] == pytest.approx(2.85, abs=0.005)
    assert doc["assumptions"]["conversion"].startswith("improved")


def test_table_shows_every_method_and_the_assumptions():
    result = run(*FIG2, "--k", "1,8", "--group-method", "all", "--accountant", "rdp")
    assert result.exit_code == 0, result.output
    for text in ("record level (RDP)", "Lemma 6", "Lemma 5", "PLD", "Assumptions", "delta: 1e-05"):
        assert text in result.output


def test_csv_has_a_header_and_one_row_per_result():
    result = run(*FIG2, "--k", "1,2", "--format", "csv")
    lines = result.output.strip().splitlines()
    assert (
        lines[0].startswith("algorithm,level,k,method,accountant,conversion,epsilon") and len(lines) == 1 + 3
    )
    assert lines[2].split(",")[2:4] == ["2", "rdp"]


def test_algorithm_preset_matches_the_library():
    doc = run_json("--algo", "uldp-avg", "--sigma", "5", "--rounds", "100", "--user-q", "0.5")
    r, server = doc["results"]
    expected = record_level(plan_algorithm("uldp-avg", sigma=5, rounds=100, user_q=0.5).mechanism, 1e-5)
    assert r["epsilon"] == expected.epsilon and r["level"] == "user" and r["algorithm"] == "uldp-avg"
    assert "Algorithm 4" in doc["assumptions"]["user sampling"]
    # The server draws the sample: its view gets no amplification, so a larger epsilon.
    assert server["method"] == "server view"
    assert server["epsilon"] == known_participation_epsilon(5, 0.5, 100, 1e-5).epsilon > r["epsilon"]


def test_no_server_view_row_without_user_sampling():
    doc = run_json("--algo", "uldp-avg", "--sigma", "5", "--rounds", "100")
    assert [r["method"] for r in doc["results"]] == ["user"]


def test_several_algorithms_side_by_side():
    doc = run_json(
        "--algo",
        "uldp-naive,uldp-group",
        "--sigma",
        "5",
        "--rounds",
        "10",
        "--record-q",
        "0.01",
        "--k",
        "4",
        "--silos",
        "3",
    )
    algos = [r["algorithm"] for r in doc["results"]]
    assert algos == ["uldp-naive", "uldp-group", "uldp-group"]


def test_tight_accountants_never_above_rdp():
    doc = run_json("--sigma", "1.0", "--q", "0.02", "--steps", "1000", "--accountant", "rdp,pld,prv")
    eps = {r["accountant"]: r["epsilon"] for r in doc["results"]}
    assert eps["pld"] <= eps["rdp"] and eps["prv"] <= eps["rdp"]


def test_yaml_config_with_flag_override(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("sigma: 5\nq: 0.01\nsteps: 1000\nk: [1, 2]\ngroup-method: rdp\n")
    doc = run_json("--config", str(plan), "--steps", "100000")
    assert doc["results"][0]["epsilon"] == pytest.approx(2.85, abs=0.005)
    assert [r["k"] for r in doc["results"]] == [1, 2]


@pytest.mark.parametrize(
    "args,option",
    [
        (["--sigma", "0", "--q", "0.1", "--steps", "10"], "--sigma"),
        (["--sigma", "-1", "--q", "0.1", "--steps", "10"], "--sigma"),
        (["--sigma", "1", "--q", "0", "--steps", "10"], "--q"),
        (["--sigma", "1", "--q", "1.5", "--steps", "10"], "--q"),
        (["--sigma", "1", "--q", "0.1", "--steps", "-3"], "--steps"),
        (["--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "1"], "--delta"),
        (["--sigma", "1", "--q", "0.1", "--steps", "10", "--delta", "0"], "--delta"),
        (["--sigma", "1", "--q", "0.1", "--steps", "10", "--k", "0"], "--k"),
        (["--sigma", "1", "--q", "0.1", "--steps", "10", "--orders", "0.5,2"], "--orders"),
        (["--sigma", "1", "--q", "0.1", "--steps", "10", "--group-method", "lemma7"], "--group-method"),
        (["--sigma", "1", "--q", "0.1"], "--steps"),
        (["--algo", "uldp-avg", "--sigma", "1"], "--rounds"),
        (["--algo", "uldp-group", "--sigma", "1", "--rounds", "3", "--k", "2"], "--record-q"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, option):
    result = run(*args)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and option in lines[0]
    assert "Traceback" not in result.output


def test_bad_config_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("sigma: 5\nnoise: 3\n")
    result = run("--config", str(bad), "--q", "0.1", "--steps", "10")
    assert result.exit_code == 2 and "noise" in result.output
    bad.write_text("sigma: [5\n")
    result = run("--config", str(bad), "--q", "0.1", "--steps", "10")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_runs_as_a_fresh_process_without_torch():
    code = (
        "import sys; from uldp.cli.main import cli; "
        "sys.argv=['uldp','account','--sigma','5','--q','0.01','--steps','100','--format','json'];"
        "\ntry:\n    cli()\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "assert 'torch' not in sys.modules and 'dp_accounting' not in sys.modules"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["results"][0]["epsilon"] > 0


def test_plot_draws_a_png_of_epsilon_against_k(tmp_path):
    out = tmp_path / "fig2.png"
    result = run(
        "--sigma",
        "5",
        "--q",
        "0.01",
        "--steps",
        "1000",
        "--k",
        "1,2,4",
        "--group-method",
        "rdp,normal",
        "--plot",
        str(out),
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["fig2.png"]  # no temporary file left


def test_plot_without_a_group_is_refused_before_any_work(tmp_path):
    result = run("--sigma", "5", "--q", "0.01", "--steps", "1000", "--plot", str(tmp_path / "x.png"))
    assert result.exit_code == 2
    assert "--plot" in result.output and "--k" in result.output
    assert not (tmp_path / "x.png").exists()
