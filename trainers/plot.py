"""Utility and epsilon against rounds, side by side, as ULDP-FL's Figures 4-7 draw them."""

from __future__ import annotations

import io
import math


def plot_runs(runs: dict[str, list[dict]], metric: str, *, title: str = "") -> bytes:
    """PNG bytes: test `metric` (left), test loss (middle) and user-level epsilon (right) per round.

    `runs` maps a label (an algorithm) to its per-round history. matplotlib is imported here, with
    the Agg backend, so that nothing else pays for it and no display is needed.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for label, history in runs.items():
        rounds = [row["round"] for row in history]
        axes[0].plot(rounds, [_number(row[metric]) for row in history], label=label)
        axes[1].plot(rounds, [_number(row["loss"]) for row in history], label=label)
        axes[2].plot(rounds, [_number(row["epsilon"]) for row in history], label=label)
    axes[0].set_ylabel(metric.replace("_", "-"))
    axes[1].set_ylabel("test loss")
    axes[2].set_ylabel("user-level epsilon (upper bound)")
    losses = [v for line in axes[1].get_lines() for v in line.get_ydata() if math.isfinite(v)]
    if losses and min(losses) > 0 and max(losses) > 20 * min(losses):
        axes[1].set_yscale("log")
    if any(line.get_ydata().size and (line.get_ydata() > 0).any() for line in axes[2].get_lines()):
        axes[2].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _number(value) -> float:
    """A finite float, or NaN (not drawn) for None, inf or NaN: JSON writes those as null."""
    if value is None or not math.isfinite(value):
        return math.nan
    return float(value)
