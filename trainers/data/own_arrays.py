"""The user's own records as checked arrays, federated: `federate_arrays`.

Every form of `own_data` ends here with one array per keyword (features, labels, a user id per
record, a silo id per record or none). Each is checked and coerced to what `FederatedData` holds
(float32 features, int64 class ids or float32 (time, event) pairs, users and silos numbered
0..k-1 in sorted order of their ids), every refusal one line naming the keyword and, through
`where`, the record. Then the records go through `federate` (a test split drawn per silo, ULDP-FL
§5.1) or, with a test split given, are shuffled and placed in silos the way `federate` does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from uldp.errors import DataError, InvalidParameter

from . import allocation
from .builtin import check_count, check_fraction
from .federated import METRICS, TASKS, FederatedData
from .pipeline import federate
from .records import Records
from .tabular import DEFAULT_SILOS

#: Names a record by its position in the arrays given, in a refusal (`where`).
Where = Callable[[int], str]


def nth_record(index: int) -> str:
    return f"record {index}"


def federate_arrays(
    x: Any,
    y: Any,
    users: Any,
    silos: Any,
    *,
    test: tuple[Any, Any, Any] | None,
    task: str | None,
    n_classes: int | None,
    n_silos: int | None,
    name: str,
    source: str,
    test_fraction: float,
    seed: int,
    synthetic: bool,
    where: Where = nth_record,
    extra: dict | None = None,
) -> FederatedData:
    """Every form's common end: the arrays checked (one line naming the keyword, `where` naming
    a record), ids numbered, then `federate` (drawn test split) or `_with_given_test`. `test` is
    (x_test, y_test, silos_test) or None; `extra` adds to the `allocation` record (a table's
    feature and class names)."""
    seed = check_count(seed, "seed", minimum=0)
    test_fraction = check_fraction(test_fraction, "test_fraction")
    if users is None:
        raise DataError(
            "users: every record needs the id of the user it belongs to (user-level DP protects "
            "each user's records together); give users=, one id per record"
        )
    features = feature_array(x, "x", where)
    labels = as_array(y, "y")
    user_array = id_array(users, "users")
    silo_array = None if silos is None else id_array(silos, "silos")
    _check_lengths({"x": features, "y": labels, "users": user_array, "silos": silo_array})
    if len(features) == 0:
        raise DataError("x: no records; give at least one record per silo")
    user_codes, user_ids = _codes(user_array, "users", "user", where)
    silo_codes, silo_ids = (None, None) if silo_array is None else _codes(silo_array, "silos", "silo", where)
    task, labels = label_array(labels, task, "y", where)
    silo_names = () if silo_ids is None else tuple(str(level) for level in silo_ids.tolist())
    n_silos = _silo_count(n_silos, silo_names, len(features))
    tests = None if test is None else _test_arrays(test, features, task, silo_ids, n_silos)
    silo_text = f"{n_silos} silos given" if silo_codes is not None else f"spread over {n_silos} silos"
    records = Records(
        name=name,
        task=task,
        source=(
            f"{source}: {len(features)} records, features of shape {features.shape[1:]}, "
            f"{len(user_ids)} users, {silo_text}"
        ),
        synthetic=bool(synthetic),
        x=features,
        y=labels,
        n_classes=_class_count(task, [labels] + ([] if tests is None else [tests[1]]), n_classes),
        silos=silo_codes,
        silo_names=silo_names,
        users=user_codes,
        standardize=False,  # the user's model, the user's preprocessing
        default_silos=n_silos,
    )
    description = _description(silo_names, test_given=tests is not None, seed=seed, extra=extra)
    if tests is None:
        data = federate(
            records,
            n_users=len(user_ids),
            n_silos=n_silos,
            method="uniform",
            seed=seed,
            labels_per_user=None,
            test_fraction=test_fraction,
            description=description,
        )
    else:
        data = _with_given_test(
            records, tests, n_users=len(user_ids), n_silos=n_silos, seed=seed, description=description
        )
    return dataclasses.replace(data, user_ids=user_ids)


def _description(silo_names: tuple[str, ...], *, test_given: bool, seed: int, extra: dict | None) -> dict:
    """The `allocation` record: the keys every data set's has, silos given or spread uniformly."""
    given = bool(silo_names)  # a silo id per record: never empty, since there is a record
    description = {
        "method": "given" if given else "uniform",
        "alpha_records": None,
        "alpha_silos": None,
        "main_silo_share": None,
        "labels_per_user": None,
        "users": "given per record",
        "silos": "given per record" if given else "allocated uniformly",
        "test": "given" if test_given else "drawn per silo",
        "seed": seed,
        **(extra or {}),
    }
    if given:
        description["silo_names"] = list(silo_names)
    return description


