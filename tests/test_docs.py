"""Every console block of README.md and docs/*.md, re-run and compared with what it shows.

Guards refactors: a change that alters any documented output fails here, and the doc (or the
code) must then be brought back in line. What is run, and how (tests/doc_blocks.py parses):

* each block runs in a fresh pytest tmp_path as its cwd, so files written by `--out`, `--plot`,
  `--metrics` land there. `examples/` links to the repository's, and an empty `docs/` exists,
  so the relative paths the docs use resolve. Input files a doc shows with `$ cat F` (before
  any command of the block names F) are written from the doc itself, for its later blocks too.
* `$ uldp ...` runs in-process through click's CliRunner (stdout and stderr together, as a
  terminal shows them) with COLUMNS=100, the width the docs' rich tables were made at.
  `$ echo $?` prints the previous command's exit status. Anything else (`cat`, `head`, pipes into
  `python -c`) runs under bash in the same cwd, with this interpreter's bin/ first on PATH.
* a line `...` in a shown output stands for any number of lines (the docs elide long parts).
* output is compared after stripping trailing whitespace per line and applying `MASKS`: a short
  list of regexes for values that change from run to run (timings). Privacy numbers are never
  masked. Blocks that show timings inside a table also get `_squeeze_rules` (see there).
* blocks that take more than about 15 s are skipped unless ULDP_DOC_SLOW=1 (`SLOW`).

```python blocks in docs/ are not run: they are fragments of larger programs (they use names
defined elsewhere in the doc), not self-contained scripts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.doc_blocks import REPO, Block, Step, all_blocks, inputs_until
from uldp.cli.main import cli

COLUMNS = "100"

# (pattern, replacement); each entry says which outputs it is for.
MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    # `uldp personalize --compare`: the `seconds` column, wall time of each method.
    (re.compile(r"^(│ (?:exact|scf|bisect) +│) +[0-9.e+-]+ │", re.M), r"\1 <seconds> │"),
    # `uldp train`: the `elapsed s` column, the last cell of a round's row.
    (re.compile(r"^(│ +\d+ │.*│) +[0-9.e+-]+ │$", re.M), r"\1 <elapsed> │"),
    # `uldp train --metrics`: the elapsed seconds of each round in the JSONL file.
    (re.compile(r'"elapsed_s": [0-9.e+-]+'), '"elapsed_s": <elapsed>'),
    # `uldp train --engine flower`: the start-up's stages and its total (uldp.trainers.flower).
    (
        re.compile(
            r"((?:Ray started|\d+ silos set up|Protocol 1 set up) in) [0-9.]+ s"
            r"( \(\d+ CPUs?\))?"
        ),
        r"\1 <seconds> s",
    ),
    (re.compile(r"(engine start-up:) [0-9.]+ s"), r"\1 <seconds> s"),
    # `uldp bench protocol`: a table row's timings and gain (every cell between users and ok).
    (re.compile(r"^(│ +\d+ │ +\d+ │).*(│ (?:yes|no) +│)$", re.M), r"\1 <seconds> \2"),
    # `uldp bench protocol`: a cell's time and the estimate of what is left (stderr, off a terminal).
    (re.compile(r"^(bench protocol: cell \d+/\d+, .*: done in) .*$", re.M), r"\1 <seconds>"),
    # `uldp bench protocol --format json`: each phase's seconds.
    (
        re.compile(
            r'("(?:key_exchange|blinded_histograms|server_weights|silo_weighting|aggregation)"'
            r"): [0-9.e+-]+"
        ),
        r"\1: <seconds>",
    ),
    # `uldp bench`: the machine the timings were taken on (CPU, cores, Python version).
    (re.compile(r'^(\s*"?machine"?:) .*?(",?)?$', re.M), r"\1 <machine>"),
)

# Blocks are named (doc file, a piece of the block's first `uldp` command), not by line, so
# that editing a doc does not unlist them.
BlockName = tuple[str, str]

# Blocks whose tables hold a timing column: the column's width, and so the table's rules and the
# title's centring, follow the time, so runs of spaces and of rule characters are squeezed to one
# before comparing. Numbers and words still compare exactly.
TIMED_TABLES: tuple[BlockName, ...] = (
    ("personalize.md", "--distribution three-levels --records 10000"),
    ("personalize.md", "--distribution group-100 --records 1000"),
    ("personalize.md", "--distribution individual-1000 --records 1000000"),
    ("personalize.md", "--epsilon-csv b25k.csv"),
    ("protocol.md", "uldp bench protocol --params 16 --users 10,20,40"),
    ("protocol.md", "uldp bench protocol --params 16,50,107 --users 20"),
)

# Input files that docs use but show only in part (`head`/`tail`) or not at all, rebuilt from
# what the doc says about them. Written into every block's cwd before the doc's own inputs.
FIXTURES: dict[str, str] = {
    # subject.md: "One subject at each of the 16 members (`wide`) and one with 3 items at `m1`
    # only (`deep`)"; -4 is the same with 4 items for `deep` ("with `deep` holding 4 items").
    "wide-deep.csv": "subject,member\n" + "".join(f"wide,m{i}\n" for i in range(1, 17)) + "deep,m1\n" * 3,
    "wide-deep-4.csv": "subject,member\n" + "".join(f"wide,m{i}\n" for i in range(1, 17)) + "deep,m1\n" * 4,
    # subject.md's bad input: a header that does not name the columns subject and member.
    "ids.csv": "subject_id,member_id\nalice,shop1\n",
    # personalize.md's bad input: row 2, id b, has a negative budget.
    "bad.csv": "id,epsilon\na,1\nb,-2\n",
}

# Blocks skipped unless ULDP_DOC_SLOW=1, and why (times on the 2-core development machine).
SLOW: dict[BlockName, str] = {
    (
        "calibrate.md",
        "--k 4 --group-method pld",
    ): "takes 26 s (a PLD group accountant inside a bisection): set ULDP_DOC_SLOW=1",
    (
        "protocol.md",
        "uldp bench protocol --params 16 --users 10,20,40",
    ): "takes 73 s (3072-bit Paillier, the straightforward path): set ULDP_DOC_SLOW=1",
    (
        "protocol.md",
        "uldp bench protocol --params 16,50,107 --users 20",
    ): "takes 29 s (3072-bit Paillier): set ULDP_DOC_SLOW=1",
    (
        "train.md",
        "--private-sampling --user-q 0.333",
    ): "takes 20-40 s (3072-bit Paillier and the oblivious transfer every round): set ULDP_DOC_SLOW=1; "
    "tests/trainers/test_private_sampling_training.py runs the same code with small keys on every CI run",
    (
        "flower.md",
        "--engine flower",
    ): "takes 30-60 s (starts Ray, and a worker per CPU that imports torch): set ULDP_DOC_SLOW=1; "
    "tests/flower/test_engine_cli.py runs the same engine on every CI run",
    (
        "dropout.md",
        "--dropout 0.3 --no-calibration --noise-seed 1 --every 25",
    ): "takes about 3 min (100 rounds of a CNN): set ULDP_DOC_SLOW=1; tests/trainers/test_dropout_robust.py "
    "and tests/cli/test_train_dropout.py run the same code on every CI run",
    (
        "dropout.md",
        "--min-weight-sum 30",
    ): "takes about 2.5 min (100 rounds of a CNN): set ULDP_DOC_SLOW=1",
}

# Blocks that cannot run here at all, and why.
UNRUNNABLE: dict[BlockName, str] = {
    ("results.md", "--config examples/train-mnist.yaml"): "takes about 2 min, and its losses "
    "follow fresh OS noise (the run has no --noise-seed), so no two runs print the same table",
    ("personalize.md", "--epsilon-csv b25k.csv"): "b25k.csv (25,000 budgets packed around the SCF "
    "fit's crossing) was written by a review script that is not in the repository",
}

SLOW_ENABLED = os.environ.get("ULDP_DOC_SLOW") == "1"
BLOCKS = all_blocks()


def _listed(block: Block, names: object) -> BlockName | None:
    """The entry among `names` ((doc file, command piece) pairs) that names `block`, if any."""
    first = next(step.command for step in block.steps if step.command.startswith("uldp "))
    for doc, piece in names:  # type: ignore[attr-defined]
        if block.doc.name == doc and piece in first:
            return (doc, piece)
    return None


def _normalise(text: str, squeeze: bool) -> str:
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    text = "\n".join(lines)
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    if squeeze:
        text = "\n".join(_squeeze_rules(line) for line in text.splitlines())
    return text


def _squeeze_rules(line: str) -> str:
    """Runs of spaces or of one rule character become one, and leading spaces go (centring)."""
    return re.sub(r"([ ━─])\1+", r"\1", line).lstrip(" ")


def _matches(expected: list[str], actual: list[str]) -> bool:
    """Line-by-line equality where an expected `...` line matches any run of actual lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(_matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and _matches(expected[1:], actual[1:])


def _run_step(step: Step, cwd: Path, last_status: int) -> tuple[str, int]:
    """(output, exit status) of one `$ ` step, run in `cwd`."""
    command = step.command
    if command.strip() == "echo $?":
        return f"{last_status}\n", 0
    if command.startswith("uldp ") and not re.search(r"[|;&<>`]", command):
        result = CliRunner(env={"COLUMNS": COLUMNS}).invoke(
            cli, step.argv[1:], prog_name="uldp", catch_exceptions=True
        )
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.output, result.exit_code
    env = {**os.environ, "COLUMNS": COLUMNS, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    return proc.stdout + proc.stderr, proc.returncode


def run_block(block: Block, cwd: Path) -> list[tuple[Step, str]]:
    """Run the block's steps in `cwd` (prepared as the module docstring says): (step, output)."""
    (cwd / "examples").symlink_to(REPO / "examples")
    (cwd / "docs").mkdir()
    for name, text in FIXTURES.items():
        (cwd / name).write_text(text, encoding="utf-8")
    for name, text in inputs_until(block).items():
        (cwd / name).write_text(text, encoding="utf-8")
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        status = 0
        outputs = []
        for step in block.steps:
            output, status = _run_step(step, cwd, status)
            outputs.append((step, output))
        return outputs
    finally:
        os.chdir(previous)


def _param(block: Block) -> object:
    marks = []
    slow = _listed(block, SLOW)
    if slow is not None:
        marks.append(pytest.mark.skipif(not SLOW_ENABLED, reason=SLOW[slow]))
    unrunnable = _listed(block, UNRUNNABLE)
    if unrunnable is not None:
        marks.append(pytest.mark.skip(reason=UNRUNNABLE[unrunnable]))
    return pytest.param(block, id=block.id, marks=marks)


@pytest.mark.parametrize("block", [_param(block) for block in BLOCKS])
def test_console_block(block: Block, tmp_path: Path) -> None:
    squeeze = _listed(block, TIMED_TABLES) is not None
    for step, output in run_block(block, tmp_path):
        expected = _normalise(step.expected, squeeze).splitlines()
        actual = _normalise(output, squeeze).splitlines()
        assert _matches(expected, actual), (
            f"{block.doc.name}:{step.line}: `$ {step.command}` now prints:\n{output}"
        )


def test_slow_and_timed_lists_name_real_blocks() -> None:
    """A block moved or deleted must not leave a stale entry that silently skips nothing."""
    for names in (SLOW, UNRUNNABLE, TIMED_TABLES):
        for name in names:
            assert sum(_listed(block, [name]) is not None for block in BLOCKS) == 1, name
