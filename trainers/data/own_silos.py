"""The user's own records given per silo, joined into one array per keyword.

`from_silos` gives (x, y, users) per silo and `from_datasets` a torch Dataset per silo (or one
Dataset for all); both are joined here in silo order, with each record's silo name, into the
arrays `own_arrays.federate_arrays` checks, and a `where` that names a record by its silo and
its position there, so that a refusal points at the silo's own record or item.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate, count
from typing import Any, NamedTuple

import numpy as np

from uldp.errors import DataError

from .own_arrays import Where, as_array, id_array, lengths_shown, numpy_of, plain

ITEM_FORM = "each item must be (x, y, user) or a dict with keys x, y, user"


class _Silo(NamedTuple):
    """One silo's records, checked: its name, features, labels and users (None: not given)."""

    name: Any
    x: np.ndarray
    y: np.ndarray
    users: np.ndarray | None


class Joined(NamedTuple):
    """Records of every silo as one array per keyword, ready for `federate_arrays`."""

    x: np.ndarray
    y: np.ndarray
    users: Any  # one id per record: an array, or a list of a Dataset's ids
    silos: np.ndarray | None  # each record's silo name; None: one Dataset, silos to be drawn
    where: Where
    test: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None  # (x, y, silo names) or none given


def silo_arrays(silos: Any, test: Any) -> Joined:
    """`{silo name: (x, y, users)}` or a list of (x, y, users), and `test` likewise of (x, y)."""
    parts = _silo_parts(silos, "silos", "(x, y, users)")
    joined = _joined([(key, _triple(value, f"silo {key!r}")) for key, value in parts])
    return joined._replace(
        test=_joined_test(test, parts, lambda key, value: _pair(value, f"test silo {key!r}"))
    )


def dataset_arrays(datasets: Any, test: Any) -> Joined:
    """One Dataset of (x, y, user) items, or one per silo (a list or a dict by silo name), read in
    full; `test` holds Datasets of (x, y) or (x, y, user) items in the same layout."""
    if is_dataset(datasets):
        x, y, ids = _read_dataset(datasets, "dataset")
        given = None if test is None else _read_dataset(test, "test", with_user=False)
        return Joined(x, y, ids, None, _nth_item, None if given is None else (given[0], given[1], None))
    parts = _silo_parts(datasets, "datasets", "a Dataset")
    joined = _joined([(key, _read_dataset(value, f"datasets[{key!r}]")) for key, value in parts], unit="item")
    return joined._replace(
        test=_joined_test(
            test, parts, lambda key, value: _read_dataset(value, f"test[{key!r}]", with_user=False)[:2]
        )
    )


def is_dataset(obj: Any) -> bool:
    """Whether `obj` is a torch Dataset; no torch import: if torch is not loaded, none exists."""
    module = sys.modules.get("torch.utils.data")
    return module is not None and isinstance(obj, module.Dataset)


def describe(obj: Any) -> str:
    """What `obj` is, for a refusal: 'a tuple of 2 values (ndarray, ...)', 'a dict with keys ...'."""
    kind = type(obj).__name__
    if isinstance(obj, (tuple, list)):
        values = f"{len(obj)} value" + ("" if len(obj) == 1 else "s")
        return f"a {kind} of {values}" + (f" ({type(obj[0]).__name__}, ...)" if obj else "")
    if isinstance(obj, Mapping):
        return f"a {kind} with keys {', '.join(map(repr, list(obj)[:5]))}" if obj else f"an empty {kind}"
    return "None" if obj is None else f"{'an' if kind[0] in 'aeiouAEIOU' else 'a'} {kind}"


def _nth_item(index: int) -> str:
    return f"item {index}"


# --- per-silo parts -----------------------------------------------------------------------------


def _silo_parts(given: Any, keyword: str, each: str) -> list[tuple[Any, Any]]:
    """(silo name, value) pairs of a dict by silo name or of a list (silos 0, 1, ...)."""
    if isinstance(given, Mapping):
        parts = list(given.items())
    elif isinstance(given, (list, tuple)):
        parts = list(enumerate(given))
    else:
        raise DataError(
            f"{keyword}: expected a dict by silo name or a list with {each} per silo, got {describe(given)}"
        )
    if not parts:
        raise DataError(f"{keyword}: no silo given; give {each} for at least one silo")
    return parts


