"""`uldp bench protocol --private-sampling` (issue 36, item 4): the OT phase timed next to
Protocol 1's other phases, with small insecure test keys to stay fast."""

import json

import pytest
from click.testing import CliRunner

from uldp.cli.commands import bench
from uldp.cli.main import cli

FAST = ["--key-bits", "512", "--test-keys", "--silos", "2"]
SAMPLING_PHASES = {
    "sampling_offer",
    "sampling_choice",
    "sampling_transfer",
    "sampling_retrieve",
    "sampling_audit",
}
PHASES = {"key_exchange", "blinded_histograms", "server_weights", "silo_weighting", "aggregation"}


def run(*args):
    return CliRunner().invoke(cli, ["bench", "protocol", *args])


def test_json_carries_the_sampling_phases_and_the_ot_total():
    result = run(
        *FAST,
        *["--params", "2", "--users", "6", "--private-sampling", "--sampling-slots", "4,10"],
        *["--user-q", "0.5", "--audit-rate", "0.2", "--rounds", "2", "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    runs = doc["runs"]
    assert [(r["params"], r["users"], r["slots"], r["real"]) for r in runs] == [(2, 6, 4, 2), (2, 6, 10, 5)]
    for r in runs:
        assert r["verified"] is True and r["max_error"] <= r["tolerance"]
        assert set(r["seconds"]) == PHASES | SAMPLING_PHASES
        assert all(v >= 0 for v in r["seconds"].values())
        assert r["ot_seconds"] == pytest.approx(sum(r["seconds"][p] for p in SAMPLING_PHASES))
        assert r["ot_seconds_per_user"] == pytest.approx(r["ot_seconds"] / 6)
        assert r["ot_ms_per_user"] == pytest.approx(1000 * r["ot_seconds_per_user"])
        assert r["user_q"] == 0.5 and r["audit_rate"] == 0.2 and 0 <= r["sampled_users"] <= 6
    assert "oblivious transfer" in doc["assumptions"]["private sampling"]
    assert "xfer" in doc["assumptions"]["OT phase"]


TABLE_ARGS = [*FAST, "--params", "2", "--users", "2,3", "--private-sampling", "--sampling-slots", "10"]


def test_table_and_plot(tmp_path):
    png = tmp_path / "t.png"
    result = run(*TABLE_ARGS, "--plot", str(png))
    assert result.exit_code == 0, result.output
    for header in ("xfer", "OT s", "OT ms/user", "silo s"):
        assert header in result.output
    assert "bench protocol: cell 2/2, d=2 |U|=3 P=10: done in" in result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_csv_has_the_sampling_columns():
    result = run(*TABLE_ARGS, "--format", "csv")
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("params,users,slots,real,key_exchange,blinded_histograms,sampling_offer")
    assert "ot_seconds,ot_ms_per_user" in lines[0] and len(lines) == 3


def test_without_the_flag_the_output_is_unchanged():
    result = run(*FAST, "--params", "2", "--users", "2", "--format", "json")
    assert result.exit_code == 0, result.output
    (r,) = json.loads(result.output)["runs"]
    assert set(r["seconds"]) == PHASES and "ot_seconds" not in r and "slots" not in r


@pytest.mark.parametrize(
    "args,needle",
    [
        # Each private-sampling option is refused without the flag.
        (["--sampling-slots", "10"], "--sampling-slots"),
        (["--user-q", "0.5"], "--user-q"),
        (["--audit-rate", "0.1"], "--audit-rate"),
        # q rounds to 0 or to P; P < 2; q out of (0, 1]; the audit rate out of [0, 1).
        (["--private-sampling", "--sampling-slots", "10", "--user-q", "0.01"], "rounds to 0/10"),
        (["--private-sampling", "--sampling-slots", "10", "--user-q", "0.97"], "rounds to 10/10"),
        (["--private-sampling", "--sampling-slots", "1"], "[2, 10000]"),
        (["--private-sampling", "--user-q", "0"], "--user-q"),
        (["--private-sampling", "--audit-rate", "1"], "--audit-rate"),
        (["--private-sampling", "--compare-straightforward"], "--compare-straightforward"),
        (["--private-sampling", "--users", "10000", "--sampling-slots", "101"], "slot keys"),
    ],
)
def test_bad_private_sampling_input_is_one_line_exit_2(args, needle):
    result = run(*FAST, "--params", "2", "--users", "2", *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and needle in lines[0], lines


def test_the_cli_default_audit_rate_is_the_protocols():
    from uldp.crypto.protocol.sampling import DEFAULT_AUDIT_RATE

    assert bench.DEFAULT_AUDIT_RATE == DEFAULT_AUDIT_RATE
