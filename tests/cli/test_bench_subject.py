"""benchmarks/bench_subject_level.py: the quick run gives a report of the documented shape, and its
reference loop over subjects agrees with HiGradAvgDP's vectorised per-subject average."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_subject_level.py"


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def script():
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("bench_subject_level", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_loop_reference_equals_the_vectorised_average():
    bench_module = script()
    import numpy as np
    import torch

    torch.manual_seed(0)
    flat = torch.randn(7, 5)
    owners = np.array([3, 9, 3, 3, 1, 9, 4])
    clip = 0.5
    clipped = flat * torch.clamp(clip / flat.norm(dim=1, keepdim=True), max=1.0)
    expected = clipped[[0, 2, 3]].mean(0) + clipped[[1, 5]].mean(0) + clipped[4] + clipped[6]
    signals = bench_module.SIGNALS
    assert torch.allclose(signals["loop"](flat, clip, owners), expected, atol=1e-6)
    assert torch.allclose(signals["subject"](flat, clip, owners), expected, atol=1e-6)
    assert torch.allclose(signals["item"](flat, clip, owners), clipped.sum(0), atol=1e-6)


def test_quick_json_report_has_every_setting_checked():
    pytest.importorskip("torch")
    pytest.importorskip("mlxtend")
    pytest.importorskip("pandas")
    result = bench("--quick", "--threads", "1", "--format", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {"benchmark", "date", "data", "machine", "settings", "verified", "goal"} <= set(report)
    assert {"machine", "nproc", "torch", "threads", "load_average"} <= set(report["machine"])
    assert report["machine"]["threads"] == 1
    assert report["verified"] is True
    settings = report["settings"]
    assert [(r["model"], r["batch"], r["users"]) for r in settings] == [
        ("logistic", 64, 10),
        ("logistic", 64, 1000),
    ]
    for row in settings:
        assert row["steps"] == 2 and row["member_items"] == 4000
        assert row["batch_check"]["allclose"] and row["round_check"]["allclose"]
        for key in ("seconds", "cpu_seconds", "clip_combine_us"):
            assert set(row[key]) == {"item", "subject", "loop"}
            assert all(value > 0 for value in row[key].values())
        assert all(len(times) == 2 for times in row["all_seconds"].values())
        assert row["subject_over_item"] == pytest.approx(
            row["seconds"]["subject"] / row["seconds"]["item"], 1e-2
        )
    few, many = settings
    assert few["subjects_per_batch"] <= 10 < many["subjects_per_batch"]
    assert report["goal"]["limit"] == 1.5 and isinstance(report["goal"]["met"], bool)


def test_bad_arguments():
    pytest.importorskip("torch")
    bad = bench("--steps", "0")
    assert bad.returncode == 2 and "--steps must be >= 1" in bad.stderr
