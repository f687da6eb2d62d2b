"""Rendering one result as a table for people, or as JSON or CSV for programs.

Every subcommand builds rows (dicts) and calls `emit`; nothing else writes results to stdout.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from uldp.errors import InvalidParameter

if TYPE_CHECKING:
    from rich.console import Console

FORMATS = ("table", "json", "csv")

NON_FINITE_NOTE = "non-finite numbers (inf, nan) are written as null"
#: How the table shows a non-finite float. An infinite epsilon is a true statement (no finite
#: bound at that delta), but the token `inf` reads as a number a script or a person may compute
#: with; the words say what it means (issue 12: no non-finite number is printed as a result).
UNBOUNDED, UNDEFINED = "unbounded", "undefined"


def emit(
    title: str,
    columns: list[tuple[str, str]],
    rows: list[dict],
    fmt: str,
    *,
    assumptions: dict | None = None,
    document: dict | None = None,
    notes: list[str] | None = None,
    labels: int = 1,
) -> None:
    """Write a result to stdout in `fmt`, one of `FORMATS`.

    `columns` are (row key, header) pairs in display order; the first `labels` of them name a
    row, and a table too wide for the terminal repeats them in each part (`print_table`).

    - table: a rich table titled `title`, then an "Assumptions" block (`key: value` lines) and
      the notes. Floats get 4 significant digits, None shows as `-`, an infinite value as
      `unbounded` and nan as `undefined`.
    - json: exactly one JSON document: `document` if given, else
      `{"results": rows, "assumptions": assumptions, "notes": notes}` (rows keep all their
      keys). JSON has no infinity, and an epsilon can be infinite (no bound at that delta), so
      inf and nan are written as `null`; in the default document a note then says so.
    - csv: a header of the column keys, then one line per row; floats at full precision,
      None and non-finite floats as an empty field (as JSON's null). Assumptions and notes are
      left out so the output stays one rectangular table.
    """
    if fmt == "table":
        _emit_table(title, columns, rows, assumptions or {}, notes or [], labels)
    elif fmt == "json":
        if document is None:
            document = {"results": rows, "assumptions": assumptions or {}, "notes": notes or []}
            jsonable, replaced = _jsonable(document)
            if replaced:
                jsonable["notes"].append(NON_FINITE_NOTE)
            click.echo(json.dumps(jsonable, indent=2, allow_nan=False))
        else:
            click.echo(json_text(document), nl=False)
    elif fmt == "csv":
        click.echo(_csv_text(columns, rows), nl=False)
    else:
        raise InvalidParameter(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")


def json_text(document: Any) -> str:
    """`document` as indented JSON with a final newline: non-finite floats as null, numpy values
    as Python's (what `emit` writes for --format json, and commands write to files)."""
    return json.dumps(_jsonable(document)[0], indent=2, allow_nan=False) + "\n"


def format_cell(value: Any) -> str:
    """A value as a table shows it: 4 significant digits for floats, `-` for None."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isfinite(value):
            return f"{value:.4g}"
        return UNDEFINED if math.isnan(value) else ("-" if value < 0 else "") + UNBOUNDED
    if isinstance(value, (list, tuple)):
        return ", ".join(format_cell(item) for item in value)
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _emit_table(
    title: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Mapping[str, Any]],
    assumptions: Mapping[str, Any],
    notes: Sequence[str],
    labels: int,
) -> None:
    # rich is imported here so that the json and csv paths, and `uldp --help`, do not pay for it.
    from rich.console import Console
    from rich.text import Text

    # highlight off: rich would otherwise colour numbers inside the assumption lines at random.
    console = Console(highlight=False)
    justify = []
    for key, _ in columns:
        values = [row.get(key) for row in rows if row.get(key) is not None]
        numeric = bool(values) and all(_is_number(value) for value in values)
        justify.append("right" if numeric else "left")
    cells = [[format_cell(row.get(key)) for key, _ in columns] for row in rows]
    print_table(console, title, [header for _, header in columns], cells, justify, labels=labels)
    if assumptions:
        console.print(Text("Assumptions", style="bold"))
        for key, value in assumptions.items():
            _print_indented(console, f"{key}: {format_cell(value)}")
    if notes:
        console.print(Text("Notes", style="bold"))
        for note in notes:
            _print_indented(console, f"- {note}")


def print_table(
    console: Console,
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    justify: Sequence[str],
    *,
    labels: int = 1,
    caption: str | None = None,
) -> None:
    """Print `rows` under `headers` as rich tables that fit the console's width.

    Headers are never cut and cells never wrapped while they can be helped (`table_layout`):
    a header wraps onto more lines at its spaces and slashes, and a table still too wide is
    folded into parts that each repeat the first `labels` columns, and more where those do not
    tell every row apart (`naming_columns`). `justify` is each column's "left" or "right" (a
    number: never wrapped, even where its part must then be wider than the console); `caption`
    goes under the last part.
    """
    from rich.cells import cell_len
    from rich.segment import Segments
    from rich.table import Table
    from rich.text import Text

    from .table_layout import Column, fold, naming_columns, table_width, wrap_header, wrapped_width

    columns = []
    for i, header in enumerate(headers):
        cells = tuple(max(map(cell_len, row[i].splitlines()), default=0) for row in rows)
        lines = [line for row in rows for line in row[i].splitlines()]
        # Numbers (right-justified) never wrap; text may take two or three lines before a table folds.
        if justify[i] == "right":
            columns.append(Column(header, cells, max(cells, default=0), max(cells, default=0)))
        else:
            two, three = (max((wrapped_width(line, n) for line in lines), default=0) for n in (2, 3))
            columns.append(Column(header, cells, two, three))
    parts = fold(columns, console.width, naming_columns(rows, labels))
    for n, (indices, widths) in enumerate(parts):
        natural = widths == [max(columns[i].widest, len(headers[i])) for i in indices]
        table = Table(
            title=title if n == 0 else "(continued)",
            caption=caption if n == len(parts) - 1 else None,
            caption_justify="left",
        )
        for j, i in enumerate(indices):
            table.add_column(
                # the natural widths fit: rich's own layout, as it always was
                headers[i] if natural else "\n".join(wrap_header(headers[i], widths[j])),
                justify=justify[i],  # type: ignore[arg-type]
                width=None if natural else widths[j],
                no_wrap=justify[i] == "right",
                # fold, not rich's ellipsis: text a column cannot hold continues on the next line
                overflow="fold",
            )
        for row in rows:
            # Text, not str: a value such as "[1, 2]" must not be read as rich markup.
            table.add_row(*(Text(row[i]) for i in indices))
        wide = table_width(widths)
        if wide <= console.width:
            console.print(table)
        else:
            # Wider than the console only where a number would otherwise break: rendered at its
            # own width and printed uncropped, rather than let rich squeeze every column.
            console.print(Segments(console.render(table, console.options.update_width(wide))), crop=False)


def _print_indented(console: Console, line: str) -> None:
    # Wrapped here, with a hanging indent, rather than by rich, which would lose the indent and
    # pad the wrapped lines with trailing spaces.
    wrapped = textwrap.wrap(line, width=console.width, initial_indent="  ", subsequent_indent="    ")
    console.print("\n".join(wrapped), markup=False, soft_wrap=True)


def _csv_field(value: Any) -> Any:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, (list, tuple)):
        return ";".join(str(_csv_field(item)) for item in value)
    return value


def _csv_text(columns: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([key for key, _ in columns])
    for row in rows:
        writer.writerow([_csv_field(row.get(key)) for key, _ in columns])
    return buffer.getvalue()


def _jsonable(value: Any) -> tuple[Any, bool]:
    """`value` with non-finite floats as None, numpy scalars and arrays as Python values.

    Returns the converted value and whether any non-finite float was replaced.
    """
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value, False
    if isinstance(value, float):
        return (float(value), False) if math.isfinite(value) else (None, True)
    if isinstance(value, Mapping):
        pairs = [(str(key), _jsonable(item)) for key, item in value.items()]
        return {key: item for key, (item, _) in pairs}, any(r for _, (_, r) in pairs)
    if isinstance(value, (list, tuple)):
        items = [_jsonable(item) for item in value]
        return [item for item, _ in items], any(r for _, r in items)
    if isinstance(value, os.PathLike):
        return os.fspath(value), False
    # numpy scalars (item) and arrays (tolist), without importing numpy here.
    for method in ("tolist", "item"):
        if callable(getattr(value, method, None)):
            return _jsonable(getattr(value, method)())
    raise TypeError(f"cannot write {type(value).__name__} as JSON: {value!r}")
