"""The figures `--plot` draws (issue 11, points 7 and 8): dropout's and subject's new plots show
the table's own numbers, personalize's SCF fit is not hidden under the exact curve, fig11's
legends cover no data, every PNG is written whole, and the command says where it went."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from matplotlib.backends.backend_agg import FigureCanvasAgg

import uldp.cli.figures as figures
from uldp.cli.main import cli

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def drawn(monkeypatch):
    """The figures the commands save, kept for inspection (and still written to their files)."""
    kept = []
    original = figures.save_png

    def keep(figure, path, **kwargs):
        kept.append(figure)
        # save_png closes the figure; its artists stay inspectable.
        original(figure, path, **kwargs)

    for module in (
        "uldp.cli.figures",
        # Each plotting module binds save_png when first imported: patch it there too, or a
        # module an earlier test imported keeps the original and the figure is not kept.
        "uldp.cli.account_plot",
        "uldp.cli.dropout_plot",
        "uldp.cli.subject_plot",
        "uldp.cli.personalize_io",
        "uldp.cli.report_render",
        "uldp.cli.commands.bench",
    ):
        monkeypatch.setattr(f"{module}.save_png", keep, raising=False)
    return kept


def run(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


def assert_png_whole(path: Path) -> None:
    assert path.read_bytes().startswith(PNG)
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def lines_by_label(axes) -> dict:
    return {line.get_label(): line for line in axes.get_lines() if not line.get_label().startswith("_")}


def test_dropout_plot_draws_the_tables_epsilons_with_and_without_dropouts(tmp_path: Path, drawn) -> None:
    plot = tmp_path / "d.png"
    args = ["dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0,0.3", "--silos-per-round", "50"]
    args += ["--rounds", "10,1000", "--epsilon", "4", "--no-paper"]
    doc = json.loads(run(*args, "--plot", str(plot), "--format", "json").stdout)
    assert_png_whole(plot)
    assert f"plot written to {plot}" in doc["notes"]
    (figure,) = drawn
    (axes,) = figure.axes
    lines = lines_by_label(axes)
    assert len(lines) == 2  # sigma (no dropout or calibrated) and dropout 0.3 uncalibrated
    intended = next(line for label, line in lines.items() if label.startswith("no dropout"))
    dropped = next(line for label, line in lines.items() if label.startswith("dropout 0.3, not calibrated"))
    for rounds in (10, 1000):
        table = {
            e["calibrated"]: e["epsilon"]
            for e in doc["results"]
            if e["dropout"] == 0.3 and e["rounds"] == rounds
        }
        for line, expected in ((dropped, table[False]), (intended, table[True])):
            x, y = line.get_data()
            assert y[list(x).index(rounds)] == pytest.approx(expected, rel=1e-12)
    # The dropout curve lies above the intended one everywhere: less noise, more epsilon.
    assert np.all(dropped.get_ydata() > intended.get_ydata())
    assert axes.get_yscale() == "log" and axes.get_xscale() == "log"
    # The budget is drawn.
    assert any(np.allclose(line.get_ydata(), 4) for line in axes.get_lines() if len(line.get_ydata()) == 2)


def test_subject_plot_draws_the_members_and_the_federations_epsilon(tmp_path: Path, drawn) -> None:
    plot = tmp_path / "s.png"
    args = ["subject", "--silos", "4", "--silos-per-round", "4", "--rounds", "20", "--local-steps", "5"]
    args += ["--record-q", "0.02", "--sigma", "1", "--plot", str(plot), "--format", "json"]
    doc = json.loads(run(*args).stdout)
    assert_png_whole(plot)
    (figure,) = drawn
    lines = lines_by_label(figure.axes[0])
    local = next(line for label, line in lines.items() if label.startswith("one member"))
    federation = next(line for label, line in lines.items() if label.startswith("federation"))
    at = list(local.get_xdata()).index(20)
    assert local.get_ydata()[at] == pytest.approx(doc["local_epsilon"], rel=1e-12)
    assert federation.get_ydata()[at] == pytest.approx(doc["federation_epsilon"], rel=1e-12)
    assert np.all(federation.get_ydata() >= local.get_ydata())
    # The federation's line is on top and dashed, so it never hides the local one entirely.
    assert federation.get_zorder() >= local.get_zorder() and federation.get_linestyle() != "-"
    assert federation.get_linewidth() < local.get_linewidth()


def test_subject_plot_says_where_it_went(tmp_path: Path, drawn) -> None:
    plot = tmp_path / "s.png"
    args = ["subject", "--silos", "4", "--silos-per-round", "4", "--rounds", "20", "--local-steps", "5"]
    result = run(*args, "--record-q", "0.02", "--sigma", "1", "--plot", str(plot))
    # The path may wrap across lines in the table's notes.
    assert "".join(f"- plot written to {plot}".split()) in "".join(result.output.split())


def test_personalize_draws_the_scf_fit_visibly_and_its_error_and_says_where_it_wrote(
    tmp_path: Path, drawn
) -> None:
    plot, out = tmp_path / "p.png", tmp_path / "q.csv"
    args = ["personalize", "--distribution", "individual-1000", "--records", "300", "--calibrate-sigma"]
    args += ["--local-steps", "10", "--rounds", "50", "--plot", str(plot), "--out", str(out)]
    doc = json.loads(run(*args, "--format", "json").stdout)
    assert_png_whole(plot)
    assert f"plot written to {plot}" in doc["notes"]
    assert (
        f"per-record rates written to {out} (300 rows: id, epsilon, q, epsilon_spent, status)" in doc["notes"]
    )
    (figure,) = drawn
    top, bottom = figure.axes
    lines = lines_by_label(top)
    exact = lines["epsilon*(q), exact"]
    fit = next(line for label, line in lines.items() if label.startswith("SCF fit"))
    # Drawn after and above the exact curve, dashed and thinner: it shows where they coincide.
    assert fit.get_zorder() > exact.get_zorder()
    assert fit.get_linestyle() != "-" and fit.get_linewidth() < exact.get_linewidth()
    # The lower panel is the difference the upper one cannot show.
    (difference,) = [line for line in bottom.get_lines() if len(line.get_xdata()) > 2]
    assert np.allclose(difference.get_ydata(), fit.get_ydata() - exact.get_ydata())


def test_personalize_without_out_says_so(tmp_path: Path) -> None:
    args = ["personalize", "--distribution", "group-3", "--records", "30", "--sigma", "1.2"]
    doc = json.loads(run(*args, "--local-steps", "10", "--rounds", "50", "--format", "json").stdout)
    assert "per-record rates were not written; add --out q.csv" in doc["notes"]
    assert not any("written to" in note for note in doc["notes"])


def test_fig11_legends_cover_no_data(tmp_path: Path, drawn) -> None:
    plot = tmp_path / "fig11.png"
    args = ["bench", "protocol", "--key-bits", "512", "--test-keys", "--params", "4,8", "--users", "3,4"]
    run(*args, "--workers", "1", "--plot", str(plot))
    assert_png_whole(plot)
    (figure,) = drawn
    canvas = FigureCanvasAgg(figure)  # save_png closed the figure; draw it again as saved
    canvas.draw()
    renderer = canvas.get_renderer()
    assert len(figure.axes) == 2
    for axes in figure.axes:
        frame = axes.get_window_extent(renderer)
        legends = [child for child in axes.get_children() if child.__class__.__name__ == "Legend"]
        assert len(legends) == 2  # phases (colour) and the other axis's values (line style)
        for legend in legends:
            assert not legend.get_window_extent(renderer).overlaps(frame)
        # One colour per phase, the same in both panels.
        colours = {line.get_color() for line in axes.get_lines()}
        assert colours == {"tab:blue", "tab:orange", "tab:green"}


def test_report_roc_is_log_log_and_names_coincident_claims(tmp_path: Path, drawn) -> None:
    """Issue 34, item 6: on a linear TPR axis every curve sat at 0 below FPR 1e-2, and claims with
    the same curve (one record = one user when every user holds one record) hid each other."""
    plot = tmp_path / "roc.png"
    args = ["report", "--algo", "uldp-avg", "--sigma", "5", "--rounds", "100", "--user-q", "0.5"]
    doc = json.loads(run(*args, "--accountant", "rdp", "--plot", str(plot), "--format", "json").stdout)
    assert_png_whole(plot)
    (figure,) = drawn
    (axes,) = figure.axes
    assert axes.get_xscale() == "log" and axes.get_yscale() == "log"
    assert 0 < axes.get_ylim()[0] <= 1e-5  # the low-FPR corner is on the plot, not clipped to 0
    lines = lines_by_label(axes)
    chance = lines.pop("chance (no information)")
    assert np.array_equal(chance.get_xdata(), chance.get_ydata())
    claims = doc["claims"]
    assert len(claims) == 3 and len(lines) == 2  # record and user coincide; the server's is apart
    (shared,) = [label for label in lines if " = " in label]
    assert shared.startswith("one record = one user") and "(released model)" in shared
    assert len({line.get_linestyle() for line in lines.values()}) == 2
    # Every curve is drawn where a linear axis showed 0: well above chance at FPR 1e-3.
    for line in lines.values():
        fpr, tpr = line.get_data()
        at = np.searchsorted(fpr, 1e-3)
        assert tpr[at] > 3 * fpr[at]


def test_coincident_groups_joins_equal_curves_only() -> None:
    from uldp.cli.report_render import coincident_groups

    a = np.geomspace(1e-5, 1, 10)
    assert coincident_groups([a, a * (1 + 1e-9), a * 1.01, a]) == [[0, 1, 3], [2]]


def test_dropout_plot_keeps_the_legend_off_the_budget_labels(tmp_path: Path, drawn) -> None:
    plot = tmp_path / "d.png"
    args = ["dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0,0.3", "--silos-per-round", "50"]
    run(*args, "--rounds", "1,10", "--epsilon", "1.2,1.5,2", "--no-paper", "--plot", str(plot))
    (figure,) = drawn
    canvas = FigureCanvasAgg(figure)  # save_png closed the figure; draw it again as saved
    canvas.draw()
    renderer = canvas.get_renderer()
    (axes,) = figure.axes
    legend = axes.get_legend().get_window_extent(renderer)
    labels = [text for text in axes.texts if text.get_text().startswith("budget ")]
    assert len(labels) == 3
    for label in labels:
        assert not label.get_window_extent(renderer).overlaps(legend), label.get_text()
    assert not legend.overlaps(axes.get_window_extent(renderer))


def test_account_plot_starts_the_pld_line_at_k_1(tmp_path: Path, drawn) -> None:
    """Under the default --accountant rdp the table has no record-level PLD figure; the PLD group
    line still starts at k = 1, with the plain PLD epsilon (a group of one is the record)."""
    plot = tmp_path / "a.png"
    mechanism = ["--sigma", "1", "--q", "1", "--steps", "3"]  # no sub-sampling: the PLD group is quick
    run("account", *mechanism, "--k", "2", "--group-method", "rdp,pld", "--plot", str(plot))
    (figure,) = drawn
    lines = lines_by_label(figure.axes[0])
    pld, rdp = lines["PLD mixture of Gaussians"], lines["Lemma 6 (RDP group)"]
    assert list(pld.get_xdata()) == [1, 2] and list(rdp.get_xdata()) == [1, 2]
    record = json.loads(run("account", *mechanism, "--accountant", "pld", "--format", "json").stdout)
    record = record["results"][0]
    assert record["level"] == "record" and pld.get_ydata()[0] == pytest.approx(record["epsilon"], rel=1e-12)
