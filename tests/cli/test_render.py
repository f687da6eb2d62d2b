from __future__ import annotations

import csv
import io
import json
import math

import pytest

from uldp.cli.render import NON_FINITE_NOTE, emit, format_cell, print_table
from uldp.cli.table_layout import (
    Column,
    fit_widths,
    fold,
    naming_columns,
    table_width,
    wrap_header,
    wrapped_width,
)

COLUMNS = [("k", "Group size k"), ("epsilon", "Epsilon"), ("method", "Method")]
ROWS = [
    {"k": 1, "epsilon": 1.234567, "method": "record level", "extra": "kept in json"},
    {"k": 4, "epsilon": math.inf, "method": "[Lemma 6]"},
    {"k": 8, "epsilon": None, "method": "Lemma 5"},
]
ASSUMPTIONS = {"delta": 1e-5, "sigma": 1.1, "orders": [2, 4]}


def test_json_is_one_document_with_inf_as_null(capsys: pytest.CaptureFixture[str]) -> None:
    emit("Privacy", COLUMNS, ROWS, "json", assumptions=ASSUMPTIONS, notes=["a note"])
    document = json.loads(capsys.readouterr().out)
    assert document["results"][0] == ROWS[0]
    assert document["results"][1]["epsilon"] is None
    assert document["assumptions"] == {"delta": 1e-5, "sigma": 1.1, "orders": [2, 4]}
    assert document["notes"] == ["a note", NON_FINITE_NOTE]


def test_json_writes_the_given_document(capsys: pytest.CaptureFixture[str]) -> None:
    document = {"results": [{"epsilon": math.nan}], "target": {"epsilon": 2.0}}
    emit("Privacy", COLUMNS, [], "json", document=document)
    assert json.loads(capsys.readouterr().out) == {"results": [{"epsilon": None}], "target": {"epsilon": 2.0}}


def test_csv_has_header_and_rows(capsys: pytest.CaptureFixture[str]) -> None:
    emit("Privacy", COLUMNS, ROWS, "csv", assumptions=ASSUMPTIONS, notes=["not in csv"])
    lines = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert lines == [
        ["k", "epsilon", "method"],
        ["1", "1.234567", "record level"],
        ["4", "", "[Lemma 6]"],  # no finite bound: an empty field, as JSON's null
        ["8", "", "Lemma 5"],
    ]


def test_table_shows_title_headers_values_assumptions_notes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    emit("Privacy", COLUMNS, ROWS, "table", assumptions=ASSUMPTIONS, notes=["a note"])
    out = capsys.readouterr().out
    for text in (
        "Privacy",
        "Group size k",
        "Epsilon",
        "Method",
        "1.235",
        "unbounded",
        "[Lemma 6]",
        "Assumptions",
        "delta: 1e-05",
        "orders: 2, 4",
        "a note",
    ):
        assert text in out, out
    assert "\x1b[" not in out  # no colour codes when stdout is not a terminal


@pytest.mark.parametrize(
    "value, shown",
    [
        (None, "-"),
        (1.234567, "1.235"),
        (0.000123456, "0.0001235"),
        (100.0, "100"),
        (math.inf, "unbounded"),
        (-math.inf, "-unbounded"),
        (math.nan, "undefined"),
        (3, "3"),
        (True, "yes"),
        ([1, 2.5], "1, 2.5"),
        ("x", "x"),
    ],
)
def test_format_cell(value: object, shown: str) -> None:
    assert format_cell(value) == shown


def test_unknown_format_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown output format"):
        emit("t", COLUMNS, ROWS, "xml")


def test_headers_wrap_between_words_and_after_a_slash() -> None:
    assert wrap_header("RDP/tight", 6) == ["RDP/", "tight"]
    assert wrap_header("q: min / median / max", 10) == ["q: min /", "median /", "max"]
    assert wrap_header("max overspend", 13) == ["max overspend"]
    assert wrap_header("elapsed", 3) == ["elapsed"]  # a word is never cut


