"""A new user's first commands after README.md's set-up (issue 11, point 3): the venv is
activated once, and the example script finds the checkout's venv even when it is not."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "compare-algorithms.sh"
BARE_PATH = "/usr/bin:/bin"  # no venv on it, as in a fresh shell


def _checkout(tmp_path: Path, *, venv: bool) -> Path:
    """A copy of the script (and the `find-uldp.sh` it sources) in `tmp_path/examples`, with a
    stand-in `.venv/bin/uldp` that only records how it was called (and fails, ending the script
    there)."""
    (tmp_path / "examples").mkdir()
    for script in (SCRIPT, SCRIPT.with_name("find-uldp.sh")):
        shutil.copy(script, tmp_path / "examples" / script.name)
    if venv:
        bin_dir = tmp_path / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        fake = bin_dir / "uldp"
        fake.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/called"\nexit 3\n', encoding="utf-8")
        fake.chmod(0o755)
    return tmp_path


def _run(checkout: Path) -> subprocess.CompletedProcess[str]:
    assert shutil.which("uldp", path=BARE_PATH) is None
    env = {"PATH": BARE_PATH, "HOME": str(checkout)}
    return subprocess.run(
        ["bash", str(checkout / "examples" / SCRIPT.name), "examples/x.yaml", str(checkout / "out"), "5"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_example_script_finds_the_checkouts_venv_when_none_is_active(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path, venv=True)
    proc = _run(checkout)
    assert "command not found" not in proc.stderr
    called = (checkout / "called").read_text(encoding="utf-8").split()
    assert called[:3] == ["train", "--config", "examples/x.yaml"]
    assert proc.returncode == 3  # the stand-in's own status: the script did run it


def test_without_any_uldp_the_script_says_how_to_get_one(tmp_path: Path) -> None:
    proc = _run(_checkout(tmp_path, venv=False))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "Error: no uldp command: activate the venv (. .venv/bin/activate) or set ULDP=/path/to/uldp"
    ]


def test_readme_set_up_activates_the_venv_once_after_the_one_line_installs() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = text[text.index("## Set up and run") : text.index("## A short tour")]
    commands = [line for line in setup.splitlines() if line.startswith(("python3 -m venv", ". .venv"))]
    assert len(commands) == 3
    first, second, activate = commands
    assert first.endswith(
        "&& .venv/bin/uldp account --sigma 5 --q 0.01 --steps 100000 "
        "--k 1,2,4,8,16,32,64 --group-method rdp,normal,pld"
    )
    assert second.endswith(
        "&& .ci/static-checks && .venv/bin/python -m pytest -q -rfE -n 2 --dist loadgroup tests"
    )
    # ... which is what CI runs.
    assert second.split("&& ")[-1] in (ROOT / ".ci" / "run").read_text(encoding="utf-8").replace(
        '"$PY"', ".venv/bin/python"
    )
    assert activate == ". .venv/bin/activate"
    assert os.access(SCRIPT, os.X_OK)
