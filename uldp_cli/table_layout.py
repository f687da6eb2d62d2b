"""How a table fits the terminal: column widths, headers wrapped at word boundaries, folding.

Left to itself, rich fits a table that is wider than the terminal by shrinking its widest
columns, and a column narrower than its header's longest word cuts the header with an ellipsis
(`RDP/tig…`, issue 34) or wraps a number over two lines. Here a table is laid out instead in
steps, the first that fits wins:

1. every column at its natural width (what rich would print anyway);
2. every cell whole and each header wrapped at its spaces and after a slash (`RDP/` `tight`),
   shrinking the widest column first, so headers take two lines rather than one cut one;
3. as 2, and text cells (never numbers) wrapped at their spaces onto at most two lines, then
   three (a long text cell such as `0.02612 / 0.02612 / 1` would rather take three lines than
   push one column into a part of its own);
4. folded, as pandas prints a wide DataFrame: the columns are split into several tables, each
   repeating the label columns that name a row (`dropout`, `calibration`, `accounting`), so every
   number keeps its row. The label columns are at least the ones the caller names and as many
   more as it takes to tell every row apart (`naming_columns`): a part whose rows read alike
   (`k = 1 | -` twice) names nothing.

A number is never wrapped or cut: where even its part does not fit beside the label columns
(text on three lines), that part is printed wider than the terminal rather than break a number.

Pure functions of the headers and the cells' widths: the renderer measures the cells and draws.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

#: What one column costs on top of its content in rich's default table: a space of padding on
#: each side and the vertical rule on its left; the table's right edge adds one more.
COLUMN_EXTRA, EDGE = 3, 1

_AFTER_SLASH = re.compile(r"(?<=/)(?=.)")


def header_words(header: str) -> list[tuple[str, str]]:
    """The pieces a header may be wrapped between, each with the text that joins it to the
    piece before on one line: its words (joined by a space), and a slash inside a word ends a
    piece (joined by nothing: `RDP/` `tight`)."""
    return [
        (piece, " " if i == 0 else "")
        for word in header.split()
        for i, piece in enumerate(_AFTER_SLASH.split(word))
    ]


def wrap_header(header: str, width: int) -> list[str]:
    """`header` in lines of at most `width` characters, broken only between `header_words`
    (a piece longer than `width` stays whole on its own line)."""
    lines: list[str] = []
    for piece, glue in header_words(header):
        if lines and len(lines[-1]) + len(glue) + len(piece) <= width:
            lines[-1] += glue + piece
        else:
            lines.append(piece)
    return lines or [""]


def _longest_piece(header: str) -> int:
    return max((len(piece) for piece, _ in header_words(header)), default=0)


def table_width(widths: Sequence[int]) -> int:
    """The printed width of a table whose columns' contents are `widths` wide."""
    return sum(widths) + COLUMN_EXTRA * len(widths) + EDGE


@dataclass(frozen=True)
class Column:
    """What the layout needs of a column: its header, each row's cell width, and the width
    its widest cell needs on at most two lines and on at most three (None: as on two); for a
    column of numbers, which never wrap, both are its widest cell."""

    header: str
    cells: tuple[int, ...]
    two_lines: int
    three_lines: int | None = None

    @property
    def widest(self) -> int:
        return max(self.cells, default=0)

    def on_lines(self, lines: int) -> int:
        """The width its widest cell needs on at most `lines` (2 or 3) lines."""
        return self.two_lines if lines == 2 or self.three_lines is None else self.three_lines


def wrapped_width(text: str, lines: int) -> int:
    """The narrowest width at which `text`, wrapped greedily at its spaces (as rich wraps it),
    takes at most `lines` lines; a word is never cut, so never below its longest word."""
    words = text.split()
    if len(words) < 2:
        return len(text)
    width = max(map(len, words))
    while _greedy_lines(words, width) > lines:
        width += 1
    return width


def _greedy_lines(words: Sequence[str], width: int) -> int:
    # Greedy filling is what rich does, and for a given width no wrapping takes fewer lines.
    count, used = 1, -1
    for word in words:
        if used + 1 + len(word) > width:
            count, used = count + 1, len(word)
        else:
            used += 1 + len(word)
    return count if words else 0


