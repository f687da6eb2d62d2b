"""Files of `uldp personalize`: the budgets CSV it reads, the rates CSV and the plot it writes.

CSV goes through pyarrow when it is installed (a million rows read or written in about half a
second each), else through the standard csv module (a few seconds per million rows); either
way floats are written in their shortest round-trip form, so the q read back is the q that was
accounted. Reading has one behaviour on both paths: the header is checked once (a UTF-8
byte-order mark is dropped, duplicated names are refused), and whatever pyarrow refuses is read
again by the csv module, which is the reference: it either accepts the file with the same values
or names the first bad row (a ragged row, a value that is not a number) in its own words.
matplotlib is imported only when a plot is asked for, with the Agg backend (no display).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import click
import numpy as np

from uldp.accountants.personalized.rate_search import ScfFit
from uldp.accountants.personalized.record_rates import STATUSES, Personalization
from uldp.errors import DataError
from uldp.input_files import CAPS, open_text

from .errors import one_line
from .figures import save_png, subplots
from .files import atomic_write_bytes

OUTPUT_COLUMNS = ("q", "epsilon_spent", "status")
# Records drawn in a plot at most (a random subset beyond that keeps the file small).
PLOT_POINTS = 5000


@dataclass(frozen=True)
class Budgets:
    """Per-record budgets and the ids that name the records in the output."""

    ids: object  # as written in the file (pyarrow or numpy strings), or row numbers
    id_name: str
    budget_name: str
    values: np.ndarray
    source: str


def read_budgets(path: Path, budget_column: str, id_column: str, id_given: bool) -> Budgets:
    """Budgets from a CSV file with a header; ids from `id_column`, else the row numbers (from 1).

    Every problem is a `click.BadParameter` on --epsilon-csv (one line, exit status 2): an unreadable
    file, a missing column, a value that is not a number, a negative, NaN, infinite or empty
    budget (naming the first such row and its id).
    """

    def fail(message: str) -> click.BadParameter:
        return click.BadParameter(f"{path}: {message}", param_hint="'--epsilon-csv'")

    try:
        # utf-8-sig: a byte-order mark (spreadsheets write one) is not part of the first name.
        with open_text(path, "--epsilon-csv", cap=CAPS["table"]) as handle:
            header = next(csv.reader(handle), None)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise fail(f"cannot read it ({one_line(error)})") from error
    if not header:
        raise fail("empty file; expected a header line naming the columns")
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        # Which of two equal names holds the budgets is anyone's guess (pyarrow took the first,
        # the csv module the last): refuse rather than pick one.
        raise fail(
            f"column {repeated[0]!r} appears {header.count(repeated[0])} times in the header; "
            "give each column its own name"
        )
    if budget_column not in header:
        raise fail(
            f"no column {budget_column!r} (columns: {', '.join(header)}); "
            "name the budget column with --epsilon-column"
        )
    if id_given and id_column == budget_column:
        raise click.BadParameter(
            f"{id_column!r} is also the --epsilon-column; the ids and the budgets need a column each",
            param_hint="'--id-column'",
        )
    # The default id column doubling as the budget column: the records are numbered instead.
    has_ids = id_column in header and id_column != budget_column
    if id_given and not has_ids:
        raise fail(f"no column {id_column!r} (columns: {', '.join(header)}) for --id-column")
    for name in (budget_column, id_column if has_ids else "row"):
        if name in OUTPUT_COLUMNS:
            raise fail(f"column {name!r} would clash with the output's {', '.join(OUTPUT_COLUMNS)}")
    try:
        ids, values, missing = _read(path, len(header), budget_column, id_column if has_ids else None)
    except ValueError as error:
        raise fail(one_line(error)) from error
    if values.size == 0:
        raise fail("no records")
    if ids is None:
        ids = np.arange(1, values.size + 1)
    bad = np.flatnonzero(~(np.isfinite(values) & (values >= 0)))
    if bad.size:
        row = int(bad[0])
        value = "missing" if missing[row] else repr(float(values[row]))
        more = f" ({bad.size} such rows)" if bad.size > 1 else ""
        raise fail(f"row {row + 1} (id {ids[row]!s}): budget {value} is not a finite number >= 0{more}")
    return Budgets(ids, id_column if has_ids else "row", budget_column, values, str(path))


def _pyarrow() -> bool:
    """Whether pyarrow is there; without it the standard csv module does the same, slower."""
    try:
        import pyarrow.csv  # noqa: F401
    except ImportError:
        return False
    return True


def _read(path: Path, width: int, budget_column: str, id_column: str | None):
    """pyarrow if it is there and accepts the file, else the csv module (the reference)."""
    if _pyarrow():
        try:
            return _read_arrow(path, budget_column, id_column)
        except _ArrowRefused:
            pass  # the csv module reads it the same way or names the problem in its own words
    return _read_stdlib(path, width, budget_column, id_column)


class _ArrowRefused(Exception):
    """pyarrow could not read the file (its messages differ from the csv module's)."""


def _read_arrow(path: Path, budget_column: str, id_column: str | None):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    columns = [budget_column] if id_column is None else [id_column, budget_column]
    types = {budget_column: pa.float64(), **({} if id_column is None else {id_column: pa.string()})}
    try:
        table = pacsv.read_csv(
            path,
            convert_options=pacsv.ConvertOptions(
                include_columns=columns, column_types=types, null_values=[""], strings_can_be_null=False
            ),
        )
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError) as error:
        raise _ArrowRefused(str(error)) from error
    column = table.column(budget_column)
    values = column.to_numpy(zero_copy_only=False)  # empty cells (nulls) arrive as NaN
    missing = column.is_null().to_numpy(zero_copy_only=False)
    ids = None if id_column is None else table.column(id_column).combine_chunks()
    return ids, values, missing


