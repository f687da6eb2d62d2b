"""Every command's default table, piped at 80 columns (issue 34, item 5).

rich used to fit a too-wide table by cutting its headers (`RDP/tig…`, `accura…`) and wrapping
numbers; `uldp_cli/table_layout.py` wraps headers at word and slash boundaries, lets text cells
take two lines, and folds what still does not fit. Each command here prints its table as a pipe
does (not a terminal, COLUMNS=80): no ellipsis in any table line, no line of its output
over 80 characters, and every header whole or wrapped between its words (against the same
command printed 1000 columns wide). A folded table repeats, in each part, columns whose cells
tell every row apart. `test_render.py` checks that the numbers stay whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from uldp.cli.main import cli

WIDTH = 80
BOX = "┃│┏┡└━─"

# Cheap enough for every run: each prints a table that is wider than 80 columns at its natural
# widths (headers to wrap, text cells to wrap, columns to fold).
FAST = {
    "dropout: Table 2 folds": [
        "dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0", "--silos-per-round", "50",
        "--rounds", "1,10,100,1000,10000,20000", "--no-paper",
    ],
    "personalize --compare": [
        "personalize", "--distribution", "three-levels", "--records", "300", "--calibrate-sigma",
        "--local-steps", "10", "--rounds", "50", "--compare",
    ],
    "report: RDP/tight": ["report", "--sigma", "5", "--q", "0.01", "--steps", "1000", "--accountant", "rdp"],
}  # fmt: skip

# The other commands' tables, a few seconds each.
SLOW = {
    "account": [
        "account", "--sigma", "5", "--q", "0.01", "--steps", "1000", "--k", "1,8",
        "--group-method", "rdp,normal",
    ],
    "account --algo": [
        "account", "--algo", "uldp-avg,uldp-avg-w", "--sigma", "5", "--rounds", "100", "--user-q", "0.5",
    ],
    "calibrate": ["calibrate", "--epsilon", "3", "--q", "0.01", "--steps", "1000"],
    "subject": [
        "subject", "--silos", "16", "--silos-per-round", "16", "--rounds", "100", "--local-steps", "10",
        "--record-q", "0.01", "--sigma", "3",
    ],
    "audit": [
        "audit", "--algo", "uldp-avg", "--dataset", "heart-disease", "--users", "60", "--canaries", "10",
        "--rounds", "1",
    ],
    "bench protocol": [
        "bench", "protocol", "--key-bits", "512", "--test-keys", "--params", "4", "--users", "5",
        "--compare-straightforward",
    ],
    "train": [
        "train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--user-budgets", "group-3",
        "--rounds", "1", "--noise-seed", "0",
    ],
}  # fmt: skip


# Two bounds for k = 64 (Lemmas 5 and 6): k alone does not name a row, k and bound do.
ACCOUNT_TWO_BOUNDS = [
    "account", "--sigma", "1", "--q", "0.01", "--steps", "1000", "--k", "1,64",
    "--group-method", "rdp,normal", "--orders", "2,3",
]  # fmt: skip


@dataclass
class Table:
    title: str
    header_lines: list[list[str]]  # each column's header, line by line
    rows: list[list[str]]  # each row's cells, a wrapped row's lines joined

    @property
    def headers(self) -> list[str]:
        return [" ".join(lines) for lines in self.header_lines]


def _readings(lines: list[str]) -> set[str]:
    """What a header printed on `lines` can be, broken as wrap_header breaks: between words
    (a space) or after a slash (nothing)."""
    readings = {lines[0]} if lines else {""}
    for line in lines[1:]:
        readings = {r + sep + line for r in readings for sep in ([" ", ""] if r.endswith("/") else [" "])}
    return readings


def _cells(line: str, rule: str) -> list[str]:
    return line.strip()[1:-1].split(rule)


def _tables(lines: list[str]) -> list[Table]:
    """The tables printed, parsed back; a row continues on lines whose first cell is empty
    (true of the tables parsed here, whose first column never wraps)."""
    tables: list[Table] = []
    for i, line in enumerate(lines):
        if not line.startswith("┏"):
            continue
        end = next(j for j in range(i, len(lines)) if lines[j].startswith("┡"))
        header_lines = [_cells(lines[j], "┃") for j in range(i + 1, end)]
        headers = [[h[c].strip() for h in header_lines if h[c].strip()] for c in range(len(header_lines[0]))]
        rows: list[list[list[str]]] = []
        for body in lines[end + 1 :]:
            if not body.startswith("│"):
                break
            cells = _cells(body, "│")
            if cells[0].strip() or not rows:
                rows.append([[c] for c in cells])
            else:
                for held, cell in zip(rows[-1], cells):
                    held.append(cell)
        joined = [[" ".join(filter(None, (line.strip() for line in cell))) for cell in row] for row in rows]
        tables.append(Table(lines[i - 1].strip(), headers, joined))
    return tables


def _run(args: list[str], width: int) -> list[str]:
    result = CliRunner(env={"COLUMNS": str(width)}).invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def _check(args: list[str], width: int = WIDTH) -> list[Table]:
    lines = _run(args, width)
    table = [line for line in lines if line[:1] in BOX]
    assert table, "\n".join(lines)
    for line in table:
        assert "…" not in line and "..." not in line, line
    too_long = [line for line in lines if len(line) > width]
    assert not too_long, "\n".join(too_long)
    # No header split mid-word: joined back, each is one the natural-width table prints.
    tables = _tables(lines)
    whole = {header for t in _tables(_run(args, 1000)) for header in t.headers}
    for t in tables:
        for printed in t.header_lines:
            assert _readings(printed) & whole, (printed, whole)
    return tables


def _parts_name_their_rows(tables: list[Table]) -> list[Table]:
    """The parts of the first folded table, after checking that each repeats, row for row, the
    same label cells and that those cells tell every row apart."""
    first = next(
        i for i, t in enumerate(tables) if i + 1 < len(tables) and tables[i + 1].title == "(continued)"
    )
    parts = [tables[first]]
    for t in tables[first + 1 :]:
        if t.title != "(continued)":
            break
        parts.append(t)
    labels = 0
    while all(p.headers[labels] == parts[0].headers[labels] for p in parts):
        labels += 1
    for part in parts:
        named = [tuple(row[:labels]) for row in part.rows]
        assert named == [tuple(row[:labels]) for row in parts[0].rows], part
        assert len(set(named)) == len(named), (part.headers[:labels], named)
    return parts


@pytest.mark.parametrize("args", FAST.values(), ids=FAST.keys())
def test_a_wide_table_fits_80_columns_without_cutting_anything(args: list[str]) -> None:
    _check(args)


def test_dropout_folds_with_its_labels_repeated_in_every_part() -> None:
    parts = _parts_name_their_rows(_check(FAST["dropout: Table 2 folds"]))
    assert len(parts) > 1 and parts[0].headers[:3] == ["dropout", "calibration", "accounting"]


@pytest.mark.parametrize("width", [80, 60])
def test_account_rows_stay_named_where_k_alone_does_not_name_them(width: int) -> None:
    tables = _check(ACCOUNT_TWO_BOUNDS, width)
    if width == 80:  # fits (text on up to three lines): one table, each row named by k and bound
        (table,) = tables
        named = [(row[0], row[1]) for row in table.rows]
        assert len(set(named)) == len(named) == 3
    else:
        parts = _parts_name_their_rows(tables)
        assert len(parts) == 2 and parts[1].headers == ["k", "bound", "note"]


@pytest.mark.slow
@pytest.mark.parametrize("args", SLOW.values(), ids=SLOW.keys())
def test_every_other_command_fits_80_columns(args: list[str]) -> None:
    _check(args)
