"""benchmarks/bench_secagg.py: the smoke run gives a report of the documented shape."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_secagg.py"


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_quick_json_report_has_every_point_for_both_implementations():
    pytest.importorskip("flwr")
    result = bench("--quick", "--format", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {"machine", "date", "flwr", "threshold_rule", "points", "verified", "goal", "seconds"} <= set(
        report
    )
    assert report["verified"] is True
    assert [(p["n"], p["d"], p["dropout"]) for p in report["points"]] == [
        (5, 1000, 0.0),
        (5, 1000, 0.2),
        (8, 1000, 0.0),
        (8, 1000, 0.2),
    ]
    for point in report["points"]:
        assert point["threshold"] == point["n"] // 2 + 1
        assert point["dropped"] == round(point["n"] * point["dropout"])
        ours = point["ours"]
        assert {
            "server_s",
            "participant_s",
            "participant_mask_s",
            "wire_server_s",
            "wire_participant_s",
        } <= set(ours)
        assert 0 < ours["participant_mask_s"] <= ours["participant_s"]
        for name in ("ours", "flower", "flower_sparse"):
            assert point[name]["verified"] is True and point[name]["server_s"] > 0
        assert point["flower"]["server_combine_s"] <= point["flower"]["server_s"]
    assert isinstance(report["goal"]["no_slower_than_flower"], bool)
    assert report["repeat"] == 3 and report["goal"]["participant_mask_fit"] == []  # one d: nothing to fit


def test_ours_alone_and_bad_arguments():
    result = bench(
        "--no-flower", "--n", "3", "--d", "10", "2000", "--dropout", "0", "--repeat", "1", "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["flwr"] is None and report["goal"]["no_slower_than_flower"] is None
    assert list(report["points"][0]) == ["n", "d", "dropout", "dropped", "threshold", "ours"]
    (fit,) = report["goal"]["participant_mask_fit"]
    assert fit["n"] == 3 and {"ns_per_word_and_stream", "us_per_stream"} <= set(fit)
    bad = bench("--n", "1", "--no-flower")
    assert bad.returncode == 2 and "--n must be >= 2" in bad.stderr
