"""`load_table`: a user's own CSV or Parquet file, with columns naming user, label and silo.

`read_frame`, `user_ids`, `labels` and `features` read a table's columns; `from_files` reads its
per-silo tables with them too (`own_files`), so both read a table alike.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
from pathlib import Path

import numpy as np

from uldp.errors import DataError
from uldp.input_files import CAPS, check_input

from .builtin import check_count, check_fraction
from .federated import TASKS, FederatedData
from .pipeline import federate
from .records import Records

CSV_SUFFIXES = (".csv", ".tsv", ".txt", ".csv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")
DEFAULT_SILOS = 5
MAX_TEXT_LEVELS = 100


def read_frame(path: str | Path):
    """The file as a pandas DataFrame: CSV (comma, or tab for .tsv) or Parquet, by suffix."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"--path: no file at {path}")
    check_input(path, "--path", cap=CAPS["table"])  # not read into memory past its cap
    name = path.name.lower()
    try:
        import pandas as pd
    except ModuleNotFoundError:
        raise DataError("--path: reading a table needs pandas: pip install 'uldp[data]'") from None
    if name.endswith(PARQUET_SUFFIXES):
        try:
            return pd.read_parquet(path)
        except ImportError:
            raise DataError(
                f"--path: reading Parquet ({path.name}) needs pyarrow: pip install pyarrow"
            ) from None
        except (OSError, ValueError) as error:
            raise DataError(
                f"--path: {path} is not a readable Parquet file ({' '.join(str(error).split())})"
            ) from None
    if name.endswith(CSV_SUFFIXES):
        sep = "\t" if name.endswith(".tsv") else ","
        try:
            check_csv_shape(path, sep)
            return pd.read_csv(path, sep=sep, encoding="utf-8-sig")
        except (ValueError, UnicodeDecodeError) as error:
            raise DataError(
                f"--path: {path} is not a readable CSV file ({' '.join(str(error).split())})"
            ) from None
    raise DataError(
        f"--path: {path.name} is neither CSV ({', '.join(CSV_SUFFIXES)}) "
        f"nor Parquet ({', '.join(PARQUET_SUFFIXES)})"
    )


