"""`uldp dropout`'s brief assumptions (issue 34, item 5): short, yet nothing a bound rests on left out.

Without --verbose the table prints a handful of lines in place of the ~55 of the full block; each
case here checks that those lines still say what the figures depend on (the neighbouring
relation, the dropout model, who is not covered, how the paper rows are accounted) and that
--verbose and JSON keep every line.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from uldp.cli.main import cli

BASE = ["dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0,0.1", "--rounds", "10"]


def _assumptions(args: list[str]) -> list[str]:
    result = CliRunner(env={"COLUMNS": "80"}).invoke(cli, [*BASE, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    start = lines.index("Assumptions") + 1
    end = lines.index("Notes", start) if "Notes" in lines[start:] else len(lines)
    return lines[start:end]


def _text(block: list[str]) -> str:
    return " ".join(line.strip() for line in block)


def test_the_brief_block_is_short_and_says_what_the_bounds_rest_on() -> None:
    block = _assumptions(["--silos-per-round", "50"])
    text = _text(block)
    assert len(block) <= 16, "\n".join(block)
    for said in (
        "delta: 1e-05",
        "neighbouring: replace one participant's update (same weight; the weight sum public)",
        "participants sampled with q = 0.01 (Poisson); in each row a fraction r",
        "the same r every round, not data-dependent",
        "colluding: not covered by the z figure; --colluding K adds their rows",
        "paper rows: classic conversion, tf-privacy orders",
        "participants: 50 sampled per round, weight 1 each",
        "--verbose for every assumption",
    ):
        assert said in text, said
    # Unit weights: which participants drop changes nothing, so no "heaviest first".
    assert "heaviest" not in text


def test_the_brief_block_follows_the_options() -> None:
    weighted = _text(_assumptions(["--examples", "10,20,30,40", "--n-max", "20", "--no-paper"]))
    assert "the heaviest first (worst case)" in weighted and "paper rows" not in weighted
    colluding = _text(_assumptions(["--silos-per-round", "50", "--colluding", "5"]))
    assert "coalition rows: colluding survivors of weight 5; no other coalition is covered" in colluding


def test_verbose_and_json_keep_every_assumption() -> None:
    full = _assumptions(["--silos-per-round", "50", "--verbose"])
    brief = _assumptions(["--silos-per-round", "50"])
    assert len(full) > 2 * len(brief)
    labels = [line.split(":")[0].strip() for line in full if not line.startswith("    ")]
    assert {"no calibration", "calibrated, server view", "n_ref", "clip", "colluding participants"} <= set(
        labels
    )
    result = CliRunner().invoke(cli, [*BASE, "--silos-per-round", "50", "--format", "json"])
    document = json.loads(result.stdout)
    assert set(labels) <= set(document["assumptions"])
