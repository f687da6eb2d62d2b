"""examples/flower/federation.py, run as a user would: a loopback SuperLink (TLS, SuperNode
authentication) with one SuperNode per data file runs the toy app; afterwards, whether it
ended normally, failed or was stopped by SIGTERM, no process it started is left and its
temporary directory is gone.

Each deployment takes 30-60 s on a small machine (three Python services start, and every
message starts a fresh flwr-clientapp process): hence `slow`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("flwr")

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "examples" / "flower" / "federation.py"
TAG = "ULDP_TEST_FLOWER_TAG"


def tagged_processes(tag: str) -> list[str]:
    """Live processes (zombies aside) whose environment holds TAG=tag, as 'pid command'."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if state not in {"Z", "X"}:
            found.append(f"{entry.name} {command}")
    return found


def harness_env(tmp_path: Path) -> tuple[dict[str, str], str]:
    """Environment for one harness run: a unique tag every descendant inherits, and a
    TMPDIR of the test's own so that the harness's temporary directory can be checked."""
    tag = uuid.uuid4().hex
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    return {**os.environ, TAG: tag, "TMPDIR": str(scratch)}, tag


def write_silos(tmp_path: Path, *contents: str) -> list[str]:
    """One data file per silo; returns the --data-file arguments."""
    args = []
    for index, text in enumerate(contents):
        path = tmp_path / f"silo{index}.txt"
        path.write_text(text, encoding="utf-8")
        args += ["--data-file", str(path)]
    return args


def assert_all_gone(tag: str, tmp_path: Path) -> None:
    assert tagged_processes(tag) == []
    assert list((tmp_path / "tmp").glob("uldp-flower-*")) == []


@pytest.mark.slow
def test_two_silos_run_the_toy_app_and_leave_nothing(tmp_path: Path) -> None:
    env, tag = harness_env(tmp_path)
    silos = write_silos(tmp_path, "1\n2\n3.5\n", "10\n-4\n")
    # --run-config passes through to `flwr run`: 3 rounds instead of the app's 2.
    proc = subprocess.run(
        [sys.executable, str(HARNESS), *silos, "--run-config", "num-rounds=3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    toy = [line for line in proc.stdout.splitlines() if line.startswith("toy:") and "took" not in line]
    rounds = [
        f"toy: round {r}/3: partition {p} sum {s}" for r in (1, 2, 3) for p, s in ((0, "6.5"), (1, "6"))
    ]
    assert toy == ["toy: 2 nodes connected", *rounds, "toy: done"]
    assert "federation: SuperLink 127.0.0.1:" in proc.stdout
    assert_all_gone(tag, tmp_path)


@pytest.mark.slow
def test_a_failing_clientapp_fails_the_run_with_status_1(tmp_path: Path) -> None:
    env, tag = harness_env(tmp_path)
    silos = write_silos(tmp_path, "1\n", "not a number\n")
    proc = subprocess.run(
        [sys.executable, str(HARNESS), *silos, "--run-config", "num-rounds=1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "toy: round 1/1: partition 0 sum 1" in proc.stdout
    assert "could not convert string to float" in proc.stdout
    assert "federation: run finished:failed" in proc.stderr
    assert_all_gone(tag, tmp_path)


@pytest.mark.slow
def test_sigterm_mid_run_tears_everything_down(tmp_path: Path) -> None:
    env, tag = harness_env(tmp_path)
    silos = write_silos(tmp_path, "1\n", "2\n")
    proc = subprocess.Popen(
        [sys.executable, str(HARNESS), *silos, "--run-config", "num-rounds=50"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = threading.Event()
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            # Mid-round: ServerApp, SuperExecs and ClientApp processes are all up.
            if line.startswith("toy: round 1/50"):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(timeout=400), "".join(lines)
        assert tagged_processes(tag), "the deployment should be running"
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM
        assert time.monotonic() - started < 60
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    assert proc.stderr is not None
    assert "federation: stopped by signal 15" in proc.stderr.read()
    assert_all_gone(tag, tmp_path)


def test_a_missing_data_file_is_one_error_line_and_status_2(tmp_path: Path) -> None:
    env, tag = harness_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, str(HARNESS), "--data-file", str(tmp_path / "absent.csv")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].endswith(
        f"error: --data-file: {tmp_path / 'absent.csv'} is not a file"
    )
    assert "Traceback" not in proc.stderr
    assert_all_gone(tag, tmp_path)
