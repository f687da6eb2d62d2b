"""`uldp account --plot`: epsilon against the group size, one line per bound (ULDP-FL Fig. 2);
`uldp calibrate --plot`: epsilon against the solved quantity, with the budget and the answer."""

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
    # By k, not by level: ULDP-GROUP-k's group of group_k records is its user level, and its
    # k = 1 row may be that user level too (group_k = 1).
    record = {(r.algorithm, r.accountant): r.epsilon for r in results if r.k == 1}
    series: dict[str, list[tuple[int, float]]] = {}
    for r in results:
        if r.k is None or r.k < 2 or not math.isfinite(r.epsilon):
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


VIEW_LABELS = {"model": "released model", "server": "server (knows the user sample)"}


def draw_calibration_plot(
    path: Path,
    curve: list[tuple[float, dict[str, float]]],
    *,
    solved: str,
    answer: float,
    budget: float,
    view: str,
    title: str,
) -> None:
    """epsilon against sigma (or steps / rounds), one line per view, the budget as a horizontal
    line and the answer marked where its (targeted) curve meets it. Log-log: epsilon spans
    decades over a factor 16 of sigma. Written atomically."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    figure, axes = subplots(figsize=(7, 4.5), dpi=110)
    views = list(curve[0][1])
    for name in sorted(views, key=lambda v: v != view):  # the targeted view first
        xs = [x for x, eps in curve if math.isfinite(eps[name])]
        ys = [eps[name] for x, eps in curve if math.isfinite(eps[name])]
        label = "epsilon" if len(views) == 1 else f"epsilon, {VIEW_LABELS[name]}"
        axes.plot(xs, ys, marker="o", markersize=3, label=label, linestyle="-" if name == view else "--")
    axes.axhline(budget, color="black", linewidth=1, label=f"budget {budget:g}")
    at = dict(curve)[float(answer)][view]
    unit = "sigma" if solved == "sigma" else solved
    axes.plot(
        [answer],
        [at],
        marker="*",
        markersize=14,
        color="crimson",
        linestyle="none",
        label=f"{unit} = {answer:.4g} (epsilon {at:.5g})",
        zorder=5,
    )
    axes.axvline(answer, color="crimson", linewidth=0.8, linestyle=":")
    axes.set_xscale("log")
    axes.set_yscale("log")
    for axis in (axes.xaxis, axes.yaxis):  # plain numbers at 1, 2, 5 x 10^n (not 10^0.3)
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=30))
        axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_minor_formatter(NullFormatter())
    axes.set_xlabel("noise multiplier sigma" if solved == "sigma" else f"number of {solved}")
    axes.set_ylabel("epsilon (upper bound)")
    axes.set_title(title, fontsize=9)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8, loc="upper right" if solved == "sigma" else "upper left")
    save_png(figure, path)
