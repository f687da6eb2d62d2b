"""`uldp bench protocol` end to end, with small insecure test keys to stay fast."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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
    # Not a terminal: a line per cell on stderr says what runs, how long it took, what is left.
    assert "bench protocol: cell 1/2, d=2 |U|=2: setup (512-bit Paillier key" in result.output
    assert "bench protocol: cell 1/2, d=2 |U|=2: done in" in result.output and "left" in result.output
    assert "bench protocol: cell 2/2, d=2 |U|=3: done in" in result.output
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


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except FileNotFoundError:
        return []


def _group_members(pgid: int) -> list[str]:
    """Live (not zombie) processes of process group `pgid`, from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, group = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except OSError:
            continue  # the process ended while we looked
        if int(group) == pgid and state != "Z":
            members.append(stat.parent.name)
    return members


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads worker processes from /proc")
@pytest.mark.parametrize(
    "signum,whole_group,status,message",
    [
        # `kill -- -PGID`, a closing terminal: every worker gets the signal too.
        (signal.SIGTERM, True, 143, "Stopped by SIGTERM"),
        # Ctrl-C on a terminal signals the whole foreground group.
        (signal.SIGINT, True, 130, "Interrupted (Ctrl-C)"),
        # `kill PID`: only the parent; it must end its workers itself.
        (signal.SIGTERM, False, 143, "Stopped by SIGTERM"),
    ],
)
def test_a_signal_during_the_silo_phase_is_reported_once_and_ends_every_worker(
    signum, whole_group, status, message
):
    uldp = Path(sys.executable).parent / "uldp"
    process = subprocess.Popen(
        [str(uldp), "bench", "protocol", *FAST, "--params", "300", "--users", "40"]
        + ["--workers", "2", "--rounds", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell job has
        # A child inherits an ignored SIGINT (an xdist worker ignores it), and Python then leaves
        # it ignored: the real default, as a shell gives its jobs.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while len(_children(process.pid)) < 2:  # the silo phase's worker processes are up
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    if whole_group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == status, err
    assert err.count(message) == 1, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    deadline = time.monotonic() + 10
    while _group_members(process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group_members(process.pid) == []
