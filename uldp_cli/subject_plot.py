"""`uldp subject --plot`: one member's (local) and the whole federation's subject-level epsilon
against rounds, as horizontal composition builds it up (Marathe & Kanani, Theorems 3.9-3.10)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .figures import budget_line, log_rounds_axes, save_png, subplots

POINTS = {"rdp": 40}
TIGHT_POINTS = 12


def draw_subject_plot(
    path: Path,
    curves: Sequence[tuple[str, dict]],
    epsilon: Callable[[int, str], float],
    rounds: int,
    largest: int,
    budget: float | None,
    accountant: str,
    title: str,
) -> None:
    """One line per `(label, style)` in `curves`, `epsilon(t, label)` at round counts 1..largest;
    the run's R is a vertical line and its epsilons are marked, the budget E a horizontal one.
    Log-log, with plain tick labels. Written atomically."""
    count = POINTS.get(accountant, TIGHT_POINTS)
    grid = sorted({*np.unique(np.round(np.geomspace(1, largest, count)).astype(int)).tolist(), rounds})
    figure, axes = subplots(figsize=(7.5, 5.4), dpi=120)
    drawn: list[float] = []
    for label, style in curves:
        values = [epsilon(t, label) for t in grid]
        drawn.extend(values)
        axes.plot(grid, values, label=label, **style)
        axes.plot([rounds], [values[grid.index(rounds)]], ls="none", marker="o", ms=5, color=style["color"])
    axes.axvline(rounds, color="gray", lw=0.9, ls="--")
    axes.annotate(
        f"R = {rounds}",
        (rounds, 1),
        xycoords=("data", "axes fraction"),
        xytext=(3, -12),
        textcoords="offset points",
        fontsize=8,
        color="gray",
    )
    if budget is not None:
        budget_line(axes, budget, f"budget E = {budget:g}")
    log_rounds_axes(axes, drawn, largest)
    axes.set_xlabel("rounds R")
    axes.set_ylabel("subject-level epsilon (upper bound)")
    axes.set_title(title, fontsize=9)
    axes.grid(True, which="major", alpha=0.3)
    # Below the axes, as in `uldp dropout --plot`: never over a curve or the budget's label.
    axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False)
    save_png(figure, path)