def _joined_test(
    test: Any, parts: list[tuple[Any, Any]], pair: Callable[[Any, Any], tuple[Any, Any]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
    """Per-silo test records (`pair` turns a silo's value into (x, y)) joined as `_joined` joins
    the training records; each silo named must be a training silo."""
    if test is None:
        return None
    known = [key for key, _ in parts]
    given = _silo_parts(test, "test", "test records")
    for key, _ in given:
        if key not in known:
            raise DataError(
                f"test: silo {key!r} is not among the training silos ({', '.join(map(repr, known))})"
            )
    joined = _joined([(key, (*pair(key, value), None)) for key, value in given])
    return joined.x, joined.y, joined.silos


def _triple(value: Any, label: str) -> tuple[Any, Any, Any]:
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise DataError(f"silos: {label} must be (x, y, users), got {describe(value)}")
    x, y, users = value
    if users is None:
        raise DataError(f"users: {label} has no user ids; every record needs the user it belongs to")
    return x, y, users


def _pair(value: Any, label: str) -> tuple[Any, Any]:
    if not isinstance(value, (tuple, list)) or len(value) not in (2, 3):
        raise DataError(f"test: {label} must be (x, y), got {describe(value)}")
    return value[0], value[1]


def _joined(parts: Sequence[tuple[Any, tuple[Any, Any, Any]]], unit: str = "record") -> Joined:
    """Per-silo (x, y, users) joined in silo order: features, labels, users (None when the parts
    have none), each record's silo name, and `where` naming a record by silo and position."""
    silos: list[_Silo] = []
    for name, (x, y, users) in parts:
        silo = _Silo(name, *_silo_part(name, x, y, users))
        if silos and silo.x.shape[1:] != silos[0].x.shape[1:]:
            raise DataError(
                f"x: silo {name!r} has features of shape {silo.x.shape[1:]}, silo {silos[0].name!r} "
                f"{silos[0].x.shape[1:]}; every silo's records need one shape"
            )
        silos.append(silo)
    starts = list(accumulate((len(silo.x) for silo in silos[:-1]), initial=0))

    def where(index: int) -> str:
        at = bisect_right(starts, index) - 1
        return f"silo {silos[at].name!r} {unit} {index - starts[at]}"

    try:
        labels = np.concatenate([silo.y for silo in silos])
    except (TypeError, ValueError):
        raise DataError(
            "y: the silos' labels differ in shape or kind; give every silo labels of one form"
        ) from None
    ids = [silo.users for silo in silos if silo.users is not None]
    names = np.empty(len(labels), dtype=object)
    for silo, start in zip(silos, starts):
        names[start : start + len(silo.x)].fill(silo.name)  # fill: a tuple name stays one name
    return Joined(
        x=np.concatenate([silo.x for silo in silos]),
        y=labels,
        users=_joined_ids(ids) if ids else None,
        silos=plain(names),
        where=where,
        test=None,
    )


def _silo_part(name: Any, x: Any, y: Any, users: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One silo's features, labels and users (None if not given) as arrays of one length."""
    features = as_array(x, f"silo {name!r} x")
    labels = as_array(y, f"silo {name!r} y")
    user_array = None if users is None else id_array(users, f"silo {name!r} users")
    shown = lengths_shown({"x": features, "y": labels, "users": user_array})
    if shown:
        raise DataError(f"silos: silo {name!r} must hold one entry per record, got {shown}")
    if len(features) == 0:
        raise DataError(f"silos: silo {name!r} has no records")
    return features, labels, user_array


def _joined_ids(arrays: list[np.ndarray]) -> np.ndarray:
    try:
        return np.concatenate(arrays)
    except TypeError:  # ints in one silo, strings in another: compared (and refused) as objects
        return np.concatenate([array.astype(object) for array in arrays])


# --- torch Datasets -----------------------------------------------------------------------------


def _read_dataset(
    dataset: Any, label: str, with_user: bool = True
) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """Every item of `dataset` as (features, labels, users); users empty when not `with_user`
    (test items may be (x, y) or carry a user, which is not needed). A map-style Dataset is read
    by index 0..len-1, an iterable one to its end."""
    try:
        items = (
            (dataset[index] for index in range(len(dataset)))
            if hasattr(dataset, "__len__")
            else iter(dataset)
        )
    except TypeError:
        raise DataError(
            f"{label}: {describe(dataset)} is not a Dataset (no len() and no iteration)"
        ) from None
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    users: list[Any] = []
    for index in count():
        try:
            item = next(items)
        except StopIteration:
            break
        except Exception as error:  # the Dataset's own code
            raise DataError(
                f"{label}: reading item {index} failed: {type(error).__name__}: {error}"
            ) from error
        x, y, user = _item(item, label, index, with_user)
        for array, arrays, what in ((x, xs, "features"), (y, ys, "a label")):
            if arrays and array.shape != arrays[0].shape:
                raise DataError(
                    f"{label}: item {index} has {what} of shape {array.shape}, item 0 {arrays[0].shape}; "
                    "every item needs one shape"
                )
            arrays.append(array)
        users.append(user)
    if not xs:
        raise DataError(f"{label}: the Dataset has no items")
    return np.stack(xs), np.stack(ys), users


def _item(item: Any, label: str, index: int, with_user: bool) -> tuple[np.ndarray, np.ndarray, Any]:
    """An item's features and label as arrays, and its user as one plain id (None if not `with_user`)."""
    if isinstance(item, Mapping):
        wanted = ("x", "y", "user") if with_user else ("x", "y")
        missing = [key for key in wanted if key not in item]
        if missing:
            raise DataError(f"{label}: item {index} is a dict without {', '.join(missing)}; {ITEM_FORM}")
        x, y, user = item["x"], item["y"], item.get("user")
    elif isinstance(item, (tuple, list)) and (len(item) == 3 or (not with_user and len(item) == 2)):
        x, y, user = item[0], item[1], item[2] if len(item) == 3 else None
    else:
        raise DataError(f"{label}: item {index} is {describe(item)}; {ITEM_FORM}")
    if with_user:
        user = numpy_of(user)
        if getattr(user, "shape", ()) != ():
            raise DataError(f"{label}: item {index} has a user of shape {user.shape}; give one id per item")
        user = user.item() if hasattr(user, "item") else user
    return np.asarray(numpy_of(x)), np.asarray(numpy_of(y)), user
