"""Utility and epsilon against rounds, side by side, as ULDP-FL's Figures 4-7 draw them."""

from __future__ import annotations

import io
import math

# A log axis only pays when the values span more than this factor; below it a linear axis reads
# better (epsilon grows roughly like sqrt(rounds), so a 30-round run spans a factor of ~7).
LOG_SPAN = 30.0


def plot_runs(runs: dict[str, list[dict]], metric: str, *, title: str = "") -> bytes:
    """PNG bytes: test `metric` (left), test loss (middle) and user-level epsilon (right) per round.

    `runs` maps a label (an algorithm) to its per-round history. The metric axis spans [0, 1].
    Rounds are whole numbers, so the
    round axes carry integer ticks only. Where a history has `server_epsilon` (user sampling),
    the server's view is drawn dashed next to the released model's. A log axis is used only
    when the values span more than a factor LOG_SPAN, with plain-number tick labels (1, 2, 5,
    10, ...), never 10^x notation. matplotlib is imported here, with the Agg backend, so that
    nothing else pays for it and no display is needed.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for label, history in runs.items():
        rounds = [row["round"] for row in history]
        (line,) = axes[0].plot(rounds, [_number(row[metric]) for row in history], label=label)
        colour = line.get_color()
        axes[1].plot(rounds, [_number(row["loss"]) for row in history], color=colour, label=label)
        sampled = any("server_epsilon" in row for row in history)
        axes[2].plot(
            rounds,
            [_number(row["epsilon"]) for row in history],
            color=colour,
            label=f"{label}, released model" if sampled else label,
        )
        if sampled:
            axes[2].plot(
                rounds,
                [_number(row.get("server_epsilon")) for row in history],
                color=colour,
                linestyle="--",
                label=f"{label}, server's view",
            )
    axes[0].set_ylabel(f"test {metric.replace('_', '-')}")
    # Accuracy, ROC-AUC and C-index live in [0, 1]: the whole range, so that noise between
    # rounds is not magnified into a trend.
    axes[0].set_ylim(0, 1)
    axes[1].set_ylabel("test loss")
    axes[2].set_ylabel("user-level epsilon (upper bound)")
    for ax in axes[1:]:
        _scale(ax)
    for ax in axes:
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    if any(line.get_linestyle() == "--" for line in axes[2].get_lines()):
        axes[2].legend(fontsize=8, loc="upper left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _scale(ax) -> None:
    """Log scale with plain tick labels if the positive values span > LOG_SPAN, else linear from 0."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    values = [v for line in ax.get_lines() for v in line.get_ydata() if math.isfinite(v) and v > 0]
    if values and max(values) > LOG_SPAN * min(values):
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
    elif values:
        ax.set_ylim(bottom=0)


def _number(value) -> float:
    """A finite float, or NaN (not drawn) for None, inf or NaN: JSON writes those as null."""
    if value is None or not math.isfinite(value):
        return math.nan
    return float(value)