def naming_columns(rows: Sequence[Sequence[str]], labels: int) -> int:
    """How many leading columns a folded part repeats: at least `labels`, and as many more as it
    takes for their cells to tell every row apart (rows equal in every column stay alike).

    A caller's count can fall short (`uldp account` with two bounds per k names a row by k and
    bound), and a part whose label cells repeat could not be read back to its rows.
    """
    distinct = len({tuple(row) for row in rows})
    count = min(labels, len(rows[0])) if rows else labels
    while rows and count < len(rows[0]) and len({tuple(row[:count]) for row in rows}) < distinct:
        count += 1
    return count


def fit_widths(columns: Sequence[Column], width: int) -> list[int] | None:
    """Content widths for `columns` in `width` characters (steps 1 to 3 of the module's
    docstring), or None when even three-line text cells and wrapped headers do not fit."""
    natural = [max(c.widest, len(c.header)) for c in columns]
    if table_width(natural) <= width:
        return natural
    widths = list(natural)
    # Headers first, every cell whole; a header already wrapped shrinks on before another wraps.
    floor = [max(c.widest, _longest_piece(c.header)) for c in columns]
    while table_width(widths) > width:
        shrinkable = [j for j in range(len(widths)) if widths[j] > floor[j]]
        if not shrinkable:
            break
        widths[max(shrinkable, key=lambda j: (widths[j] < natural[j], widths[j]))] -= 1
    if table_width(widths) <= width:
        return widths
    # Then text cells onto two lines, then three, each step where it wraps the fewest rows.
    for lines in (2, 3):
        floor = [max(c.on_lines(lines), _longest_piece(c.header)) for c in columns]
        if table_width(floor) > width:
            continue
        widths = [max(w, f) for w, f in zip(widths, floor)]
        while table_width(widths) > width:
            shrinkable = [j for j in range(len(widths)) if widths[j] > floor[j]]
            widths[min(shrinkable, key=lambda j: (_wrapped_rows(columns, widths, j), -widths[j]))] -= 1
        return widths
    return None


def narrowest_widths(columns: Sequence[Column]) -> list[int]:
    """The narrowest layout the steps allow (numbers whole, text on three lines, headers wrapped
    between their pieces): what a part gets when even that does not fit the terminal."""
    return [max(c.on_lines(3), _longest_piece(c.header)) for c in columns]


def _wrapped_rows(columns: Sequence[Column], widths: Sequence[int], shrunk: int) -> int:
    """How many rows take two lines when column `shrunk` is one character narrower."""
    narrower = [w - (j == shrunk) for j, w in enumerate(widths)]
    rows = zip(*(c.cells for c in columns))
    return sum(any(cell > w for cell, w in zip(row, narrower)) for row in rows)


def fold(columns: Sequence[Column], width: int, labels: int) -> list[tuple[list[int], list[int]]]:
    """The tables to print: (column indices, their content widths) for each, in order.

    One table when `fit_widths` fits them all; else the columns after the first `labels` are
    dealt out in order, each table taking the label columns and as many more as fit. A column
    that does not fit even beside the labels alone gets a table of its own at
    `narrowest_widths`, wider than `width` (a number is never broken to fit).
    """
    everything = list(range(len(columns)))
    whole = fit_widths(columns, width)
    if whole is not None:
        return [(everything, whole)]
    if len(columns) <= labels + 1:
        return [(everything, narrowest_widths(columns))]
    label_columns = everything[:labels]
    tables: list[tuple[list[int], list[int]]] = []
    rest = everything[labels:]
    while rest:
        taken: list[int] = []
        widths: list[int] | None = None
        for column in rest:
            trial = label_columns + taken + [column]
            fitted = fit_widths([columns[j] for j in trial], width)
            if fitted is None:
                break
            taken, widths = taken + [column], fitted
        if not taken or widths is None:
            taken = [rest[0]]
            widths = narrowest_widths([columns[j] for j in label_columns + taken])
        tables.append((label_columns + taken, widths))
        rest = rest[len(taken) :]
    return tables
