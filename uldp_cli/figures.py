"""PNG figures for `--plot` options: matplotlib with the Agg backend, imported only when a plot is
asked for (it costs half a second), and saved atomically (a reader never sees half a PNG)."""

from __future__ import annotations

import io
import os
from typing import Any

from .files import atomic_write_bytes


def subplots(**kwargs: Any):
    """`matplotlib.pyplot.subplots(**kwargs)` on the Agg backend: (figure, axes)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt.subplots(**kwargs)


def save_png(figure, path: str | os.PathLike[str], *, dpi: float | None = None) -> None:
    """Lay out `figure`, write it to `path` as a PNG in one step, and free it."""
    from matplotlib import pyplot as plt

    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", **({} if dpi is None else {"dpi": dpi}))
    plt.close(figure)
    atomic_write_bytes(path, buffer.getvalue())


def plain_log_ticks(axis, low: float, high: float) -> None:
    """Label a log axis spanning [low, high] in plain numbers (0.3, 2, 50, 1000), densely enough
    that even a span of less than a decade gets several labels.

    Matplotlib's default labels only the powers of ten, as 10^k, which leaves a curve spanning
    less than a decade with one label or none.
    """
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ratio = high / low if low > 0 else float("inf")
    subs = (1.0,) if ratio > 1e3 else (1.0, 2.0, 5.0) if ratio > 20 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def budget_line(axes, budget: float, label: str, *, fontsize: float = 8) -> None:
    """A dotted horizontal line at `budget`, labelled at the left edge just above it."""
    axes.axhline(budget, color="tab:blue", lw=0.9, ls=":")
    axes.annotate(
        label,
        (0, budget),
        xycoords=("axes fraction", "data"),
        xytext=(2, 2),
        textcoords="offset points",
        fontsize=fontsize,
        color="tab:blue",
        va="bottom",
    )


def log_rounds_axes(axes, drawn: list[float], largest: int) -> None:
    """Log-log axes for epsilon against rounds 1..largest, labelled in plain numbers, with a margin
    so that marks at the first and last round show whole."""
    axes.set_xscale("log")
    axes.set_yscale("log")
    plain_log_ticks(axes.yaxis, min(drawn), max(drawn))
    plain_log_ticks(axes.xaxis, 1, largest)
    axes.set_xlim(0.85, largest * 1.15)
