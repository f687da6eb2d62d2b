"""`uldp account --plot`: epsilon against the group size, one line per bound (ULDP-FL Fig. 2)."""

from __future__ import annotations

import math
from pathlib import Path

from uldp.accountants.account import Guarantee

from .figures import save_png, subplots


def draw_group_plot(path: Path, results: list[Guarantee], labels: dict[str, str], title: str) -> None:
    """One line per (algorithm, bound) over k, log-log; infinite epsilons are left out.

    A record-level result of the same accountant (k = 1) starts each line: a group of one is
    the record.
    Written atomically: a reader never sees half a PNG.
    """
    record = {(r.algorithm, r.accountant): r.epsilon for r in results if r.level == "record"}
    series: dict[str, list[tuple[int, float]]] = {}
    for r in results:
        if r.level != "group" or not math.isfinite(r.epsilon):
            continue
        name = labels[r.method] + (f", {r.algorithm}" if r.algorithm else "")
        points = series.setdefault(name, [])
        base = record.get((r.algorithm, r.accountant))
        if not points and base is not None:
            points.append((1, base))
        assert r.k is not None  # a group guarantee names its k
        points.append((r.k, r.epsilon))
    figure, axes = subplots(figsize=(7, 4.5), dpi=110)
    for name, points in series.items():
        ks, eps = zip(*sorted(points))
        axes.plot(ks, eps, marker="o", label=name)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("group size k (records)")
    axes.set_ylabel("epsilon (upper bound)")
    axes.set_title(title, fontsize=9)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    save_png(figure, path)
