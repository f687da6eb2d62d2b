"""`uldp train` against the holes issue 12 found: unusable checkpoints, impossible sizes, options
the algorithm ignores, divergence to NaN, two runs on one file, SIGTERM, stale temporary files.

Each test runs the command as a user would (in-process through click's CliRunner, or as a real
process where signals and a second process matter) and checks the one `Error:` line it prints.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.cli.fuzz import assert_contract, run
from uldp.cli.commands import train as train_command
from uldp.trainers import runner
from uldp.trainers.checkpoint_file import CHECKPOINT_NAME, read_checkpoint

BASE = ("train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "2", "--users", "8")
UL = [sys.executable, "-m", "uldp"]


def _one_error(result, *words: str) -> str:
    assert_contract(result, [])
    assert result.exit_code == 2, result.stdout + result.stderr
    line = result.stderr.strip()
    for word in words:
        assert word in line, line
    assert "weights_only" not in line and "Traceback" not in line
    return line


# --- checkpoints: refused before round 1, by name, never with torch's advice ----------------------


def _checkpoint(tmp_path: Path) -> Path:
    result = run(*BASE, "--checkpoint", str(tmp_path / "ck"), "--noise-seed", "1")
    assert result.exit_code == 0, result.stderr
    return tmp_path / "ck" / "checkpoint.pt"


def test_checkpoint_name_matches_the_runner() -> None:
    assert train_command.CHECKPOINT_FILE == CHECKPOINT_NAME


@pytest.mark.parametrize("damage", ["truncated", "garbage", "pickle", "missing keys", "not a dict"])
def test_unusable_checkpoint_is_named_before_training(tmp_path: Path, damage: str) -> None:
    path = _checkpoint(tmp_path)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00garbage" * 100)
    elif damage == "pickle":
        import pickle

        path.write_bytes(pickle.dumps(object))  # would need weights_only=False: never suggested
    elif damage == "missing keys":
        state = torch.load(path, weights_only=True)
        del state["torch_rng"]
        torch.save(state, path)
    else:
        torch.save([1, 2, 3], path)
    line = _one_error(
        run(*BASE, "--rounds", "3", "--checkpoint", str(path.parent), "--resume", "--noise-seed", "1"),
        "--checkpoint",
        str(path),
    )
    assert "missing" in line or "truncated or not a checkpoint" in line


def test_checkpoint_file_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "ck" / "checkpoint.pt").mkdir(parents=True)
    _one_error(run(*BASE, "--checkpoint", str(tmp_path / "ck")), "--checkpoint", "is a directory")


def test_checkpoint_path_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    _one_error(run(*BASE, "--checkpoint", str(tmp_path / "f")), "--checkpoint", "is a file")


def test_empty_checkpoint_path_is_refused() -> None:
    _one_error(run(*BASE, "--checkpoint", ""), "--checkpoint", "empty path")


def test_checkpoint_where_nothing_can_be_written_is_refused_before_training() -> None:
    # /proc refuses new files even to root, for whom a chmod'ed directory would still be writable.
    _one_error(run(*BASE, "--checkpoint", "/proc/uldp-checkpoint"), "--checkpoint", "not writable")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_checkpoint_directory_is_refused_before_training(tmp_path: Path) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(0o500)
    try:
        _one_error(run(*BASE, "--checkpoint", str(directory)), "--checkpoint", "not writable")
    finally:
        directory.chmod(0o700)


def test_checkpoint_is_fsynced_file_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    _checkpoint(tmp_path)
    directory = str((tmp_path / "ck").resolve())
    assert any(".checkpoint.pt." in name for name in synced), synced  # the file, before its rename
    assert directory in synced, synced  # the directory, after it


# --- sizes and ignored options ---------------------------------------------------------------------


def test_more_users_than_records_names_both_numbers() -> None:
    _one_error(
        run("train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--users", "100000"),
        "--users 100000",
        "740 records",
    )


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("--algo", "uldp-avg", "--group-k", "3"), "--group-k"),
        (("--algo", "uldp-avg", "--batch-size", "8"), "--batch-size"),
        (("--algo", "uldp-sgd", "--lr", "0.1"), "--lr"),
        (("--algo", "uldp-sgd", "--local-epochs", "2"), "--local-epochs"),
        (("--algo", "uldp-sgd", "--local-batch-size", "2"), "--local-batch-size"),
        (("--algo", "uldp-naive", "--local-batch-size", "2"), "--local-batch-size"),
        (("--algo", "default", "--sigma", "2"), "--sigma"),
        (("--algo", "default", "--clip", "2"), "--clip"),
        (("--algo", "uldp-group", "--loop"), "--loop"),
        (("--algo", "uldp-avg", "--task", "survival"), "--task"),
        (("--algo", "uldp-avg", "--silo-column", "s"), "--silo-column"),
        (("--algo", "uldp-avg", "--data-path", "x.csv"), "--data-path"),
        (("--algo", "uldp-avg", "--key-bits", "2048"), "--key-bits"),
        (("--algo", "uldp-avg", "--every", "2", "--format", "json"), "--every"),
        (("--algo", "uldp-avg", "--overwrite"), "--overwrite"),
    ],
)
def test_option_the_run_ignores_is_refused_by_name(args: tuple[str, ...], option: str) -> None:
    result = run("train", "--dataset", "heart-disease", "--rounds", "1", "--users", "8", *args)
    line = _one_error(result, option, "does not apply")
    assert line.startswith(f"Error: {option} ")


def test_ignored_option_from_config_is_warned_about_once(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("lr: 0.5\nlocal-epochs: 2\nglobal-lr: 10\n")
    result = run(*BASE, "--rounds", "1", "--algo", "uldp-sgd", "--config", str(config), "--format", "json")
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 2, result.stderr
    assert any("--lr" in w for w in warnings) and any("--local-epochs" in w for w in warnings)


# --- divergence -------------------------------------------------------------------------------------


def test_library_stops_at_the_first_non_finite_round() -> None:
    from uldp.trainers.algorithms import TrainConfig
    from uldp.trainers.data import load_dataset

    data = load_dataset("heart-disease", users=8)
    cfg = TrainConfig(algo="uldp-avg", rounds=3, clip=1e308, global_lr=1e308, noise_seed=1)
    with pytest.raises(runner.TrainingDiverged, match="round 1") as caught:
        runner.train(data, cfg)
    assert caught.value.round == 1
    assert "--lr, --global-lr or --clip" in str(caught.value)


def test_cli_stops_at_nan_keeps_the_last_finite_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = runner.evaluate
    calls = []

    def diverging(*args, **kwargs):  # round 2's test loss is NaN, as --global-lr 1e308 gave
        calls.append(1)
        loss, value = real(*args, **kwargs)
        return (float("nan"), value) if len(calls) >= 2 else (loss, value)

    monkeypatch.setattr(runner, "evaluate", diverging)
    metrics = tmp_path / "m.jsonl"
    args = (
        "--rounds",
        "4",
        "--checkpoint",
        str(tmp_path / "ck"),
        "--metrics",
        str(metrics),
        "--format",
        "json",
    )
    result = run(*BASE, *args)  # json: no progress lines, so stderr is the Error line alone
    line = _one_error(result, "round 2", "--global-lr", "round 1")
    assert "diverged" in line
    assert read_checkpoint(tmp_path / "ck" / "checkpoint.pt")["round"] == 1
    assert [json.loads(row)["round"] for row in metrics.read_text().splitlines()] == [1]
    assert not (tmp_path / "ck" / "checkpoint.pt.lock").exists()


# --- locks, signals, stale temporary files ----------------------------------------------------------


def _wait_for(condition, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _long_run(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    checkpoint, metrics = tmp_path / "ck", tmp_path / "m.jsonl"
    args = [*BASE, "--rounds", "100000", "--checkpoint", str(checkpoint), "--metrics", str(metrics)]
    env = {**os.environ, "COLUMNS": "100", "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [*UL, *args, "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    return process, checkpoint, metrics


def test_second_run_on_the_same_files_is_refused_and_sigterm_ends_the_first(tmp_path: Path) -> None:
    process, checkpoint, metrics = _long_run(tmp_path)
    try:
        _wait_for(lambda: (checkpoint / "checkpoint.pt").exists() or process.poll() is not None)
        assert process.poll() is None, process.communicate()
        lock = checkpoint / "checkpoint.pt.lock"
        assert f"pid={process.pid}" in lock.read_text()

        second = run(*BASE, "--checkpoint", str(tmp_path / "ck"), "--resume")
        _one_error(second, "--checkpoint", f"pid {process.pid}")
        other = run(*BASE, "--metrics", str(metrics))
        _one_error(other, "--metrics", f"pid {process.pid}")

        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert "Interrupted after round" in err and "--resume" in err, err
    assert not lock.exists() and not (tmp_path / "m.jsonl.lock").exists()
    leftovers = [p.name for p in [*tmp_path.iterdir(), *checkpoint.iterdir()] if p.name.endswith(".tmp")]
    assert leftovers == []
    # What it says it completed is what the checkpoint holds: a resume continues from there.
    done = read_checkpoint(checkpoint / "checkpoint.pt")["round"]
    assert f"Interrupted after round {done} " in err


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    metrics = tmp_path / "m.jsonl"
    lock = tmp_path / "m.jsonl.lock"
    lock.write_text(f"pid={_dead_pid()}\nhost={os.uname().nodename}\n")
    result = run(*BASE, "--rounds", "1", "--metrics", str(metrics))
    assert result.exit_code == 0, result.stderr
    assert metrics.exists() and not lock.exists()


def test_lock_of_a_live_process_is_refused(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "m.jsonl.lock").write_text(f"pid={holder.pid}\nhost={os.uname().nodename}\n")
        _one_error(run(*BASE, "--metrics", str(tmp_path / "m.jsonl")), "--metrics", f"pid {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
    assert (tmp_path / "m.jsonl.lock").exists()  # not ours: left alone


def test_stale_temp_files_of_a_killed_writer_are_removed_on_the_next_run(tmp_path: Path) -> None:
    metrics = tmp_path / "m.jsonl"
    dead = tmp_path / f".m.jsonl.{_dead_pid()}.abcd1234.tmp"
    dead.write_bytes(b"x" * 1000)
    unrelated = tmp_path / ".m.jsonl.backup"
    unrelated.write_text("mine")
    result = run(*BASE, "--rounds", "1", "--metrics", str(metrics))
    assert result.exit_code == 0, result.stderr
    assert not dead.exists() and unrelated.exists()