def _with_given_test(
    records: Records,
    test: tuple[np.ndarray, np.ndarray, np.ndarray | None],
    *,
    n_users: int,
    n_silos: int,
    seed: int,
    description: dict,
) -> FederatedData:
    """The FederatedData of records whose test split is given: silos drawn as `federate` draws
    them where the data names none, training records shuffled as `federate` shuffles them."""
    assert records.users is not None  # every form here names its users
    rng = np.random.default_rng(seed)
    x_test, y_test, silo_test = test
    n = len(records.y)
    silos = records.silos if records.silos is not None else allocation.uniform_silos(n, n_silos, rng)
    if silo_test is None:
        silo_test = allocation.uniform_silos(len(y_test), n_silos, rng)
    order = rng.permutation(n)
    return FederatedData(
        name=records.name,
        task=records.task,
        metric=METRICS[records.task],
        source=records.source,
        synthetic=records.synthetic,
        x_train=records.x[order],
        y_train=records.y[order],
        user_train=records.users[order].astype(np.int64),
        silo_train=silos[order].astype(np.int64),
        x_test=x_test,
        y_test=y_test,
        silo_test=silo_test.astype(np.int64),
        n_users=n_users,
        n_silos=n_silos,
        n_classes=records.n_classes,
        allocation=description,
        record_index=order.astype(np.int64),
        source_records=n,
    )


