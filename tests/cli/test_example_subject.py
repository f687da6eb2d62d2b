"""examples/subject-mnist.yaml and examples/compare-subject.sh, cut to one round.

The config (Marathe & Kanani's Fig. 1 setting on MNIST, docs/results.md) is valid for each of the
five algorithms the comparison runs: each trains one round, the private ones meet the budget they
are calibrated to (the worst subject's federation-wide epsilon; LocalItemDP's item-level one),
and the mini-batch statistics the docs report are there. The script, run as a user runs it on a
tiny setting, writes its table from the runs' own figures and both PNGs, nothing half done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from uldp.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "compare-subject.sh"
CONFIG = ROOT / "examples" / "subject-mnist.yaml"
PRIVATE = ("localitemdp", "higradavgdp", "localgroupdp", "userldp")


def _train(algo: str) -> dict:
    result = CliRunner().invoke(
        cli,
        [
            "train",
            "--config",
            str(CONFIG),
            "--algo",
            algo,
            "--rounds",
            "1",
            "--noise-seed",
            "1",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("algo", ("default", *PRIVATE))
def test_the_config_trains_each_algorithm(algo: str) -> None:
    doc = _train(algo)
    summary, last = doc["summary"], doc["history"][-1]
    config = yaml.safe_load(CONFIG.read_text())
    assert (summary["algo"], summary["users"], summary["silos"], summary["rounds"]) == (
        algo,
        config["users"],
        config["silos"],
        1,
    )
    assert 0 <= summary["final_accuracy"] <= 1
    if algo == "default":
        assert last["epsilon"] is None
        return
    target = config["epsilon"]
    assert summary["epsilon_target"] == target
    assert 0 < summary["item_q"] <= 1
    own = last["item_epsilon"] if algo == "localitemdp" else last["subject_epsilon_federation"]
    assert last["epsilon"] == own
    assert target * 0.99 < own <= target  # calibrated to the budget, and within it
    assert last["subject_epsilon_member"] <= last["subject_epsilon_federation"]
    if algo == "localgroupdp":
        assert last["item_epsilon"] < target and summary["group_size"] >= 1
    if algo == "userldp":
        assert last["user_ldp_epsilon"] > 0
    # Fig. 1(c)/(d): one count per mini-batch of every member (16 members, 1 local step).
    assert (
        sum(summary["batch_z"].values())
        == sum(summary["batch_subjects"].values())
        == 16 * config["local-steps"]
    )


def _script(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, **extra}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def _tables(out: Path) -> list[list[dict[str, str]]]:
    tables: list[list[dict[str, str]]] = []
    header: list[str] | None = None
    for line in (out / "table.md").read_text().splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if header is None:
            header = cells
            tables.append([])
        elif not set(line.strip()) <= set("|-"):  # not the |---|---| line under the header
            tables[-1].append(dict(zip(header, cells)))
    return tables


def test_the_script_writes_its_tables_and_plots(tmp_path: Path) -> None:
    out, figures = tmp_path / "out", tmp_path / "figures"
    proc = _script(
        str(CONFIG),
        str(out),
        ALGOS="higradavgdp default",
        ALPHAS="16",
        ALPHA_ALGOS="localgroupdp",
        EXTRA="--rounds 1",
        FIGURES=str(figures),
    )
    assert proc.returncode == 0, proc.stderr
    main, batches, alpha = _tables(out)
    assert [row["algorithm"] for row in main] == ["higradavgdp", "default"]
    summary = json.loads((out / "main-higradavgdp-seed1.json").read_text())["summary"]
    history = [json.loads(line) for line in (out / "main-higradavgdp-seed1.jsonl").read_text().splitlines()]
    assert main[0]["final accuracy"] == f"{summary['final_accuracy']:.3f}"
    assert main[0]["epsilon (subject, federation)"] == f"{history[-1]['subject_epsilon_federation']:.2f}"
    assert main[1]["sigma"] == "- (no noise)" and main[1]["epsilon (subject, federation)"] == "-"
    assert [row["algorithm"] for row in batches] == ["higradavgdp"]
    assert [(row["alpha"], row["algorithm"]) for row in alpha] == [("16", "localgroupdp")]
    swept = json.loads((out / "alpha16-localgroupdp-seed1.json").read_text())["summary"]
    assert alpha[0]["Z"] == str(swept["group_size"])
    for name in ("subject-mnist.png", "subject-alpha.png"):
        assert (figures / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(out.glob("*.tmp"))


def test_a_missing_config_is_one_error_line(tmp_path: Path) -> None:
    proc = _script(str(tmp_path / "nope.yaml"), str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"Error: CONFIG: no such file: {tmp_path / 'nope.yaml'}"]
