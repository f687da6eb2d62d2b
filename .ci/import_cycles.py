"""Fail when modules of a package import each other in a circle (issue 33).

import-linter's contracts say which layer may import which; they do not forbid two modules of one
layer importing each other. This check does: it builds the package's import graph with grimp
(imports inside functions and under `if TYPE_CHECKING:` included: a circle drawn only for the type
checker is still one a reader has to untangle), finds its strongly connected components, and
prints one shortest circle per component with the lines that close it. Exit status 1 when any.

    PYTHONPATH=<plain install> python .ci/import_cycles.py uldp

It reads a plain install, not the editable one: the package-dir mapping is an import hook that
grimp cannot follow (.ci/static-checks builds the install).
"""

from __future__ import annotations

import sys
from collections import deque

import grimp


def components(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """The package's strongly connected components of more than one module (Tarjan, iterative)."""
    inside = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    members = set(inside)
    edges = {m: sorted(set(graph.find_modules_directly_imported_by(m)) & members) for m in inside}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in inside:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if child < len(edges[node]):
                work.append((node, child + 1))
                nxt = edges[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def shortest_circle(graph: grimp.ImportGraph, component: list[str]) -> list[str]:
    """A shortest circle through the component's first module (breadth-first inside it)."""
    members = set(component)
    start = component[0]
    before: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph.find_modules_directly_imported_by(node)):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(before[path[-1]])
                return [*reversed(path), start]
            if nxt in members and nxt not in before:
                before[nxt] = node
                queue.append(nxt)
    return [start]


def describe(graph: grimp.ImportGraph, circle: list[str]) -> list[str]:
    lines = []
    for importer, imported in zip(circle, circle[1:]):
        details = graph.get_import_details(importer=importer, imported=imported)
        where = ", ".join(f"line {d['line_number']}" for d in details) or "?"
        lines.append(f"    {importer} -> {imported}  ({where})")
    return lines


def main(package: str) -> int:
    graph = grimp.build_graph(package, cache_dir=None)
    found = components(graph, package)
    for component in found:
        print(f"import circle among {len(component)} modules: {', '.join(component)}")
        print("\n".join(describe(graph, shortest_circle(graph, component))))
    if found:
        print(
            f"{len(found)} import circle(s): move what both sides need to a module both can import "
            "(docs/architecture.md, 'No import circles')."
        )
        return 1
    print(f"no import circles in {package} ({len(graph.modules)} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "uldp"))
