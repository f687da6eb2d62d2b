"""docs/architecture.md's "Where to find it" table names every module of the package, once.

The table maps a concept to the module that holds it, one row per `.py` file of the installed
folders (`__init__.py` and `__main__.py` left out). A module added, moved or deleted without its
row makes this test name it (issue 33).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "architecture.md"
HEADING = "## Where to find it"
#: The folders that install as the `uldp` package (pyproject.toml's package-dir).
FOLDERS = ("accountants", "crypto", "trainers", "uldp_cli", "uldp")
LEFT_OUT = frozenset({"__init__.py", "__main__.py"})

_PATH = re.compile(r"`([^`]+\.py)`")


def section(text: str, heading: str) -> str:
    """The lines under `heading` up to the next heading of the same or a higher level."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    level = heading.split(" ")[0]
    for end in range(start, len(lines)):
        marks = lines[end].split(" ")[0]
        if marks and set(marks) == {"#"} and len(marks) <= len(level):
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def named_modules(text: str) -> list[str]:
    """The module column of the section's table, one path per row, in order."""
    rows = [line for line in section(text, HEADING).splitlines() if line.startswith("|")]
    header, rule, *body = rows
    assert [c.strip() for c in header.strip("|").split("|")] == ["concept", "module"], header
    assert set(rule.replace("|", "").replace("-", "").strip()) <= {":"}, rule
    paths = []
    for row in body:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        found = _PATH.fullmatch(cells[-1])
        assert found, f"the module cell of {row!r} is not one `path.py`"
        paths.append(found.group(1))
    return paths


def package_modules() -> list[str]:
    return sorted(
        path.relative_to(REPO).as_posix()
        for folder in FOLDERS
        for path in (REPO / folder).rglob("*.py")
        if path.name not in LEFT_OUT and "__pycache__" not in path.parts
    )


def test_section_parser_stops_at_the_next_heading():
    text = "# A\n## Where to find it\n| concept | module |\n|---|---|\n| x | `a.py` |\n## B\n| y | `b.py` |\n"
    assert named_modules(text) == ["a.py"]


def test_every_module_named_exists():
    missing = [
        path for path in named_modules(PAGE.read_text(encoding="utf-8")) if not (REPO / path).is_file()
    ]
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_module_is_named_exactly_once():
    named = Counter(named_modules(PAGE.read_text(encoding="utf-8")))
    twice = sorted(path for path, n in named.items() if n > 1)
    unnamed = [path for path in package_modules() if path not in named]
    assert not twice, f"docs/architecture.md names these modules more than once: {twice}"
    assert not unnamed, f"add a row to docs/architecture.md's '{HEADING}' for: {unnamed}"