def _read_stdlib(path: Path, width: int, budget_column: str, id_column: str | None):
    ids, values, missing = [], [], []
    try:
        with open_text(path, "--epsilon-csv", cap=CAPS["table"]) as handle:
            lines = csv.reader(handle)
            header = next(lines)
            budget_at = header.index(budget_column)
            id_at = None if id_column is None else header.index(id_column)
            row = 0
            for record in lines:
                if not record:
                    continue  # a blank line, as pyarrow skips them
                row += 1
                if len(record) != width:
                    raise DataError(
                        f"row {row} has {len(record)} field{'s' * (len(record) != 1)}, the header has "
                        f"{width}; every row needs one field per column"
                    )
                text = record[budget_at].strip()
                missing.append(text == "")
                try:
                    values.append(float(text) if text else float("nan"))
                except ValueError:
                    raise DataError(f"row {row}: budget {text!r} is not a number") from None
                if id_at is not None:
                    ids.append(record[id_at])
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"cannot read it ({one_line(error)})") from error
    return (
        None if id_column is None else np.asarray(ids, dtype=object),
        np.asarray(values, dtype=float),
        np.asarray(missing, dtype=bool),
    )


def write_rates(path: Path, budgets: Budgets, result: Personalization) -> None:
    """The records' ids and budgets with their q, the epsilon they spend and their status.

    Floats are written in their shortest round-trip form, so the q read back is the q accounted.
    """
    names = [budgets.id_name, budgets.budget_name, *OUTPUT_COLUMNS]
    data: bytes | memoryview
    if _pyarrow():
        data = _rates_arrow(names, budgets, result)
    else:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(names)
        status = np.asarray(STATUSES, dtype=object)[result.status]
        writer.writerows(
            zip(
                list(budgets.ids),  # type: ignore[call-overload]  # an array of the file's ids
                budgets.values.tolist(),
                result.q.tolist(),
                result.spent.tolist(),
                status.tolist(),
            )
        )
        data = buffer.getvalue().encode("utf-8")
    atomic_write_bytes(path, data)


def _rates_arrow(names: list[str], budgets: Budgets, result: Personalization) -> memoryview:
    import pyarrow as pa

    ids = budgets.ids if isinstance(budgets.ids, pa.Array) else _arrow(np.asarray(budgets.ids))
    table = pa.table(
        dict(
            zip(
                names,
                [
                    ids,
                    _arrow(budgets.values),
                    _arrow(result.q),
                    _arrow(result.spent),
                    pa.DictionaryArray.from_arrays(_arrow(result.status), pa.array(STATUSES)),
                ],
            )
        )
    )
    header = io.StringIO()
    csv.writer(header, lineterminator="\n").writerow(names)
    try:  # plain fields, unless an id holds a comma, a quote or a line break
        return _csv_bytes(header.getvalue(), table, "none")
    except pa.ArrowInvalid:
        return _csv_bytes(header.getvalue(), table, "needed")


