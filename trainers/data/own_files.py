"""The user's own records in files, one file per silo named after the file's stem.

`.npz` files (`numpy.savez`: arrays x, y, users, and optionally x_test, y_test) are read into
per-silo arrays for `from_silos`; CSV or Parquet tables with the same columns are joined and read
as `load_table` reads a table (`tabular`), then federated with each row's file as its silo.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from uldp.errors import DataError, InvalidParameter
from uldp.input_files import CAPS, check_input

from . import tabular
from .federated import FederatedData
from .own_arrays import check_task, federate_arrays

NPZ_SUFFIX = ".npz"


def silo_files(paths: Any) -> tuple[list[Path], bool]:
    """The files, one per silo with a stem of its own, and whether they are `.npz` (else tables)."""
    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(path) for path in paths]
    if not files:
        raise DataError("paths: no file given; give one file per silo")
    for path in files:
        if not path.is_file():
            raise DataError(f"paths: no file at {path}")
    stems = [path.stem for path in files]
    repeated = sorted({stem for stem in stems if stems.count(stem) > 1})
    if repeated:
        raise DataError(
            f"paths: two files named {repeated[0]!r}; each silo is named after its file's stem, so give "
            "each file its own name"
        )
    kinds = {path.suffix.lower() == NPZ_SUFFIX for path in files}
    if len(kinds) > 1:
        raise DataError("paths: give files of one kind, all .npz or all CSV/Parquet tables")
    return files, kinds == {True}


def npz_silos(files: list[Path]) -> tuple[dict[str, tuple[Any, Any, Any]], dict[str, tuple[Any, Any]] | None]:
    """Per-silo (x, y, users) by stem, and per-silo (x_test, y_test) when every file has them
    (None when none has; a test split in some files only is refused)."""
    arrays = {path.stem: _read_npz(path) for path in files}
    tests = {stem: read[3:] for stem, read in arrays.items()}
    having = [stem for stem, (x, y) in tests.items() if x is not None and y is not None]
    if having and len(having) < len(tests):
        lacking = next(stem for stem in tests if stem not in having)
        raise DataError(
            f"paths: {having[0]}.npz has x_test and y_test, {lacking}.npz has not; give a test split in "
            "every file or in none"
        )
    return {stem: read[:3] for stem, read in arrays.items()}, (tests if having else None)


def _read_npz(path: Path) -> tuple[Any, ...]:
    """(x, y, users, x_test, y_test) of a `numpy.savez` file; the test arrays None when absent."""
    check_input(path, "paths", cap=CAPS["table"])
    try:
        with np.load(path, allow_pickle=False) as arrays:
            missing = [key for key in ("x", "y", "users") if key not in arrays.files]
            if missing:
                raise DataError(
                    f"paths: {path} has no array {missing[0]!r} (its arrays: {', '.join(arrays.files)}); "
                    "a silo's .npz holds x, y and users"
                )
            test = [arrays[key] if key in arrays.files else None for key in ("x_test", "y_test")]
            return (arrays["x"], arrays["y"], arrays["users"], *test)
    except DataError:  # a ValueError too: ours, already one line
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        if isinstance(error, ValueError) and "Object arrays" in str(error):
            raise DataError(
                f"paths: {path} stores an array as Python objects, which uldp does not unpickle; "
                "save ids as numbers or strings"
            ) from None
        raise DataError(
            f"paths: {path} is not a readable .npz file ({' '.join(str(error).split())})"
        ) from None


def from_tables(
    files: list[Path],
    *,
    user_column: str | None,
    label_column: str | None,
    task: str | None,
    n_classes: int | None,
    name: str,
    source: str,
    test_fraction: float,
    seed: int,
) -> FederatedData:
    """Per-silo tables joined (one set of columns, one coding of labels and text features) and
    read as `load_table` reads a table; the silo of each row is its file's stem."""
    import pandas as pd

    if user_column is None:
        raise InvalidParameter(
            "user_column: name the tables' column of user ids (every record needs its user)"
        )
    if label_column is None:
        raise InvalidParameter("label_column: name the tables' label column ('TIME,EVENT' for survival)")
    if task is None:
        task = "survival" if "," in label_column else "multiclass"
    task = check_task(task)
    frames = _tables(files, user_column)
    table = pd.concat(frames, ignore_index=True)
    y, found, label_columns, classes = tabular.labels(table, label_column, task)
    x, feature_names = tabular.features(table.drop(columns=[user_column, *label_columns]))
    extra: dict[str, Any] = {"users": f"column {user_column}", "features": feature_names}
    if classes:
        extra["classes"] = list(classes)  # class id i is classes[i]
    return federate_arrays(
        x,
        y,
        table[user_column].to_numpy(),  # every file's ids checked by `_tables`
        np.repeat([path.stem for path in files], [len(frame) for frame in frames]),
        test=None,
        task=task,
        n_classes=(found if n_classes is None else n_classes) if task == "multiclass" else n_classes,
        n_silos=None,
        name=name,
        source=source,
        test_fraction=test_fraction,
        seed=seed,
        synthetic=False,
        extra=extra,
    )


def _tables(files: list[Path], user_column: str) -> list[Any]:
    """Each silo's table (a pandas DataFrame): the columns of the first, rows, and a user id in
    every row (rows numbered within the file in a refusal)."""
    frames: list[Any] = []
    for path in files:
        frame = tabular.read_frame(path)
        if frames and list(frame.columns) != list(frames[0].columns):
            raise DataError(
                f"paths: {path} has columns {', '.join(map(str, frame.columns))}, {files[0]} has "
                f"{', '.join(map(str, frames[0].columns))}; every silo's table needs the same columns"
            )
        if len(frame) == 0:
            raise DataError(f"paths: {path} has no rows")
        try:
            tabular.user_ids(frame, user_column)
        except DataError as error:
            raise DataError(f"paths: {path}: {error}") from None
        frames.append(frame)
    return frames
