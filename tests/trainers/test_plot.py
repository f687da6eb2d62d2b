"""What `uldp train --plot` draws: integer round ticks, readable epsilon ticks, the server's view."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402
from matplotlib import image  # noqa: E402

from uldp.trainers import plot  # noqa: E402


def history(rounds: int, sampled: bool = False) -> list[dict]:
    rows = []
    for t in range(1, rounds + 1):
        row = {"round": t, "loss": 2.0 / t, "accuracy": 0.5 + 0.01 * t, "epsilon": 1.4 * t**0.5}
        if sampled:
            row["server_epsilon"] = 2.0 * t**0.5
        rows.append(row)
    return rows


@pytest.fixture
def figures(monkeypatch):
    """The matplotlib figures plot_runs draws, kept open for inspection."""
    from matplotlib import pyplot as plt

    drawn = []
    monkeypatch.setattr(plt, "close", lambda fig: drawn.append(fig))
    return drawn


def test_round_ticks_are_whole_numbers_and_epsilon_ticks_plain(figures):
    png = plot.plot_runs({"uldp-avg": history(3)}, "accuracy", title="t")
    assert image.imread(io.BytesIO(png)).shape[2] in (3, 4)
    axes = figures[0].axes
    for ax in axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
    eps = axes[2]
    assert eps.get_yscale() == "linear" and eps.get_ylim()[0] == 0  # epsilon spans < 30x here
    assert axes[0].get_ylim() == (0, 1)  # accuracy on its whole range


def test_a_wide_epsilon_range_gets_a_log_axis_with_plain_labels(figures):
    rows = history(3)
    rows[0]["epsilon"] = 0.01
    plot.plot_runs({"a": rows}, "accuracy")
    eps = figures[0].axes[2]
    assert eps.get_yscale() == "log"
    figures[0].canvas.draw()
    labels = [t.get_text() for t in eps.get_yticklabels() if t.get_text()]
    assert labels and not any("10^" in s or "$" in s for s in labels)


def test_the_servers_view_is_drawn_dashed(figures):
    plot.plot_runs({"uldp-avg": history(4, sampled=True)}, "accuracy")
    lines = figures[0].axes[2].get_lines()
    assert [line.get_linestyle() for line in lines] == ["-", "--"]
    assert "released model" in lines[0].get_label() and "server" in lines[1].get_label()