def test_layout_wraps_headers_before_cells_and_folds_what_still_does_not_fit() -> None:
    words = Column("calibration column", cells=(5,), two_lines=5)
    text = Column("view", cells=(11,), two_lines=6)  # "none, model"
    number = Column("T=100000", cells=(8,), two_lines=8)
    # Natural widths fit: left alone.
    assert fit_widths([words, number], 80) == [18, 8]
    # Too wide: the header wraps ("calibration" stays whole), the cells do not.
    assert fit_widths([words, text, number], table_width([11, 11, 8])) == [11, 11, 8]
    # Narrower: the text cell takes two lines; the number never shrinks below its width.
    assert fit_widths([words, text, number], table_width([11, 6, 8])) == [11, 6, 8]
    assert fit_widths([words, text, number], table_width([11, 6, 8]) - 1) is None
    # Folded: each part repeats the label column and fits.
    parts = fold([text, *[number] * 8], 60, labels=1)
    assert [indices[0] for indices, _ in parts] == [0] * len(parts) and len(parts) > 1
    assert sorted(i for indices, _ in parts for i in indices[1:]) == list(range(1, 9))
    assert all(widths is not None and table_width(widths) <= 60 for _, widths in parts)


def test_a_table_too_wide_for_the_terminal_keeps_every_header_and_number_whole(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    columns = [("setting", "calibration"), *[(f"t{t}", f"T={t}") for t in (1, 10, 100, 1000, 10000)]]
    rows = [{"setting": "none, model", **{f"t{t}": 1234.5678 * t for t in (1, 10, 100, 1000, 10000)}}]
    emit("epsilon after T rounds", columns, rows, "table")
    out = capsys.readouterr().out
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 40
    for t in (1, 10, 100, 1000, 10000):
        assert f"T={t}" in out and format_cell(1234.5678 * t) in out
    assert out.count("none, model") == out.count("(continued)") + 1 > 1


def test_text_takes_three_lines_before_a_column_is_folded_away() -> None:
    assert wrapped_width("0.02612 / 0.02612 / 1", 2) == 11  # "0.02612 / 0.02612" | "/ 1" is 17
    assert wrapped_width("0.02612 / 0.02612 / 1", 3) == 9
    text = Column("q", cells=(21,), two_lines=11, three_lines=9)
    number = Column("R^2", cells=(8,), two_lines=8, three_lines=8)
    assert fit_widths([text, number], table_width([11, 8])) == [11, 8]  # two lines fit
    assert fit_widths([text, number], table_width([9, 8])) == [9, 8]
    assert fit_widths([text, number], table_width([9, 8]) - 1) is None


def test_folded_parts_repeat_every_column_it_takes_to_tell_the_rows_apart() -> None:
    rows = [["1", "RDP", "5"], ["1", "PLD", "2"], ["64", "RDP", "9"]]
    assert naming_columns(rows, 1) == 2  # k = 1 twice: k and bound
    assert naming_columns(rows, 3) == 3  # never fewer than the caller's
    assert naming_columns([["a", "x"], ["a", "x"]], 1) == 1  # alike in every column: nothing tells them apart
    assert naming_columns([], 2) == 2


def _printed(
    headers: list[str], rows: list[list[str]], justify: list[str], width: int, labels: int = 1
) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, highlight=False, file=io.StringIO())
    print_table(console, "t", headers, rows, justify, labels=labels)
    return console.export_text()


def test_a_fold_gains_label_columns_until_every_part_names_its_rows() -> None:
    headers = ["k", "bound", *[f"T={t}" for t in range(8)]]
    rows = [["1", "RDP", *["1.234"] * 8], ["1", "PLD", *["5.678"] * 8]]
    out = _printed(headers, rows, ["right", "left", *["right"] * 8], 40)
    assert out.count("(continued)") >= 1
    assert out.count("RDP") == out.count("PLD") == out.count("(continued)") + 1


def test_a_number_stays_on_one_line_even_where_its_part_cannot_fit() -> None:
    # A label of at least 9 columns (on three lines) and a 20-digit number cannot share 25: that
    # part is printed wider than the console rather than break the number across lines.
    number = "12345678901234567890"
    out = _printed(
        ["setting", "value", "other"],
        [["a b c d e f g h i j k l m n o", number, "x"]],
        ["left", "right", "left"],
        25,
    )
    assert number in out and "(continued)" in out
    assert max(len(line) for line in out.splitlines() if "(continued)" in line or "other" in line) <= 25