def _arrow(values: np.ndarray):
    """A numpy array as an arrow array, without copying; `pa.array` would first import pandas
    (half a second) to check whether it was given a pandas object."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    kind = {
        np.dtype(np.float64): pa.float64(),
        np.dtype(np.int64): pa.int64(),
        np.dtype(np.uint8): pa.uint8(),
    }[values.dtype]
    return pa.Array.from_buffers(kind, values.size, [None, pa.py_buffer(values)])


def _csv_bytes(header: str, table, quoting: str) -> memoryview:
    import pyarrow.csv as pacsv

    buffer = io.BytesIO()
    buffer.write(header.encode("utf-8"))
    pacsv.write_csv(
        table, buffer, write_options=pacsv.WriteOptions(include_header=False, quoting_style=quoting)
    )
    return buffer.getbuffer()


def draw_plot(
    path: Path,
    qs: np.ndarray,
    epsilons: np.ndarray,
    fit: ScfFit,
    result: Personalization,
    title: str,
    unit: str = "records",
) -> None:
    """epsilon*(q), the SCF fit and each record's (or user's: `unit`) (q, budget) on a log q
    axis, over the fit's error (fit - exact) in a second panel, as a PNG.

    The fit is close to epsilon*(q) where most budgets lie (R^2 near 1), so on the upper panel
    alone it would hide under the exact curve: it is drawn on top, dashed, and the lower panel
    shows the difference, whose sign is what matters (below 0 the fit under-states epsilon and
    a record given the fit's q overspends its budget).
    """
    figure, (axes, error_axes) = subplots(
        nrows=2, sharex=True, figsize=(7.5, 6.2), dpi=120, gridspec_kw={"height_ratios": [3, 1.4]}
    )
    fitted = fit(qs)
    used = np.flatnonzero(result.q > 0)
    if used.size > PLOT_POINTS:
        used = np.sort(np.random.default_rng(0).choice(used, PLOT_POINTS, replace=False))
    axes.scatter(
        result.q[used],
        result.budgets[used],
        s=14,
        color="tab:blue",
        alpha=0.35,
        linewidths=0,
        zorder=1,
        label=f"{unit} (q, budget), {result.method}",
    )
    axes.plot(qs, epsilons, color="black", lw=2.4, zorder=2, label="epsilon*(q), exact")
    axes.plot(
        qs,
        fitted,
        color="tab:orange",
        lw=1.6,
        ls=(0, (4, 3)),
        zorder=3,
        label=f"SCF fit e^(aq+b)+c, R^2 = {fit.r2:.5f}",
    )
    axes.set_xscale("log")
    # The budgets are what the plot is about; epsilon*(q) may climb far above them near q = 1.
    axes.set_ylim(0, 1.15 * max(float(result.budgets.max()), float(epsilons[0])))
    axes.set_ylabel("epsilon at delta")
    axes.set_title(title, fontsize=9)
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(fontsize=8, loc="upper left")

    difference = fitted - epsilons
    error_axes.axhline(0.0, color="black", lw=0.8)
    error_axes.plot(qs, difference, color="tab:orange", lw=1.4)
    error_axes.fill_between(qs, difference, 0.0, where=difference < 0, color="tab:red", alpha=0.25, lw=0)
    error_axes.set_ylim(*_error_limits(qs, difference, result.q[used]))
    error_axes.set_xlabel("sampling probability q")
    error_axes.set_ylabel("SCF fit - exact (epsilon)", fontsize=9)
    # A title rather than a legend: nothing in the panel is covered by it.
    error_axes.set_title(
        f"shaded: the fit is below epsilon*(q), so a {unit[:-1]} given the fit's q overspends",
        fontsize=8,
        loc="left",
    )
    error_axes.grid(True, which="major", alpha=0.3)
    save_png(figure, path)


def _error_limits(qs: np.ndarray, difference: np.ndarray, record_qs: np.ndarray) -> tuple[float, float]:
    """y limits of the error panel: the difference over the records' q range (where the fit is
    used), with a margin, so a fit that runs away near q = 1 does not flatten the rest."""
    inside = (qs >= record_qs.min()) & (qs <= record_qs.max()) if record_qs.size else np.ones_like(qs, bool)
    shown = difference[inside] if inside.any() else difference
    shown = shown[np.isfinite(shown)]
    if shown.size == 0:
        return -1.0, 1.0
    reach = max(float(np.abs(shown).max()), 1e-12) * 1.15
    return -reach, reach
