"""examples/compare-dropout.sh, run as a user runs it, on a tiny setting (issue 15 point 4).

The real MNIST config (dp-fedavg-robust, 500 participants at q = 0.1) cut to 2 rounds of a
logistic model: no dropouts, and 30% with and without calibration, for one noise seed. The table
holds each run's own figures, calibration keeps the target, and one PNG is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "compare-dropout.sh"
CONFIG = ROOT / "examples" / "dropout-robust-mnist.yaml"


def _run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "COLUMNS": "100", **extra}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dropout")
    proc = _run(str(CONFIG), str(out), DROPOUTS="0 0.3", EXTRA="--rounds 2 --model logistic")
    assert proc.returncode == 0, proc.stderr
    return out


def _rows(out: Path) -> list[dict[str, str]]:
    lines = (out / "table.md").read_text().splitlines()
    table = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines if line.startswith("| ")]
    header = table[0]
    rows = []
    for row in table[1:]:
        if row[0] == "dropout":  # the second table (the cost of calibration) starts here
            break
        if set(row[0]) != {"-"}:
            rows.append(dict(zip(header, row)))
    return rows


def test_the_table_holds_each_runs_own_figures(tiny: Path) -> None:
    rows = _rows(tiny)
    assert [(r["dropout"], r["calibration"]) for r in rows] == [("0", "yes"), ("0.3", "yes"), ("0.3", "no")]
    for row, name in zip(
        rows, ("dropout0-calibration", "dropout0.3-calibration", "dropout0.3-no-calibration")
    ):
        summary = json.loads((tiny / f"{name}-seed1.json").read_text())["summary"]
        assert row["epsilon (model)"] == f"{summary['epsilon']:.3f}"
        assert row["target epsilon"] == f"{summary['target_epsilon']:.3f}"
    # Calibration keeps the target; without it the same dropouts spend more.
    assert rows[1]["epsilon (model)"] == rows[1]["target epsilon"] == rows[0]["epsilon (model)"]
    assert float(rows[2]["epsilon (model)"]) > float(rows[2]["target epsilon"])


def test_one_png_is_written_and_nothing_half_done(tiny: Path) -> None:
    assert sorted(p.name for p in tiny.glob("*.png")) == ["compare.png"]
    assert (tiny / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tiny.glob("*.tmp"))


def test_a_missing_config_is_one_error_line(tmp_path: Path) -> None:
    proc = _run(str(tmp_path / "nope.yaml"), str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"Error: CONFIG: no such file: {tmp_path / 'nope.yaml'}"]