def check_csv_shape(path: Path, sep: str) -> None:
    """Refuse what pandas would quietly repair: a header naming a column twice (pandas renames the
    second `b.1`) and a row with fewer fields than the header (pandas fills it with NaN, which
    reads as a missing value rather than a broken file). A UTF-8 byte-order mark is dropped, as
    the budgets reader of `uldp personalize` does, so both readers see the same columns."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", newline="") as handle:
        rows = csv.reader(handle, delimiter=sep)
        header = next(rows, None)
        if not header:
            raise DataError(f"--path: {path} is empty; expected a header line naming the columns")
        repeated = sorted({column for column in header if header.count(column) > 1})
        if repeated:
            raise DataError(
                f"--path: {path}: column {repeated[0]!r} appears {header.count(repeated[0])} times in "
                "the header; give each column one name"
            )
        for line, row in enumerate(rows, start=2):
            if row and len(row) != len(header):
                raise DataError(
                    f"--path: {path}: line {line} has {len(row)} fields, the header has "
                    f"{len(header)}; fix or drop that row"
                )


def _column(frame, column: str, option: str):
    if column not in frame.columns:
        shown = ", ".join(map(str, frame.columns[:12])) + (", ..." if frame.shape[1] > 12 else "")
        raise DataError(f"{option}: no column {column!r} in the table (its columns: {shown})")
    values = frame[column]
    if values.isna().any():
        raise DataError(
            f"{option}: column {column!r} has {int(values.isna().sum())} "
            "missing values; fill or drop those rows first"
        )
    return values


def user_ids(frame, column: str):
    """The user (subject) column; a DataError naming it and the first row with no id (empty,
    blank or missing: NaN, None, NA), since every record must belong to someone. Rows are
    numbered from 1, the first data row (the header is not counted), as for --epsilon-column."""
    import pandas as pd

    if column not in frame.columns:
        return _column(frame, column, "--user-column")  # its "no column" error
    values = frame[column]
    missing_mask = pd.isna(values).to_numpy(dtype=bool)
    if not pd.api.types.is_numeric_dtype(values):  # text ids: a blank one is no id either
        missing_mask |= values.map(lambda value: isinstance(value, str) and not value.strip()).to_numpy(
            dtype=bool
        )
    missing = np.flatnonzero(missing_mask)
    if missing.size:
        more = f"; {missing.size} rows have none" if missing.size > 1 else ""
        raise DataError(
            f"--user-column {column}: row {int(missing[0]) + 1} has no id "
            f"(every record needs its subject/user){more}"
        )
    return values


def _codes(values) -> tuple[np.ndarray, tuple[str, ...]]:
    """Values mapped to 0..k-1 in sorted order, and the sorted distinct values as text."""
    levels, codes = np.unique(values.to_numpy(), return_inverse=True)
    return codes.astype(np.int64), tuple(str(level) for level in levels)


def labels(frame, label_column: str, task: str) -> tuple[np.ndarray, int, list[str], tuple[str, ...]]:
    """(y, n_classes, columns used, class names) for `task`; survival reads 'TIME,EVENT'."""
    if task == "survival":
        names = [name.strip() for name in label_column.split(",")]
        if len(names) != 2:
            raise DataError(
                f"--label-column for a survival task names two columns, 'TIME,EVENT', got {label_column!r}"
            )
        time = _column(frame, names[0], "--label-column")
        event = _column(frame, names[1], "--label-column")
        try:
            time = time.to_numpy(dtype=np.float64)
            event = event.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise DataError(f"--label-column: {names[0]!r} and {names[1]!r} must be numbers") from None
        if not set(np.unique(event).tolist()) <= {0.0, 1.0}:
            raise DataError(f"--label-column: event column {names[1]!r} must hold 0 and 1")
        if (time < 0).any():
            raise DataError(f"--label-column: time column {names[0]!r} has negative times")
        return np.column_stack([time, event]).astype(np.float32), 1, names, ()
    codes, levels = _codes(_column(frame, label_column, "--label-column"))
    if task == "binary" and len(levels) != 2:
        raise DataError(
            f"--label-column: a binary task needs exactly 2 distinct labels in "
            f"{label_column!r}, found {len(levels)}"
        )
    if len(levels) < 2:
        raise DataError(f"--label-column: {label_column!r} holds a single label")
    return codes, len(levels), [label_column], levels


def features(frame) -> tuple[np.ndarray, list[str]]:
    """Numeric and boolean columns as they are; text columns one-hot, first level dropped."""
    import pandas as pd

    if frame.shape[1] == 0:
        raise DataError("--path: the table has no feature column besides user, label and silo")
    missing = [str(column) for column in frame.columns if frame[column].isna().any()]
    if missing:
        raise DataError(
            f"--path: feature columns with missing values: {', '.join(missing)}; fill or drop them first"
        )
    text = [
        column
        for column in frame.columns
        if not (pd.api.types.is_numeric_dtype(frame[column]) or pd.api.types.is_bool_dtype(frame[column]))
    ]
    for column in text:
        levels = frame[column].nunique()
        if levels > MAX_TEXT_LEVELS:
            raise DataError(
                f"--path: text column {column!r} has {levels} distinct values; "
                "drop it or encode it as numbers"
            )
    encoded = pd.get_dummies(frame, columns=text, drop_first=True, dtype=np.float32)
    return encoded.to_numpy(dtype=np.float32), [str(column) for column in encoded.columns]


def load_table(
    path: str,
    *,
    user_column: str,
    label_column: str,
    silo_column: str | None = None,
    silos: int | None = None,
    task: str = "binary",
    seed: int = 0,
    test_fraction: float = 0.2,
    budget_column: str | None = None,
) -> FederatedData:
    """Any CSV or Parquet table with one record per row, federated.

    `user_column` names each record's user (its subject; a row without one is refused);
    `silo_column`, if given, its silo (else records are spread over `silos` silos uniformly, 5
    by default); `label_column` the target (for `task='survival'`, two columns 'TIME,EVENT').
    Every other column is a feature: numbers and booleans as they are, text one-hot encoded;
    features are standardised on the training split. Each silo is split into train and test,
    stratified by label. `budget_column`, if
    given, holds each record's privacy budget epsilon (rPDP-FL): it is not a feature, and the
    training records' budgets come back as `record_budget` (checked by
    `accountants.personalized.record_rates.check_budgets`).
    """
    if task not in TASKS:
        raise DataError(f"--task must be one of {', '.join(TASKS)}, got {task!r}")
    seed = check_count(seed, "--seed", minimum=0)
    test_fraction = check_fraction(test_fraction)
    if silos is not None:
        silos = check_count(silos, "--silos")
    frame = read_frame(path)
    if len(frame) == 0:
        raise DataError(f"--path: {path} has no rows")
    named = [user_column, *(name.strip() for name in label_column.split(","))]
    named += [] if silo_column is None else [silo_column]
    named += [] if budget_column is None else [budget_column]
    if len(set(named)) != len(named):
        raise DataError(
            "--user-column, --label-column, --silo-column and --epsilon-column must name "
            f"different columns, got {', '.join(named)}"
        )
    users, _ = _codes(user_ids(frame, user_column))
    y, n_classes, label_columns, classes = labels(frame, label_column, task)
    used = [user_column, *label_columns]
    silo_codes = None
    silo_names: tuple[str, ...] = ()
    if silo_column is not None:
        silo_codes, silo_names = _codes(_column(frame, silo_column, "--silo-column"))
        if silos is not None and silos != len(silo_names):
            raise DataError(
                f"--silos {silos} disagrees with the {len(silo_names)} distinct "
                f"values of --silo-column {silo_column!r}"
            )
        used.append(silo_column)
    budgets = None
    if budget_column is not None:
        budgets = _budget_values(frame, budget_column)
        used.append(budget_column)
    x, feature_names = features(frame.drop(columns=used))
    n_silos = len(silo_names) if silo_column is not None else (silos or DEFAULT_SILOS)
    records = Records(
        name=Path(path).name,
        task=task,
        synthetic=False,
        x=x,
        y=y,
        n_classes=n_classes,
        source=(
            f"table {path}: {len(frame)} rows, {len(feature_names)} features, users from "
            f"column {user_column!r}"
        ),
        silos=silo_codes,
        silo_names=silo_names,
        users=users,
        default_silos=n_silos,
    )
    description = {
        "method": "given" if silo_column is not None else "uniform",
        "alpha_records": None,
        "alpha_silos": None,
        "main_silo_share": None,
        "labels_per_user": None,
        "users": f"column {user_column}",
        "silos": f"column {silo_column}" if silo_column is not None else "allocated uniformly",
        "seed": seed,
        "features": feature_names,
    }
    if classes:
        description["classes"] = list(classes)  # class id i is classes[i]
    if silo_column is not None:
        description["silo_names"] = list(silo_names)
    data = federate(
        records,
        n_users=int(users.max()) + 1,
        n_silos=n_silos,
        method="uniform",
        seed=seed,
        labels_per_user=None,
        test_fraction=test_fraction,
        description=description,
    )
    if budgets is None:
        return data
    assert data.record_index is not None  # federate always sets it
    return dataclasses.replace(data, record_budget=budgets[data.record_index])


def _budget_values(frame, column: str) -> np.ndarray:
    """The budget column as floats; a DataError naming --epsilon-column and the first bad row
    (missing, not a number, <= 0, infinite): every record needs a positive finite budget."""
    import pandas as pd

    if column not in frame.columns:
        shown = ", ".join(map(str, frame.columns[:12])) + (", ..." if frame.shape[1] > 12 else "")
        raise DataError(f"--epsilon-column: no column {column!r} in the table (its columns: {shown})")
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
    if bad.size:
        row = int(bad[0])
        raw = frame[column].iloc[row]
        what = "missing" if pd.isna(raw) else f"{raw}, not a finite number > 0"
        raise DataError(
            f"--epsilon-column: {column!r} of row {row + 1} is {what}; every record needs a budget "
            f"epsilon > 0 ({bad.size} bad row(s))"
        )
    return values
