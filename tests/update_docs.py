"""Rewrite the shown output of console blocks with what the commands print now.

    python -m tests.update_docs docs/calibrate.md            # every block of one doc
    python -m tests.update_docs README.md --line 120          # the block whose fence is line 120

For a maintainer who changed an output on purpose: it re-runs each block exactly as
tests/test_docs.py does and writes the fresh output back into the doc. Steps whose shown output
elides lines (`...`) are left alone and listed, to be edited by hand; so are blocks that
tests/test_docs.py skips as slow (unless ULDP_DOC_SLOW=1) or unrunnable. Review `git diff`
afterwards: a number that moved must be one you meant to move.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.doc_blocks import REPO, parse
from tests.test_docs import SLOW, SLOW_ENABLED, UNRUNNABLE, _listed, run_block


def update(doc: Path, line: int | None) -> list[str]:
    """Rewrite `doc` in place; return messages about steps left alone."""
    text_lines = doc.read_text(encoding="utf-8").splitlines()
    left: list[str] = []
    replacements: list[tuple[int, int, list[str]]] = []  # (first, end) 0-based line range of output
    for block in parse(doc):
        if line is not None and block.line != line:
            continue
        if _listed(block, UNRUNNABLE) or (_listed(block, SLOW) and not SLOW_ENABLED):
            left.append(f"{block.id}: skipped (slow or unrunnable)")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            outputs = run_block(block, Path(tmp))
        for step, output in outputs:
            if any(shown == "..." for shown in step.expected.splitlines()):
                left.append(f"{doc.name}:{step.line}: elided output (`...`), edit by hand")
                continue
            first = step.line  # 0-based index of the line after the `$ ` line(s)
            while text_lines[first - 1].endswith("\\"):
                first += 1
            count = len(step.expected.splitlines()) if step.expected else 0
            fresh = [row.rstrip() for row in output.rstrip("\n").splitlines()] if output.strip() else []
            replacements.append((first, first + count, fresh))
    for first, end, fresh in sorted(replacements, reverse=True):
        text_lines[first:end] = fresh
    doc.write_text("\n".join(text_lines) + "\n", encoding="utf-8")
    return left


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("doc", type=Path)
    parser.add_argument("--line", type=int, help="only the block whose opening fence is this line")
    args = parser.parse_args()
    doc = args.doc if args.doc.is_absolute() else (Path.cwd() / args.doc)
    if REPO not in doc.resolve().parents:
        print(f"{doc}: not a doc of this repository", file=sys.stderr)
        return 2
    for message in update(doc.resolve(), args.line):
        print(message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
