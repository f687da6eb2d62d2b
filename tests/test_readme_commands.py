"""Every `uldp` command the README shows outside its console blocks runs as written.

tests/test_docs.py re-runs the console blocks (command and output); this file covers the rest: the
commands quoted inline in the README's prose and the lines of its ```bash blocks. Each is found
by parsing README.md, so a command added there must be classified here (`HOW`) or
`test_every_readme_command_is_classified` fails:

* quick ones run as written on every test run, in-process, in a scratch folder where `examples/`
  is the repository's (the README's paths are relative to the checkout);
* long ones (training, 3072-bit Paillier, Ray) run as written, in a subprocess, only with
  ULDP_DOC_SLOW=1 (as test_docs.py's slow blocks), with the time they took on a quiet 2-core
  machine in the reason; their code paths are exercised at a small size elsewhere
  on every run (named in `HOW`);
* mentions (`uldp report`, `uldp train --algo dp-fedavg-robust` before its full command) are
  names, not commands, and are listed as such.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.doc_blocks import REPO
from uldp.cli.main import cli

README = REPO / "README.md"
SLOW_ENABLED = os.environ.get("ULDP_DOC_SLOW") == "1"

QUICK = "quick"
MENTION = "mention"

#: (a command's beginning, how it is tested): the first matching beginning wins. A long command's
#: entry is the reason it runs only with ULDP_DOC_SLOW=1, with its time (a quiet 2-core machine).
HOW: tuple[tuple[str, str], ...] = (
    ("uldp account --algo uldp-avg --sigma 5", QUICK),
    ("uldp calibrate --epsilon 3", QUICK),
    ("uldp personalize --epsilon-csv examples/budgets.csv", QUICK),
    (
        "uldp dropout --sigma 1",
        "2 s (1,000 rounds at 3 dropout rates, calibrated and not); "
        "tests/cli/test_dropout_cli.py runs the same tables at small sizes",
    ),
    (
        "uldp subject --",
        "1 s (100 rounds, the federation's composition); tests/cli/test_subject_cli.py runs it small",
    ),
    (
        "uldp report --sigma 5 --q 0.01 --steps 100000",
        "7 s (1e5 steps by RDP, PLD and PRV, and the group bounds); docs/report.md's blocks run "
        "the same statement",
    ),
    (
        "uldp report --run",
        "3 s (a run's statement by three accountants); needs the training run before it",
    ),
    (
        "uldp bench protocol --params 16,50,107",
        "about 5 min (9 cells of 3072-bit Paillier); tests/cli/test_bench_cli.py runs the same "
        "path with test keys, its progress lines and its signals",
    ),
    ("uldp train --algo uldp-avg --dataset mnist", "11 s (a CNN on MNIST)"),
    ("uldp train --algo rpdp", "6 s (rPDP-FL on heart-disease, 5 rounds)"),
    ("uldp train --algo dp-fedavg-robust --dataset", "10 s (200 silos, Protocol 1 with dropouts)"),
    ("uldp train --algo higradavgdp", "8 s (MNIST, 16 silos)"),
    ("uldp train --algo uldp-avg --dataset heart-disease", "5 s (3 rounds); writes hd.jsonl"),
    (
        "uldp train --algo uldp-avg --data examples/own_data.py:load",
        "10 s (your own CNN on 1,200 images, 5 rounds); tests/test_library_training.py runs the same "
        "references small",
    ),
    ("uldp audit --algo uldp-avg", "6 s (400 users, 200 canaries)"),
    (
        "uldp train --algo uldp-avg-w --dataset heart-disease --users 20 --rounds 2 --secure "
        "--private-sampling",
        "19 s (3072-bit Paillier keys, then 2 rounds with the oblivious transfer); "
        "tests/trainers/test_private_sampling_training.py runs the same code with test keys",
    ),
    (
        "uldp train --algo uldp-avg-w --dataset heart-disease --rounds 2 --secure --engine flower",
        "about 2 min (starts Ray and a ClientApp per silo); tests/flower runs the engine",
    ),
)

#: Names in running text, not commands (matched whole).
MENTIONS = frozenset(
    {
        "uldp train --algo dp-fedavg-robust",  # its full command is the ```bash block below it
        "uldp personalize --out",
        "uldp personalize --level user",
        "uldp subject --algo ... --holdings",
        "uldp account --private-sampling",  # the flag, named; docs/account.md runs it
    }
)

_BARE = re.compile(r"uldp(?: [a-z]+){0,2}")  # `uldp`, `uldp report`, `uldp bench protocol`: names


def readme_commands(text: str | None = None) -> list[str]:
    """The README's `uldp` commands outside console blocks: inline code in its prose (joined
    over line breaks) and the lines of its ```bash blocks, in order, each once."""
    text = README.read_text(encoding="utf-8") if text is None else text
    prose: list[str] = []
    commands: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence is None:
            prose.append(line)
        elif fence == "bash" and line.startswith("uldp "):
            commands.append(line.split("  #")[0].strip())  # `  # ~35 s`: the time it takes
    for span in re.findall(r"`(uldp [^`]*)`", "\n".join(prose)):
        command = " ".join(span.split())
        if not _BARE.fullmatch(command):
            commands.append(command)
    return list(dict.fromkeys(commands))


