"""The console blocks of README.md and docs/*.md, parsed into commands and expected output.

Kept apart from tests/test_docs.py so that a person can list the blocks, or re-run one, without
pytest (`python -m tests.doc_blocks` prints every block with its place).

A console block is a fenced block (```console or a plain ```) whose first line is a `$ ` command
and that runs `uldp` at least once. Each `$ ` line (continued over lines ending in `\\`) is a
step; its expected output is the text up to the next `$ ` line. Blocks that only run other
programs (`python benchmarks/...`, `examples/compare-algorithms.sh`, pytest) are benchmark
logs, not reproducible outputs, and are left out. ```python blocks are not run either.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS: tuple[Path, ...] = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))

_FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Step:
    """One `$ command` of a block and the output the doc shows for it."""

    line: int  # 1-based line of the `$ ` in the doc, for messages
    command: str  # without the `$ `, continuation lines joined
    expected: str  # the shown output, lines joined with "\n", no trailing newline

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command, comments=True)


@dataclass(frozen=True)
class Block:
    """A console block: its doc, the line of its opening fence, and its steps in order."""

    doc: Path
    line: int
    steps: tuple[Step, ...]
    # Files this block shows with `$ cat F` before any command of the block names F: the doc's
    # inputs (budgets.csv, items.csv). Later blocks of the same doc may use them too, so each
    # block also gets the inputs of the blocks before it (see `inputs_until`).
    inputs: tuple[tuple[str, str], ...]

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def parse(doc: Path) -> list[Block]:
    """The console blocks of one markdown file, in order."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        body = lines[i + 1 : end]
        if match.group(1) in ("", "console") and body and body[0].startswith("$ "):
            block = _block(doc, i + 1, body)
            if any(step.command.startswith("uldp ") for step in block.steps):
                blocks.append(block)
        i = end + 1
    return blocks


def _block(doc: Path, fence_line: int, body: list[str]) -> Block:
    steps: list[Step] = []
    j = 0
    while j < len(body):
        start = j
        command = body[j][2:]
        while command.endswith("\\") and j + 1 < len(body):
            j += 1
            command = command[:-1].rstrip() + " " + body[j].strip()
        j += 1
        out_start = j
        while j < len(body) and not body[j].startswith("$ "):
            j += 1
        expected = "\n".join(body[out_start:j])
        steps.append(Step(fence_line + 1 + start, command, expected))
    inputs: list[tuple[str, str]] = []
    named: set[str] = set()
    for step in steps:
        argv = step.argv
        if argv[:1] == ["cat"] and len(argv) == 2 and argv[1] not in named:
            inputs.append((argv[1], step.expected + "\n"))
        named.update(argv[1:])
    return Block(doc, fence_line, tuple(steps), tuple(inputs))


def all_blocks() -> list[Block]:
    """Every console block of README.md and docs/*.md."""
    return [block for doc in DOCS for block in parse(doc)]


def inputs_until(block: Block) -> dict[str, str]:
    """The input files declared by `block` and the blocks before it in its doc."""
    files: dict[str, str] = {}
    for other in parse(block.doc):
        files.update(other.inputs)
        if other.line == block.line:
            break
    return files


if __name__ == "__main__":
    for block in all_blocks():
        print(f"{block.id}  inputs={[name for name, _ in block.inputs]}")
        for step in block.steps:
            print(f"    {step.line}: $ {step.command}")
