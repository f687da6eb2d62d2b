"""`uldp train --engine flower` as a user runs it: the same rounds as `--engine local`, and the
refusals (a missing extra, an option the engine cannot honour) in one line with status 2."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tests.flower.leftovers import marked_env, new_mark, processes_marked
from uldp.cli.main import cli

ARGS = ["train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "2", "--noise-seed", "1"]


@pytest.mark.slow  # starts Ray and trains 3 rounds on it: 40-60 s
def test_ctrl_c_stops_a_flower_run_whose_rounds_are_the_local_runs(tmp_path):
    """One simulated run, stopped by Ctrl-C after a few rounds: its start-up's stages, one line
    each (no terminal); the CLI's one line and status 130; no Ray process left the moment it has
    exited (issue 34: a log_monitor outlived it by 30 s); and the rounds it finished equal
    `--engine local`'s."""
    pytest.importorskip("flwr", reason="the 'flower' extra is not installed")  # CI installs it
    flower_metrics, local_metrics = tmp_path / "flower.jsonl", tmp_path / "local.jsonl"
    args = [*ARGS[:-4], "--noise-seed", "1"]
    mark = new_mark()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uldp.cli", *args, "--rounds", "5000", "--engine", "flower"]
        + ["--metrics", str(flower_metrics)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=marked_env(mark),
    )
    seen = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # a line per stage and per round (no terminal)
            seen.append(line.rstrip("\n"))
            if "round    3/5000" in line:
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Interrupted after round" in err and "Traceback" not in err and "\x1b[" not in err
    assert processes_marked(mark) == []
    stages = [line.split(": ", 1)[1] for line in seen[:6]]
    assert stages[:2] == ["loading Flower and Ray...", "starting Ray..."], seen
    assert stages[2].startswith("Ray started in "), seen
    assert stages[3] == "setting up 4 silos (their ClientApps, their data)...", seen
    assert stages[4].startswith("4 silos set up in ") and stages[5].startswith("engine start-up: "), seen
    assert seen[6].startswith("uldp-avg on heart-disease: round    1/5000"), seen
    flower = [json.loads(line) for line in flower_metrics.read_text().splitlines()]
    assert len(flower) >= 3
    # In process: the reference run needs no signal, and a second interpreter costs seconds of imports.
    local = CliRunner().invoke(cli, [*args, "--rounds", str(len(flower)), "--metrics", str(local_metrics)])
    assert local.exit_code == 0, local.output
    for x, y in zip(flower, (json.loads(line) for line in local_metrics.read_text().splitlines())):
        for key in y:
            if key != "elapsed_s":
                assert x[key] == pytest.approx(y[key], rel=1e-6, abs=1e-6), key


@pytest.mark.slow  # starts Ray and trains 3 rounds on it: 30-60 s
def test_sigterm_stops_a_flower_run_as_ctrl_c_does(tmp_path):
    """issue 34: `ray.init` replaced the CLI's SIGTERM handler, so a Flower run died with status
    15 and no resume line. Now: the one "Stopped by SIGTERM" line, what was spent, the resume
    command, status 143, and no Ray process left."""
    pytest.importorskip("flwr", reason="the 'flower' extra is not installed")  # CI installs it
    checkpoint = tmp_path / "run"
    mark = new_mark()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uldp.cli", *ARGS[:-4], "--rounds", "5000", "--engine", "flower"]
        + ["--checkpoint", str(checkpoint)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=marked_env(mark),
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "round    3/5000" in line:
                break
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.count("Stopped by SIGTERM") == 1, err
    assert "Interrupted after round" in err and "Traceback" not in err, err
    assert f"with: uldp {' '.join(ARGS[:-4])} --rounds 5000" in err and err.rstrip().endswith("--resume"), err
    assert processes_marked(mark) == []


def test_missing_flower_extra_names_it(monkeypatch):
    import builtins

    import torch  # noqa: F401 - imported before the patch, which slows every import

    real_import = builtins.__import__

    def without_flwr(name, *args, **kwargs):  # as if flwr were not installed
        if name == "flwr" or name.startswith("flwr."):
            raise ModuleNotFoundError("No module named 'flwr'", name="flwr")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_flwr)
    result = CliRunner().invoke(cli, [*ARGS, "--engine", "flower"])
    assert result.exit_code == 2
    assert "needs the 'flower' extra" in result.output
    assert "pip install -e '.[flower]'" in result.output
    assert "Traceback" not in result.output


def test_flower_engine_refuses_cuda():
    result = CliRunner().invoke(cli, [*ARGS, "--engine", "flower", "--device", "cuda"])
    assert result.exit_code == 2
    assert "--engine flower trains every silo in its own worker on the CPU" in result.output
