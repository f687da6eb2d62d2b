"""`uldp train --engine flower` as a user runs it: the same rounds as `--engine local`, and the
refusals (a missing extra, an option the engine cannot honour) in one line with status 2."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from uldp.cli.main import cli

ARGS = ["train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "2", "--noise-seed", "1"]


def test_ctrl_c_stops_a_flower_run_whose_rounds_are_the_local_runs(tmp_path):
    """One simulated run, stopped by Ctrl-C after a few rounds: the CLI's one line and status 130,
    no Ray process left, and the rounds it finished equal `--engine local`'s."""
    pytest.importorskip("flwr", reason="the 'flower' extra is not installed")  # CI installs it
    flower_metrics, local_metrics = tmp_path / "flower.jsonl", tmp_path / "local.jsonl"
    args = [*ARGS[:-4], "--noise-seed", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "uldp.cli", *args, "--rounds", "5000", "--engine", "flower"]
        + ["--metrics", str(flower_metrics)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # a line per round (no terminal)
            if "round    3/5000" in line:
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Interrupted after round" in err and "Traceback" not in err
    assert not _ray_processes_after(seconds=30)
    flower = [json.loads(line) for line in flower_metrics.read_text().splitlines()]
    assert len(flower) >= 3
    # In process: the reference run needs no signal, and a second interpreter costs seconds of imports.
    local = CliRunner().invoke(cli, [*args, "--rounds", str(len(flower)), "--metrics", str(local_metrics)])
    assert local.exit_code == 0, local.output
    for x, y in zip(flower, (json.loads(line) for line in local_metrics.read_text().splitlines())):
        for key in y:
            if key != "elapsed_s":
                assert x[key] == pytest.approx(y[key], rel=1e-6, abs=1e-6), key


def _ray_processes_after(seconds: float) -> list[str]:
    """The command lines of this checkout's Ray processes still running `seconds` from now, or
    none as soon as they are gone: Ray's shutdown signals its raylet and workers without waiting
    for them (`kill_all_processes(wait=False)`), so on a busy machine they outlive the CLI by a
    moment; one that outlives this wait was orphaned."""
    deadline = time.monotonic() + seconds
    while True:
        left = [text for p in Path("/proc").glob("[0-9]*/cmdline") if (text := _ray_cmdline_of_ours(p))]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _ray_cmdline_of_ours(cmdline: Path) -> str:
    """The command line of a Ray worker or service running from this checkout's interpreter, or ""."""
    try:
        text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
    ours = sys.executable in text and ("ray::" in text or "ray/_private" in text or "raylet" in text)
    return text if ours else ""


def test_missing_flower_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "flwr.simulation", None)  # as if flwr were not installed
    result = CliRunner().invoke(cli, [*ARGS, "--engine", "flower"])
    assert result.exit_code == 2
    assert "needs the 'flower' extra" in result.output
    assert "pip install -e '.[flower]'" in result.output
    assert "Traceback" not in result.output


def test_flower_engine_refuses_cuda():
    result = CliRunner().invoke(cli, [*ARGS, "--engine", "flower", "--device", "cuda"])
    assert result.exit_code == 2
    assert "--engine flower trains every silo in its own worker on the CPU" in result.output
