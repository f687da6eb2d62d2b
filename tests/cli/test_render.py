from __future__ import annotations

import csv
import io
import json
import math

import pytest

from uldp.cli.render import NON_FINITE_NOTE, emit, format_cell

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
