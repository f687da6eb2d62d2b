"""examples/compare-personalized.sh, run as a user runs it, on a tiny setting (issue 14 point 4).

The real heart-disease config with 2 rounds of 2 DP-SGD steps: rpdp, unidp and default run with
the same budgets and noise seed, and the script writes the table (every algorithm, the per-tier
epsilons next to the budgets, the figures of the runs' own JSON) and one PNG.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "compare-personalized.sh"
CONFIG = ROOT / "examples" / "rpdp-heart-disease.yaml"


def _env(**extra: str) -> dict[str, str]:
    # The venv's uldp and python first on the PATH, as after `. .venv/bin/activate`.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "COLUMNS": "100", **extra}


def _run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=ROOT, env=_env(**extra), capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("personalized")
    proc = _run(
        str(CONFIG),
        str(out),
        "three-levels",
        EXTRA="--rounds 2",
        RPDP_FLAGS="--local-steps 2",
        UNIDP_FLAGS="--local-steps 2",
    )
    assert proc.returncode == 0, proc.stderr
    return out


def _table(out: Path) -> dict[str, dict[str, str]]:
    lines = (out / "table.md").read_text().splitlines()
    rows = [
        [cell.strip() for cell in line.strip("|").split(" | ")] for line in lines if line.startswith("| ")
    ]
    header = rows[0]
    return {row[0]: dict(zip(header, row)) for row in rows[1:]}


def test_the_table_has_the_three_algorithms_with_their_runs_figures(tiny: Path) -> None:
    table = _table(tiny)
    assert list(table) == ["rpdp", "unidp", "default"]
    for algo, row in table.items():
        doc = json.loads((tiny / f"{algo}-seed1.json").read_text())
        summary, history = doc["summary"], doc["history"]
        assert summary["rounds"] == 2 and len(history) == 2
        assert row["final accuracy"] == f"{history[-1]['accuracy']:.3f}"
        last3 = sum(h["accuracy"] for h in history[-3:]) / len(history[-3:])
        assert row["accuracy, mean of last 3 rounds"] == f"{last3:.3f}"
    # ThreeLevels: one column per budget; rpdp spends each tier's budget, unidp the smallest for all.
    assert table["rpdp"]["records over budget"] == "0 of 591"
    assert table["unidp"]["records over budget"] == "0 of 591"
    assert table["default"]["records over budget"] == "591 of 591"
    rpdp = {b: table["rpdp"][f"epsilon (rate q), budget {b}"].split() for b in ("0.1", "1", "5")}
    assert all(0.95 * float(b) < float(cell[0]) <= float(b) for b, cell in rpdp.items())
    assert rpdp["5"][1:] == ["(q", "1)"]  # the largest budget is spent at q = 1 (sigma calibrated)
    unidp = {table["unidp"][f"epsilon (rate q), budget {b}"] for b in ("0.1", "1", "5")}
    assert len(unidp) == 1  # one rate for every record
    assert float(table["unidp"]["epsilon (rate q), budget 5"].split()[0]) <= 0.1
    assert table["default"]["epsilon (rate q), budget 5"] == "unbounded"
    assert table["default"]["sigma"] == "none (no noise)"


def test_one_png_is_written(tiny: Path) -> None:
    pngs = sorted(p.name for p in tiny.glob("*.png"))
    assert pngs == ["compare.png"]
    assert (tiny / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tiny.glob("*.tmp")) and not list(tiny.glob(".*"))


def test_a_missing_config_is_one_error_line(tmp_path: Path) -> None:
    proc = _run(str(tmp_path / "nope.yaml"), str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"Error: CONFIG: no such file: {tmp_path / 'nope.yaml'}"]
