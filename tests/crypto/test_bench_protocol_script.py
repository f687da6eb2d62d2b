"""benchmarks/bench_protocol.py: small (insecure) keys only behind an explicit --test-keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_protocol.py"
TINY = ["--silos", "2", "--users", "3", "--params", "2", "--straightforward-users", "1", "--workers", "1"]


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *TINY, *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("bits", ["512", "1024", "2046"])
def test_key_below_2048_bits_is_refused_without_test_keys(bits):
    result = bench("--key-bits", bits, "--format", "json")
    assert result.returncode == 2
    assert result.stdout == ""
    last = result.stderr.strip().splitlines()[-1]
    assert "--key-bits" in last and "insecure" in last and "--test-keys" in last
    assert "Traceback" not in result.stderr


def test_invalid_key_size_is_refused_even_with_test_keys():
    result = bench("--key-bits", "511", "--test-keys")
    assert result.returncode == 2 and "even" in result.stderr and "Traceback" not in result.stderr


def test_test_keys_flag_runs_and_says_so():
    result = bench("--key-bits", "512", "--test-keys", "--format", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["key_bits"] == 512 and report["test_keys"] is True
    assert report["verified"] is True
    assert report["aggregate_max_error"] <= report["tolerance"]
    auth = report["authentication"]  # 2 silos: 6 messages each, and the sealed seed twice
    assert auth["messages"] == 14 and 0 < auth["seconds"] < auth["protocol_seconds"]
    assert auth["setup_seconds"] + auth["round_seconds"] == pytest.approx(auth["seconds"])
    table = bench("--key-bits", "512", "--test-keys")
    assert table.returncode == 0 and "TEST KEY, INSECURE" in table.stdout
    assert "authentication (all parties: keying channels, tagging, verifying 14 messages)" in table.stdout
