"""`uldp bench protocol` end to end, with small insecure test keys to stay fast."""

import json

import pytest
from click.testing import CliRunner

from uldp.cli.main import cli

FAST = ["--key-bits", "512", "--test-keys", "--silos", "2"]
PHASES = {"key_exchange", "blinded_histograms", "server_weights", "silo_weighting", "aggregation"}


def run(*args):
    return CliRunner().invoke(cli, ["bench", "protocol", *args])


def test_json_contract_with_comparison():
    result = run(
        *FAST,
        "--params",
        "3,5",
        "--users",
        "4",
        "--compare-straightforward",
        "--rounds",
        "2",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    runs = doc["runs"]
    assert [(r["params"], r["users"]) for r in runs] == [(3, 4), (5, 4)]
    for r in runs:
        assert r["silos"] == 2 and r["key_bits"] == 512 and r["rounds"] == 2
        assert r["verified"] is True
        assert set(r["seconds"]) == PHASES and all(v >= 0 for v in r["seconds"].values())
        assert r["straightforward_seconds"] > 0
        assert r["max_error"] <= r["tolerance"]
    assert "INSECURE" in doc["assumptions"]["key"]


def test_table_and_plot(tmp_path):
    png = tmp_path / "t.png"
    result = run(*FAST, "--params", "2", "--users", "2,3", "--plot", str(png))
    assert result.exit_code == 0, result.output
    assert "uldp bench protocol" in result.output and "Assumptions" in result.output
    assert "naive s" not in result.output  # only with --compare-straightforward
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_csv_has_one_row_per_run():
    result = run(*FAST, "--params", "2", "--users", "2,3", "--format", "csv")
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("params,users,key_exchange") and len(lines) == 3


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--key-bits", "1024"], "--key-bits"),
        (["--key-bits", "128", "--test-keys"], "--key-bits"),
        (["--params", "0"], "--params"),
        (["--users", "a"], "--users"),
        (["--silos", "0"], "--silos"),
        (["--key-bits", "512", "--test-keys", "--n-max", "2000"], "too small"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0]


def test_group_lists_protocol():
    result = CliRunner().invoke(cli, ["bench", "--help"])
    assert result.exit_code == 0 and "protocol" in result.output


def test_failed_verification_exits_1(monkeypatch):
    import dataclasses

    import uldp.crypto.protocol.benchmark as benchmark

    real = benchmark.benchmark_run
    monkeypatch.setattr(
        benchmark, "benchmark_run", lambda **kw: dataclasses.replace(real(**kw), verified=False)
    )
    result = run(*FAST, "--params", "2", "--users", "2", "--format", "json")
    assert result.exit_code == 1
    assert json.loads(result.output.split("Error:")[0])["runs"][0]["verified"] is False
    assert "verification failed for d=2 |U|=2" in result.output
