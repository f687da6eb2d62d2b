"""The CI check that no two modules import each other (.ci/import_cycles.py, issue 33), on small
packages written here: it must find a circle drawn by a function-level or a TYPE_CHECKING import,
name the lines that close it, and pass a package without one."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter, in the test extra")

CHECK = Path(__file__).resolve().parents[1] / ".ci" / "import_cycles.py"


def _write_package(root: Path, name: str, modules: dict[str, str]) -> None:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    for module, source in modules.items():
        (package / f"{module}.py").write_text(textwrap.dedent(source))


def _run(root: Path, name: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(CHECK), name],
        cwd=root,
        env={"PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_circle_closed_inside_a_function_is_found_and_named(tmp_path):
    _write_package(
        tmp_path,
        "circ_fn",
        {
            "a": "from .b import B\nA = 1\n",
            "b": "B = 2\n\ndef late():\n    from .c import C\n    return C\n",
            "c": "from .a import A\nC = A\n",
            "d": "from .a import A\n",
        },
    )
    result = _run(tmp_path, "circ_fn")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "import circle among 3 modules: circ_fn.a, circ_fn.b, circ_fn.c" in result.stdout
    assert "circ_fn.b -> circ_fn.c  (line 4)" in result.stdout
    assert "circ_fn.d" not in result.stdout.split("\n")[0]


def test_a_circle_drawn_only_for_the_type_checker_counts(tmp_path):
    _write_package(
        tmp_path,
        "circ_tc",
        {
            "types": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .user import U\nT = 1\n",
            "user": "from .types import T\nU = T\n",
        },
    )
    result = _run(tmp_path, "circ_tc")
    assert result.returncode == 1
    assert "circ_tc.types, circ_tc.user" in result.stdout


def test_a_package_without_circles_passes(tmp_path):
    modules = {"a": "X = 1\n", "b": "from .a import X\n", "c": "from . import a, b\n"}
    _write_package(tmp_path, "no_circ", modules)
    result = _run(tmp_path, "no_circ")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no import circles in no_circ" in result.stdout


def test_components_of_a_hand_made_graph():
    spec = importlib.util.spec_from_file_location("import_cycles", CHECK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c", "p.d", "p.e"):
        graph.add_module(name)
    imports = (("p.a", "p.b"), ("p.b", "p.a"), ("p.c", "p.d"), ("p.d", "p.e"), ("p.e", "p.c"))
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported)
    assert module.components(graph, "p") == [["p.a", "p.b"], ["p.c", "p.d", "p.e"]]
    assert module.shortest_circle(graph, ["p.c", "p.d", "p.e"]) == ["p.c", "p.d", "p.e", "p.c"]
