"""benchmarks/per_user_training.py: one setting alone gives JSON naming the seconds per round of the
loop, the batched path and the floor, and bad selections are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "per_user_training.py"


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_one_setting_alone_names_loop_batched_and_floor():
    # The MLP at 30 users: a setting not in SETTINGS, run alone because all three are given (the loop
    # over 30 users costs seconds where 300 cost a minute; what is checked is the report's shape).
    run = bench(
        "--model", "mlp", "--users", "30", "--local-epochs", "1", "--repeats", "1", "--format", "json"
    )
    assert run.returncode == 0, run.stderr
    (row,) = json.loads(run.stdout)["settings"]
    assert (row["model"], row["users"], row["local_epochs"], row["silos"]) == ("mlp", 30, 1, 5)
    seconds = row["seconds_per_round"]
    assert set(seconds) == {"loop", "batched", "floor"} and all(v > 0 for v in seconds.values())
    # The ratio is computed before the seconds are rounded to 4 decimals.
    assert row["loop_over_batched"] == pytest.approx(seconds["loop"] / seconds["batched"], rel=0.02)
    assert row["batched_path"] == "vmap" and row["floor_batch"] == 1024
    assert row["max_abs_diff_clipped"] < 1e-5


def test_a_selection_that_matches_nothing_is_refused():
    run = bench("--model", "cnn", "--users", "7")
    assert run.returncode == 2
    assert "no setting matches" in run.stderr