def how(command: str) -> str | None:
    if command in MENTIONS:
        return MENTION
    return next((way for start, way in HOW if command.startswith(start)), None)


COMMANDS = readme_commands()


def test_every_readme_command_is_classified() -> None:
    assert COMMANDS, "no uldp command found in README.md"
    assert [c for c in COMMANDS if how(c) is None] == []


def test_every_entry_names_a_readme_command() -> None:
    """A command changed in the README must not leave an entry that tests nothing."""
    for start, _ in HOW:
        assert any(c.startswith(start) and c not in MENTIONS for c in COMMANDS), start
    assert MENTIONS <= set(COMMANDS)


def test_parser_reads_inline_commands_over_line_breaks_and_bash_lines() -> None:
    text = "Try `uldp bench protocol --params 16\n  --plot f.png` or `uldp report`.\n"
    text += "```bash\nuldp x --y  # ~3 s\n```\n"
    assert readme_commands(text) == ["uldp x --y", "uldp bench protocol --params 16 --plot f.png"]


def _prepared(cwd: Path) -> Path:
    (cwd / "examples").symlink_to(REPO / "examples")
    return cwd


@pytest.mark.parametrize("command", [c for c in COMMANDS if how(c) == QUICK], ids=str)
def test_quick_command_runs_as_written(command: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(_prepared(tmp_path))
    result = CliRunner().invoke(cli, shlex.split(command)[1:], prog_name="uldp")
    assert result.exit_code == 0, result.output
    assert "Error" not in result.output


def _slow(command: str) -> object:
    reason = how(command)
    return pytest.param(
        command,
        id=command,
        marks=[
            pytest.mark.slow,
            pytest.mark.skipif(not SLOW_ENABLED, reason=f"takes {reason}: set ULDP_DOC_SLOW=1"),
        ],
    )


@pytest.mark.parametrize("command", [_slow(c) for c in COMMANDS if how(c) not in (QUICK, MENTION)], ids=str)
def test_long_command_runs_as_written_and_says_what_it_is_doing(command: str, tmp_path: Path) -> None:
    cwd = _prepared(tmp_path)
    if command.startswith("uldp report --run hd.jsonl"):  # the README's training run comes first
        first = next(c for c in COMMANDS if "--metrics hd.jsonl" in c)
        subprocess.run(
            [str(Path(sys.executable).parent / "uldp"), *shlex.split(first)[1:]], cwd=cwd, check=True
        )
    argv = [str(Path(sys.executable).parent / "uldp"), *shlex.split(command)[1:]]
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if command.startswith(("uldp train", "uldp audit", "uldp bench")):
        # Not a terminal: a line per round (train, audit) or per cell (bench) on stderr as it goes.
        assert re.search(r"round +1/|cell 1/", proc.stderr), proc.stderr
