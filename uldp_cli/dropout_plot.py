"""`uldp dropout --plot`: the released model's epsilon against rounds, without dropouts and at each
dropout rate, with and without Algorithm 2's calibration (Baek et al. 2021, §IV-V)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from uldp.accountants.dropout.rounds import DropoutRound

from .figures import budget_line, log_rounds_axes, save_png, subplots

# Round counts on each curve: RDP curves are cheap at any T, the tight accountants are not.
POINTS = {"rdp": 40}
TIGHT_POINTS = 12


def round_grid(largest: int, accountant: str, marked: Sequence[int]) -> list[int]:
    """Round counts 1..largest, about evenly spaced on a log axis, plus the table's own (`marked`)."""
    count = POINTS.get(accountant, TIGHT_POINTS)
    grid = np.unique(np.round(np.geomspace(1, max(largest, 1), count)).astype(int))
    return sorted({*grid.tolist(), *(t for t in marked if t <= largest)})


def draw_dropout_plot(
    path: Path,
    z: float,
    scenarios: dict[float, DropoutRound],
    largest: int,
    rounds: list[int],
    budgets: list[float],
    epsilon: Callable[[float, int], float],
    accountant: str,
    title: str,
) -> None:
    """One line per noise multiplier the released model can have: sigma as intended (no dropout,
    or calibrated), and for each dropout rate the uncalibrated multiplier (and the calibrated one
    where it differs from sigma, as with n' < n_0). `epsilon(multiplier, rounds)` accounts a point.
    Rounds run from 1 to `largest`; the table's round counts (`rounds`) are marked and budgets
    are horizontal lines, labelled at the left edge; the legend is below the axes. Log-log, as the
    epsilons span decades. Written atomically.
    """
    series: list[tuple[str, float, dict]] = [
        ("no dropout, or calibrated (Algorithm 2): sigma", z, {"color": "black", "lw": 2.0})
    ]
    colours = iter(["tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan"])
    for dropout, rd in scenarios.items():
        uncalibrated, calibrated = rd.uncalibrated_multiplier(z), rd.calibrated_multiplier(z)
        if dropout == 0 and math.isclose(uncalibrated, z, rel_tol=1e-12):
            continue
        colour = next(colours, "tab:gray")
        series.append(
            (f"dropout {dropout:g}, not calibrated: {uncalibrated:.4g}", uncalibrated, {"color": colour})
        )
        if not math.isclose(calibrated, z, rel_tol=1e-12):
            series.append(
                (
                    f"dropout {dropout:g}, calibrated: {calibrated:.4g}",
                    calibrated,
                    {"color": colour, "ls": "--"},
                )
            )
    grid = round_grid(largest, accountant, rounds)
    figure, axes = subplots(figsize=(7.5, 5.6), dpi=120)
    drawn: list[float] = []
    for label, multiplier, style in series:
        values = [epsilon(multiplier, t) for t in grid]
        drawn.extend(values)
        axes.plot(grid, values, label=f"{label}", **style)
        marks = [(t, v) for t, v in zip(grid, values) if t in rounds]
        if marks:
            axes.plot(*zip(*marks), ls="none", marker="o", ms=4, color=style["color"])
    for budget in budgets:
        budget_line(axes, budget, f"budget {budget:g}", fontsize=7)
    log_rounds_axes(axes, drawn, largest)
    axes.set_xlabel("rounds T")
    axes.set_ylabel("epsilon of the released model (upper bound)")
    axes.set_title(title, fontsize=9)
    axes.grid(True, which="major", alpha=0.3)
    # Below the axes, never over a curve or a budget's label (both start at the left edge).
    axes.legend(
        fontsize=8,
        title="noise multiplier of the released model",
        title_fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.13),
        ncol=2 if len(series) > 3 else 1,
        frameon=False,
    )
    save_png(figure, path)
