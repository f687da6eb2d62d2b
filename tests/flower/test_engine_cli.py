"""`uldp train --engine flower` as a user runs it: the same rounds as `--engine local`, and the
refusals (a missing extra, an option the engine cannot honour) in one line with status 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from uldp.cli.main import cli

ARGS = ["train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "2", "--noise-seed", "1"]


def uldp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uldp.cli", *args], capture_output=True, text=True, timeout=600
    )


def test_flower_simulation_prints_the_rounds_of_the_local_run():
    pytest.importorskip("flwr", reason="the 'flower' extra is not installed")  # CI installs it
    flower = uldp(*ARGS, "--engine", "flower", "--format", "json")
    local = uldp(*ARGS, "--format", "json")
    assert flower.returncode == 0, flower.stderr
    assert local.returncode == 0, local.stderr
    a, b = json.loads(flower.stdout), json.loads(local.stdout)
    assert len(a["history"]) == len(b["history"]) == 2
    for x, y in zip(a["history"], b["history"]):
        for key in y:
            if key != "elapsed_s":
                assert x[key] == pytest.approx(y[key], rel=1e-6, abs=1e-6), key
    assert a["summary"]["epsilon"] == b["summary"]["epsilon"]
    assert "Flower's simulation engine" in a["assumptions"]["engine"]
    assert flower.stderr == ""  # Flower's and Ray's logs stay out of the user's way


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
