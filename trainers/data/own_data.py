"""The user's own data, with the id of the user each record belongs to, as a `FederatedData`.

Opacus's `make_private` takes the user's own data loader as it is; user-level DP needs one thing
more of the data: whose record each one is, for a user's records may sit in several silos
(ULDP-FL §3). So every form here names a user per record, and the silo of each record where
the data has one (a hospital's own table):

- `federated_data(x, y, users, silos=None, ...)`: arrays or tensors, one entry per record;
- `from_silos({"a": (x, y, users), ...})`: per-silo arrays;
- `from_datasets({"a": dataset, ...})`: per-silo torch Datasets whose items are (x, y, user);
- `from_files([...])`: per-silo `.npz` files (arrays x, y, users) or CSV/Parquet tables;
- `as_federated(obj)`: any of those forms (what a loader may return), and
  `load_data("my_data.py:load")`: a loader named the way `--model` names a factory.

User ids may be of any sortable kind (ints, strings, numpy or tensor ints); users are numbered
0..n-1 in sorted order of their ids and the ids kept as `FederatedData.user_ids`. Silo ids
likewise, their names kept in `allocation["silo_names"]`. Without silos, records are spread over
`n_silos` silos at random (5 by default), as the built-in sets are (ULDP-FL §5.1). Features are
stored as float32 of the records' own shape (tables, images, sequences) and are NOT standardised:
the model and its preprocessing are the user's. Without a given test split, each silo's records
are split into train and test, per class, as `federate` does for every data set.

This module is the public face and the coercion of any form; the work is done by `own_silos`
(per-silo arrays and Datasets joined), `own_files` (per-silo `.npz` files and tables read) and
`own_arrays` (every form's arrays checked and federated).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from uldp.errors import DataError, InvalidParameter, UldpError

from ..references import call_with, load_callable
from .federated import FederatedData
from .own_arrays import federate_arrays
from .own_files import from_tables, npz_silos, silo_files
from .own_silos import dataset_arrays, describe, is_dataset, silo_arrays

#: What `as_federated` (and so a `--data` loader) accepts, said in its refusals.
FORMS = (
    "a FederatedData; (x, y, users) or (x, y, users, silos); a dict with keys x, y, users "
    "(optionally silos, x_test, y_test, silos_test, task, n_classes, n_silos, name, test_fraction); "
    "per-silo (x, y, users) tuples in a list or a dict by silo name; or torch Datasets whose items "
    "are (x, y, user): one, a list, or a dict by silo name"
)
#: The keys of the dict form: `federated_data`'s keywords that describe the data.
DICT_KEYS = tuple(
    "x y users silos x_test y_test silos_test task n_classes n_silos name test_fraction".split()
)


def federated_data(
    x: Any,
    y: Any,
    users: Any,
    silos: Any = None,
    *,
    x_test: Any = None,
    y_test: Any = None,
    silos_test: Any = None,
    task: str | None = None,
    n_classes: int | None = None,
    n_silos: int | None = None,
    name: str = "own data",
    source: str = "given in Python",
    test_fraction: float = 0.2,
    seed: int = 0,
    synthetic: bool = False,
) -> FederatedData:
    """Records given as arrays (numpy, torch tensors, lists), one entry per record, federated.

    `x`: features of shape (n, *feature_shape), stored as float32, not standardised. `y`: integer
    class ids 0.. (floats with whole values are taken as ids) or, for `task="survival"`, (time,
    event) pairs of shape (n, 2). `task` is inferred when not given: (n, 2) labels are survival,
    1-D labels multiclass with n_classes = the largest label + 1 (say `task="binary"` for ROC AUC).
    `users`: the id of each record's user, of any sortable kind; `silos`: the silo of each record
    (else spread over `n_silos`, 5 by default). A test split is `x_test, y_test` (with
    `silos_test` when `silos` is given), else drawn per silo with `test_fraction`. `source` says
    where the data came from; the same arguments give the same data, array for array.
    """
    return federate_arrays(
        x,
        y,
        users,
        silos,
        test=None
        if x_test is None and y_test is None and silos_test is None
        else (x_test, y_test, silos_test),
        task=task,
        n_classes=n_classes,
        n_silos=n_silos,
        name=name,
        source=source,
        test_fraction=test_fraction,
        seed=seed,
        synthetic=synthetic,
    )


def from_silos(
    silos: Any,
    *,
    test: Any = None,
    task: str | None = None,
    n_classes: int | None = None,
    name: str = "own data",
    source: str = "given in Python, per silo",
    test_fraction: float = 0.2,
    seed: int = 0,
    synthetic: bool = False,
) -> FederatedData:
    """Per-silo records: `{silo name: (x, y, users)}`, or a list of (x, y, users) (silos 0, 1, ...).

    `test`, if given, holds per-silo (x, y) test records under the same names (a list in the same
    order); otherwise each silo's test split is drawn with `test_fraction`. The records are those
    `federated_data` would get with every record's silo named, and the same data comes back.
    """
    joined = silo_arrays(silos, test)
    return _federate_joined(
        joined,
        task=task,
        n_classes=n_classes,
        n_silos=None,
        name=name,
        source=source,
        test_fraction=test_fraction,
        seed=seed,
        synthetic=synthetic,
    )


def from_datasets(
    datasets: Any,
    *,
    test: Any = None,
    task: str | None = None,
    n_classes: int | None = None,
    n_silos: int | None = None,
    name: str = "own data",
    source: str = "torch Datasets given in Python",
    test_fraction: float = 0.2,
    seed: int = 0,
    synthetic: bool = False,
) -> FederatedData:
    """torch Datasets whose items are `(x, y, user)` (or dicts with keys x, y, user), read in full.

    `datasets` is one Dataset (its records spread over `n_silos` silos), or one per silo: a list
    (silos 0, 1, ...) or a dict by silo name. Every item is read into memory once, which suits the
    cross-silo sizes this is for (thousands to a few hundred thousand records); a map-style
    Dataset is read by index 0..len-1, an iterable one to its end. `test` holds Datasets of
    (x, y) or (x, y, user) items in the same layout. An item of another form or shape is refused
    naming its index.
    """
    joined = dataset_arrays(datasets, test)
    return _federate_joined(
        joined,
        task=task,
        n_classes=n_classes,
        n_silos=n_silos,
        name=name,
        source=source,
        test_fraction=test_fraction,
        seed=seed,
        synthetic=synthetic,
    )


def _federate_joined(joined: Any, **settings: Any) -> FederatedData:
    """`federate_arrays` on per-silo records joined in silo order (`own_silos.Joined`)."""
    return federate_arrays(
        joined.x, joined.y, joined.users, joined.silos, test=joined.test, where=joined.where, **settings
    )


def from_files(
    paths: Any,
    *,
    user_column: str | None = None,
    label_column: str | None = None,
    task: str | None = None,
    n_classes: int | None = None,
    name: str = "own data",
    test_fraction: float = 0.2,
    seed: int = 0,
) -> FederatedData:
    """One file per silo, the silo named after the file's stem (`hospital_a.csv` is silo
    `hospital_a`); all `.npz` or all tables.

    `.npz` (`numpy.savez`): arrays `x`, `y`, `users`, and optionally `x_test`, `y_test` (in every
    file or in none); ids as numbers or strings (object arrays are not unpickled). CSV or Parquet
    tables (read as `load_table` reads them, with the same columns in every file): `user_column`
    names each record's user, `label_column` its label (class values mapped to 0.. in sorted
    order, or 'TIME,EVENT' for survival); every other column is a feature, text one-hot encoded,
    numbers as they are (not standardised).
    """
    files, npz = silo_files(paths)
    source = f"files {', '.join(str(path) for path in files)}"
    if not npz:
        return from_tables(
            files,
            user_column=user_column,
            label_column=label_column,
            task=task,
            n_classes=n_classes,
            name=name,
            source=source,
            test_fraction=test_fraction,
            seed=seed,
        )
    if user_column is not None or label_column is not None:
        raise InvalidParameter(
            "user_column and label_column name table columns; .npz files hold arrays x, y, users"
        )
    silos, tests = npz_silos(files)
    return from_silos(
        silos,
        test=tests,
        task=task,
        n_classes=n_classes,
        name=name,
        source=source,
        test_fraction=test_fraction,
        seed=seed,
    )


def as_federated(
    obj: Any,
    *,
    option: str = "data",
    seed: int = 0,
    source: str | None = None,
    name: str | None = None,
) -> FederatedData:
    """`obj` in any of the forms of this module (`FORMS`) as a FederatedData, or one DataError or
    InvalidParameter line starting with `option`. `source` and `name`, if given, say where the
    data came from and what to call it, unless a dict names them itself."""
    return _coerced(obj, option=option, seed=seed, source=source, name=name, got="got")


def load_data(reference: str, *, option: str = "--data", seed: int = 0) -> FederatedData:
    """The data a loader returns: `FILE.py:NAME` or `package.module:NAME`, called with `seed`
    if it takes one, its result in any of the forms `as_federated` accepts. The source line
    says `loaded by REFERENCE`; the name is the reference as given."""
    loader = load_callable(reference, option)
    result = call_with(loader, option, {"seed": seed})
    return _coerced(
        result,
        option=option,
        seed=seed,
        source=f"loaded by {reference}",
        name=reference,
        got=f"{reference} returned",
    )


# --- coercion -----------------------------------------------------------------------------------


def _coerced(
    obj: Any, *, option: str, seed: int, source: str | None, name: str | None, got: str
) -> FederatedData:
    try:
        return _coerce(obj, seed=seed, source=source, name=name, got=got)
    except UldpError as error:
        text = str(error)
        if text.startswith(option):
            raise
        kind = InvalidParameter if isinstance(error, InvalidParameter) else DataError
        raise kind(f"{option}: {text}") from error


def _coerce(obj: Any, *, seed: int, source: str | None, name: str | None, got: str) -> FederatedData:
    named: dict[str, Any] = {"seed": seed}
    if source is not None:
        named["source"] = source
    if name is not None:
        named["name"] = name
    if isinstance(obj, FederatedData):
        return obj if source is None else dataclasses.replace(obj, source=f"{source} ({obj.source})")
    if is_dataset(obj):
        return from_datasets(obj, **named)
    if isinstance(obj, Mapping):
        if {"x", "y", "users"} & set(obj):
            return _from_dict(obj, named)
        if obj and all(is_dataset(value) for value in obj.values()):
            return from_datasets(obj, **named)
        if obj and all(isinstance(value, (tuple, list)) for value in obj.values()):
            return from_silos(obj, **named)
    if isinstance(obj, (tuple, list)) and obj:
        if all(is_dataset(item) for item in obj):
            return from_datasets(list(obj), **named)
        if all(isinstance(item, tuple) for item in obj):
            return from_silos(list(obj), **named)
        if len(obj) in (3, 4):
            return federated_data(*obj, **named)
    raise DataError(f"{got} {describe(obj)}; expected {FORMS}")


def _from_dict(given: Mapping[str, Any], named: dict[str, Any]) -> FederatedData:
    unknown = sorted(str(key) for key in given if key not in DICT_KEYS)
    if unknown:
        raise InvalidParameter(
            f"the dict has key(s) {', '.join(map(repr, unknown))} that uldp does not read; "
            f"its keys are {', '.join(DICT_KEYS)}"
        )
    missing = [key for key in ("x", "y", "users") if key not in given]
    if missing:
        raise DataError(
            f"{missing[0]}: the dict has no {missing[0]!r} (keys given: {', '.join(map(str, given))}); "
            "it needs x, y and users, the id of the user each record belongs to"
        )
    return federated_data(**{**named, **given})