def _test_arrays(
    test: tuple[Any, Any, Any],
    features: np.ndarray,
    task: str,
    silo_ids: np.ndarray | None,
    n_silos: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The given test split, checked against the training records: same feature shape, labels
    of the same task, each test silo one of the training silos."""
    x_test, y_test, silos_test = test
    if x_test is None:
        raise DataError("x_test: y_test or silos_test given without x_test; give the test records' features")
    if y_test is None:
        raise DataError("y_test: give the labels of x_test")
    features_test = feature_array(x_test, "x_test", nth_record)
    labels_test = as_array(y_test, "y_test")
    silo_array = None if silos_test is None else id_array(silos_test, "silos_test")
    _check_lengths({"x_test": features_test, "y_test": labels_test, "silos_test": silo_array})
    if len(features_test) == 0:
        raise DataError("x_test: no records; leave x_test out to draw a test split per silo")
    if features_test.shape[1:] != features.shape[1:]:
        raise DataError(
            f"x_test: test records have features of shape {features_test.shape[1:]}, "
            f"training records {features.shape[1:]}"
        )
    _, labels_test = label_array(labels_test, task, "y_test", nth_record)
    if silo_ids is None:
        if silo_array is not None:
            raise DataError("silos_test: given without silos for the training records; give both or neither")
        return features_test, labels_test, None
    if silo_array is None:
        if n_silos > 1:
            raise DataError(
                "silos_test: the training records' silos are given, so give the silo of each test "
                "record too (or leave x_test out to draw a test split per silo)"
            )
        return features_test, labels_test, np.zeros(len(labels_test), dtype=np.int64)
    _codes(silo_array, "silos_test", "silo", nth_record)  # refuses a missing id
    code_of = {level: code for code, level in enumerate(silo_ids.tolist())}
    codes = [code_of.get(silo) for silo in silo_array.tolist()]
    if None in codes:
        first = codes.index(None)
        raise DataError(
            f"silos_test: test record {first} is in silo {silo_array.tolist()[first]!r}, which holds "
            f"no training record (training silos: {', '.join(map(str, silo_ids.tolist()))})"
        )
    return features_test, labels_test, np.asarray(codes, dtype=np.int64)


# --- one array at a time ----------------------------------------------------------------------------


def numpy_of(value: Any) -> Any:
    """A torch tensor as a numpy array (detached, on the CPU), without importing torch; any
    other value as it is."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu().numpy()
    return value


def lengths_shown(arrays: dict[str, np.ndarray | None]) -> str:
    """'x 3, y 2' when the arrays given (None: not given) differ in length, else ''."""
    lengths = {key: len(value) for key, value in arrays.items() if value is not None}
    if len(set(lengths.values())) < 2:
        return ""
    return ", ".join(f"{key} {length}" for key, length in lengths.items())


def _check_lengths(arrays: dict[str, np.ndarray | None]) -> None:
    shown = lengths_shown(arrays)
    if shown:
        names = [key for key, value in arrays.items() if value is not None]
        raise DataError(
            f"{', '.join(names[:-1])} and {names[-1]} must hold one entry per record, got {shown}"
        )


def as_array(value: Any, keyword: str) -> np.ndarray:
    """`value` (a numpy array, a torch tensor, a pandas column, nested lists) as a numpy array."""
    value = numpy_of(value)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        raise DataError(
            f"{keyword}: cannot be read as one array; every record needs the same shape"
        ) from None
    if array.ndim == 0:
        raise DataError(f"{keyword}: expected one entry per record, got a single {type(value).__name__}")
    return array


def feature_array(x: Any, keyword: str, where: Where) -> np.ndarray:
    """Features as a new float32 array (a copy: later changes to the caller's array do not reach
    the data), one row of shape feature_shape per record, every value finite."""
    array = as_array(x, keyword)
    if array.ndim < 2:
        raise DataError(
            f"{keyword}: features must have shape (n, *feature_shape), a row per record, got shape "
            f"{array.shape} (reshape a single feature to (n, 1))"
        )
    if not (np.issubdtype(array.dtype, np.integer) or array.dtype.kind in "fb"):
        raise DataError(f"{keyword}: features must be numbers, got dtype {array.dtype}")
    features = np.array(array, dtype=np.float32)
    bad = ~np.isfinite(features).all(axis=tuple(range(1, features.ndim)))  # no reshape: 0 rows work
    if bad.any():
        raise DataError(
            f"{keyword}: {where(int(np.flatnonzero(bad)[0]))} has a NaN or infinite feature "
            f"(as float32); fill or drop it first"
        )
    return features


def id_array(values: Any, keyword: str) -> np.ndarray:
    """One id per record as a 1-D array; a Python sequence element by element, so that a tuple
    id stays one id, and 0-d tensors or numpy scalars become plain Python values."""
    values = numpy_of(values)
    if isinstance(values, (list, tuple)):
        array = np.empty(len(values), dtype=object)
        for index, value in enumerate(values):
            array[index] = (
                value.item() if getattr(value, "shape", None) == () and hasattr(value, "item") else value
            )
    else:
        array = as_array(values, keyword)
    if array.ndim != 1:
        raise DataError(f"{keyword}: give one id per record (a 1-D sequence), got shape {array.shape}")
    return array


def plain(ids: np.ndarray) -> np.ndarray:
    """Ids held as Python objects as a plain array when they are all numbers or all strings (so
    they sort and save as numbers or text); otherwise (tuples, mixed kinds) as they are."""
    if ids.dtype != object:
        return ids
    array = np.asarray(ids.tolist())
    return array if array.ndim == 1 and array.dtype != object else ids


def _is_missing(value: Any) -> bool:
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    return isinstance(value, str) and not value.strip()


def _codes(array: np.ndarray, keyword: str, what: str, where: Where) -> tuple[np.ndarray, np.ndarray]:
    """Ids mapped to 0..k-1 in sorted order, and the sorted distinct ids (as a plain array when
    they are all numbers or all strings)."""
    if array.dtype.kind == "f":
        missing = np.isnan(array)
    elif array.dtype.kind in "OUS":
        missing = np.fromiter((_is_missing(value) for value in array.tolist()), dtype=bool, count=len(array))
    else:
        missing = np.zeros(len(array), dtype=bool)
    if missing.any():
        first = int(np.flatnonzero(missing)[0])
        more = f"; {int(missing.sum())} records have none" if missing.sum() > 1 else ""
        raise DataError(
            f"{keyword}: {where(first)} has no {what} id ({array.tolist()[first]!r}); every record needs "
            f"the {what} it belongs to{more}"
        )
    try:
        levels, codes = np.unique(array, return_inverse=True)
    except TypeError:
        kinds = sorted({type(value).__name__ for value in array.tolist()})
        raise DataError(
            f"{keyword}: ids must be of one kind that sorts (all numbers or all strings), "
            f"got {', '.join(kinds)}"
        ) from None
    return codes.reshape(-1).astype(np.int64), plain(levels)


def check_task(task: str) -> str:
    if task not in TASKS:
        raise InvalidParameter(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    return task


def label_array(y: np.ndarray, task: str | None, keyword: str, where: Where) -> tuple[str, np.ndarray]:
    """(task, labels): int64 class ids, or float32 (time, event) pairs for survival (the forms
    `FederatedData` holds); the task inferred from the labels' shape when not given."""
    if task is None:
        task = "survival" if y.ndim == 2 and y.shape[1] == 2 else "multiclass"
    task = check_task(task)
    if task == "survival":
        return task, _survival_labels(y, keyword, where)
    if y.ndim != 1:
        raise DataError(
            f"{keyword}: class labels must be one integer per record, shape (n,), got shape {y.shape} "
            "(for survival data give (time, event) pairs, shape (n, 2), with task='survival')"
        )
    if y.dtype.kind == "b":
        y = y.astype(np.int64)
    if y.dtype.kind in "iu":
        whole = np.ones(len(y), dtype=bool)
    elif y.dtype.kind == "f":
        whole = np.isfinite(y) & (y == np.round(y))
    else:
        whole = np.zeros(len(y), dtype=bool)
    if not whole.all():
        first = int(np.flatnonzero(~whole)[0])
        raise DataError(
            f"{keyword}: labels of a {task} task must be integer class ids 0, 1, ..., got "
            f"{y[first].item()!r} ({where(first)}); map your labels to class ids first"
        )
    labels = y.astype(np.int64)
    if (labels < 0).any():
        first = int(np.flatnonzero(labels < 0)[0])
        raise DataError(f"{keyword}: {where(first)} has label {labels[first]}; class ids start at 0")
    return task, labels


def _survival_labels(y: np.ndarray, keyword: str, where: Where) -> np.ndarray:
    if y.ndim != 2 or y.shape[1] != 2:
        raise DataError(
            f"{keyword}: a survival task needs (time, event) pairs, shape (n, 2), got shape {y.shape}"
        )
    try:
        values = y.astype(np.float64)
    except (TypeError, ValueError):
        raise DataError(
            f"{keyword}: survival times and events must be numbers, got dtype {y.dtype}"
        ) from None
    bad_time = ~np.isfinite(values[:, 0]) | (values[:, 0] < 0)
    if bad_time.any():
        first = int(np.flatnonzero(bad_time)[0])
        raise DataError(
            f"{keyword}: {where(first)} has time {values[first, 0]:g}; times must be finite and >= 0"
        )
    bad_event = ~np.isin(values[:, 1], (0.0, 1.0))
    if bad_event.any():
        first = int(np.flatnonzero(bad_event)[0])
        raise DataError(
            f"{keyword}: {where(first)} has event {values[first, 1]:g}; "
            "an event is 1 (observed) or 0 (censored)"
        )
    return values.astype(np.float32)


def _class_count(task: str, labels: list[np.ndarray], n_classes: int | None) -> int:
    """Classes of the task: 1 for survival, 2 for binary, else n_classes (or the largest label + 1)."""
    if task == "survival":
        if n_classes not in (None, 1):
            raise InvalidParameter(
                f"n_classes: a survival task has no classes (leave n_classes out), got {n_classes}"
            )
        return 1
    top = max(int(array.max(initial=0)) for array in labels) + 1
    if task == "binary":
        if n_classes not in (None, 2):
            raise InvalidParameter(f"n_classes: a binary task has 2 classes, got {n_classes}")
        if top > 2:
            raise DataError(f"y: a binary task has labels 0 and 1, got label {top - 1}")
        return 2
    if n_classes is None:
        if top < 2:
            raise DataError(
                "y: every label is 0, so the task has one class; give n_classes (2 or more) or task='binary'"
            )
        return top
    n_classes = check_count(n_classes, "n_classes", minimum=2)
    if top > n_classes:
        raise DataError(f"y: label {top - 1} is not below n_classes={n_classes}")
    return n_classes


def _silo_count(n_silos: int | None, silo_names: tuple[str, ...], n_records: int) -> int:
    """Silos given by the data (n_silos, if given, must agree), or n_silos to spread records over
    (5 by default, as for the built-in sets, and never more than there are records)."""
    if silo_names:
        if n_silos is not None and n_silos != len(silo_names):
            raise InvalidParameter(
                f"n_silos {n_silos} disagrees with the {len(silo_names)} distinct silos given"
            )
        return len(silo_names)
    if n_silos is None:
        return min(DEFAULT_SILOS, n_records)
    n_silos = check_count(n_silos, "n_silos")
    if n_silos > n_records:
        raise InvalidParameter(
            f"n_silos {n_silos} is more than the {n_records} records: give {n_records} or fewer"
        )
    return n_silos
