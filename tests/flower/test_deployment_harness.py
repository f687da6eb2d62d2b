"""examples/flower/, run as a user would: a loopback SuperLink (TLS, SuperNode authentication)
with one SuperNode per data file runs uldp's apps on the heart-disease hospitals (and equals the
same run in process), or the toy app; afterwards, whether it ended normally, was stopped by
Ctrl-C or lost a SuperNode (killed after round 1: one `Error:` line naming it and Flower's
reason, round 1 kept and resumable), no process it started is left and its temporary directory
is gone.

Each deployment takes 30-60 s on a small machine (three Python services start, and every
message starts a fresh flwr-clientapp process): hence `slow`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from uldp.cli.main import cli

pytest.importorskip("flwr")

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "examples" / "flower" / "federation.py"
HEART = ROOT / "examples" / "flower" / "heart_disease.py"
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
def test_heart_disease_hospitals_run_uldp_avg_w_secure_as_in_process(tmp_path: Path) -> None:
    env, tag = harness_env(tmp_path)
    metrics, local = tmp_path / "flower.jsonl", tmp_path / "local.jsonl"
    settings = ["--rounds", "1", "--noise-seed", "4"]  # each round costs ~25 s of process starts
    proc = subprocess.run(
        [sys.executable, str(HEART), *settings, "--test-keys", "--metrics", str(metrics)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "uldp train: uldp-avg-w on heart-disease (real data)" in proc.stdout  # the command's table
    assert "4 silos as separate parties" in proc.stdout and "a Flower deployment" in proc.stdout
    assert "Protocol 1" in proc.stdout
    # The same run in process (a second interpreter would cost seconds of imports).
    same = CliRunner().invoke(
        cli,
        ["train", "--algo", "uldp-avg-w", "--dataset", "heart-disease"]
        + ["--users", "200", "--seed", "0", "--secure", "--key-bits", "1024", "--test-keys", *settings]
        + ["--metrics", str(local)],
    )
    assert same.exit_code == 0, same.output
    deployed = [json.loads(line) for line in metrics.read_text().splitlines()]
    in_process = [json.loads(line) for line in local.read_text().splitlines()]
    assert len(deployed) == len(in_process) == 1
    for a, b in zip(deployed, in_process):
        for key in b:
            if key != "elapsed_s":
                assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-6), key
    assert_all_gone(tag, tmp_path)
    assert list((tmp_path / "tmp").glob("uldp-hospitals-*")) == []


@pytest.mark.slow
def test_ctrl_c_mid_run_tears_everything_down(tmp_path: Path) -> None:
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
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        assert proc.wait(timeout=120) == 128 + signal.SIGINT
        assert time.monotonic() - started < 60
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    assert proc.stderr is not None
    assert "federation: stopped by signal 2" in proc.stderr.read()
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


def _kill_supernode(tag: str, partition: int) -> None:
    """SIGKILL the process group of the SuperNode started with partition-id=`partition` (its
    own session: federation.py starts each so), as when its machine dies."""
    for line in tagged_processes(tag):
        pid, command = line.split(" ", 1)
        if "flower-supernode" in command and f"partition-id={partition} " in command:
            os.killpg(int(pid), signal.SIGKILL)
            return
    raise AssertionError(f"no SuperNode with partition-id={partition}: {tagged_processes(tag)}")


@pytest.mark.slow
def test_a_supernode_that_dies_is_named_with_flowers_reason_and_round_1_stays_resumable(
    tmp_path: Path,
) -> None:
    """Issue 32: one SuperNode killed after round 1 ended, a minute later, with "silo 1 did not
    answer within 600 s", Click's usage lines and a Flower traceback. The SuperLink answers for
    the dead node (NODE_UNAVAILABLE, after two missed heartbeats: up to 60 s); the run now ends
    with one `Error:` line naming the silo, its node and that reason, and round 1's metrics and
    checkpoint are left as they were, to resume from."""
    from uldp.trainers.data import load_dataset
    from uldp.trainers.flower.partitions import write_partitions

    env, tag = harness_env(tmp_path)
    metrics, checkpoint = tmp_path / "run.jsonl", tmp_path / "checkpoint"
    # Two silos (SuperNodes) suffice to lose one; each message starts a ClientApp process per
    # node, so two cost half of heart-disease's four hospitals (test time, issue 34).
    settings = "--algo uldp-avg --dataset gbsg2 --silos 2 --users 200 --seed 0 --rounds 3"
    train_args = f"{settings} --metrics {metrics} --checkpoint {checkpoint}"
    files = write_partitions(load_dataset("gbsg2", users=200, silos=2, seed=0), tmp_path / "silos")
    command = [sys.executable, str(HARNESS), "--app", str(HEART.parent / "uldp_app")]
    command += ["--run-config", f"train-args='{train_args}'"]
    for path in files:
        command += ["--data-file", str(path)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    round_1 = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "round 1/3" in line:
                round_1.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert round_1.wait(timeout=400), "".join(lines)
        _kill_supernode(tag, 1)
        assert proc.wait(timeout=400) == 1, "".join(lines)  # federation.py: the run failed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    output = "".join(lines)
    errors = [line for line in lines if line.startswith("Error:")]
    assert len(errors) == 1, output
    assert errors[0].startswith("Error: silo 1 (SuperNode "), output
    assert "failed in round 2: NODE_UNAVAILABLE (Flower error code 5): Node Unavailable" in errors[0]
    assert "did not answer" not in output and "Usage:" not in output and "Traceback" not in output
    assert_all_gone(tag, tmp_path)
    # Round 1 as written, and resumable (in process: the same algorithm and data, fresh noise).
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [row["round"] for row in rows] == [1]
    resumed = CliRunner().invoke(
        cli,
        ["train", *settings.split(), "--metrics", str(metrics), "--checkpoint", str(checkpoint), "--resume"],
    )
    assert resumed.exit_code == 0, resumed.output
    after = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [row["round"] for row in after] == [1, 2, 3] and after[0] == rows[0]
