"""Rewrite tests/slow.txt, the tests `pytest -m "not slow"` leaves out, from measured durations.

Run the suite with `--durations=0` and hand this script its output:

    .venv/bin/python -m pytest -q -n 2 --dist loadgroup tests --durations=0 > durations.txt
    .venv/bin/python tests/update_slow.py durations.txt --load 1.0

A test function is slow when its calls, set-ups and tear-downs, summed over its parametrisations,
take more than `--threshold` seconds once divided by `--load` (the measuring machine's slow-down
against a quiet one: the load average over the cores, 1 when quiet). A module whose module-scoped
fixture alone costs that much is listed whole, since leaving out only its first test would move
the set-up to the next one.

Timings vary from run to run, so the list grows by default: the entries already there stay (a test
slow in one measurement stays slow) unless `--replace` is given; lines ending in `# kept` (entries
kept by hand) stay always. A listed test that no longer exists fails the collection
(tests/conftest.py), so an entry for a renamed or removed test has to go by hand.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

LIST = Path(__file__).resolve().parent / "slow.txt"
HEADER = """\
# Tests that `pytest -m "not slow"` leaves out (tests/conftest.py marks them): each one, summed over
# its parametrisations, took over {threshold:g} s on a quiet 2-core machine in a measured run.
# An entry is `path::function` (every parametrisation) or a whole `path`. An entry that names no
# test of a collected module fails the collection, so a renamed test cannot silently turn fast.
# Regenerate with tests/update_slow.py (its docstring says how); lines ending in `# kept` stay.
"""
_LINE = re.compile(r"\s*([\d.]+)s (call|setup|teardown)\s+(\S+)")


def slow_entries(durations: str, threshold: float, load: float) -> list[str]:
    """The entries for `durations` (pytest's `--durations=0` output)."""
    per_function: Counter[str] = Counter()
    module_setup: Counter[str] = Counter()
    for line in durations.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        seconds, phase, node = float(match[1]) / load, match[2], match[3]
        # pytest-xdist's loadgroup names a grouped test `...::test@group`; the list names tests.
        function = node.split("[", 1)[0].split("@", 1)[0]
        per_function[function] += seconds
        if phase == "setup":
            module_setup[function.split("::", 1)[0]] = max(module_setup[function.split("::", 1)[0]], seconds)
    modules = {m for m, s in module_setup.items() if s > threshold}
    functions = {f for f, s in per_function.items() if s > threshold and f.split("::", 1)[0] not in modules}
    return sorted(modules) + sorted(functions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("durations", type=Path, help="pytest --durations=0 output")
    parser.add_argument("--threshold", type=float, default=1.5, help="seconds on a quiet machine")
    parser.add_argument("--load", type=float, default=1.0, help="slow-down of the measuring machine")
    parser.add_argument("--replace", action="store_true", help="drop the entries not measured slow now")
    args = parser.parse_args()
    lines = LIST.read_text().splitlines() if LIST.exists() else []
    kept = [line for line in lines if line.endswith("# kept")]
    entries = set(slow_entries(args.durations.read_text(), args.threshold, args.load))
    if not args.replace:
        entries |= {
            line for line in lines if line and not line.startswith("#") and not line.endswith("# kept")
        }
    modules = {e for e in entries if "::" not in e}
    named = {line.split()[0] for line in kept}
    fresh = sorted(
        e for e in entries if e not in named and ("::" not in e or e.split("::", 1)[0] not in modules)
    )
    body = kept + [e for e in fresh if "::" not in e] + [e for e in fresh if "::" in e]
    LIST.write_text(HEADER.format(threshold=args.threshold) + "\n".join(body) + "\n")
    print(f"{len(body)} entries written to {LIST}")


if __name__ == "__main__":
    main()
