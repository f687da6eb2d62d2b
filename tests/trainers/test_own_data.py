"""The user's own data with a user id per record (issue 35): every form gives the same records,
every user's records stay with that user in their silo, bad input is one line naming the keyword."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import Dataset, IterableDataset, TensorDataset

from uldp.errors import DataError, InvalidParameter
from uldp.trainers.data.own_data import (
    as_federated,
    federated_data,
    from_datasets,
    from_files,
    from_silos,
    load_data,
)

from .test_data import check_consistent

SILOS = ("clinic", "hospital", "lab")


def records(n: int = 60, seed: int = 0):
    """n records in silo order (clinic, hospital, lab), string user ids spread over the silos,
    and the record's own number as its first feature, so that a record can be followed."""
    rng = np.random.default_rng(seed)
    silos = np.sort(rng.choice(SILOS, size=n))
    users = np.array([f"patient-{i}" for i in rng.integers(0, 9, n)])
    x = np.column_stack([np.arange(n), rng.normal(size=(n, 2))]).astype(np.float32)
    y = rng.integers(0, 3, n).astype(np.int64)
    return x, y, users, silos


class ItemDataset(Dataset):
    """A map-style Dataset over given items, as a user's own Dataset would be."""

    def __init__(self, items):
        self.items = list(items)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]


class StreamDataset(IterableDataset):
    def __init__(self, items):
        self.items = list(items)

    def __iter__(self):
        return iter(self.items)


def per_silo(x, y, users, silos):
    return {silo: (x[silos == silo], y[silos == silo], users[silos == silo]) for silo in SILOS}


def same(a, b) -> None:
    for field in ("x_train", "y_train", "user_train", "silo_train", "x_test", "y_test", "silo_test"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    assert np.array_equal(a.user_ids, b.user_ids)
    assert (a.n_users, a.n_silos, a.n_classes, a.task) == (b.n_users, b.n_silos, b.n_classes, b.task)
    assert a.allocation.get("silo_names") == b.allocation.get("silo_names")


def test_every_form_gives_the_same_federated_data(tmp_path):
    x, y, users, silos = records()
    reference = federated_data(x, y, users, silos, seed=3)
    check_consistent(reference)
    datasets = {
        silo: ItemDataset(
            (torch.from_numpy(a), torch.tensor(b), u) for a, b, u in zip(*parts[:2], parts[2], strict=True)
        )
        for silo, parts in per_silo(x, y, users, silos).items()
    }
    for silo, (a, b, u) in per_silo(x, y, users, silos).items():
        np.savez(tmp_path / f"{silo}.npz", x=a, y=b, users=u)
    forms = [
        federated_data(torch.from_numpy(x), torch.from_numpy(y), list(users), list(silos), seed=3),
        from_silos(per_silo(x, y, users, silos), seed=3),
        from_datasets(datasets, seed=3),
        from_files([tmp_path / f"{silo}.npz" for silo in SILOS], seed=3),
        as_federated((x, y, users, silos), seed=3),
        as_federated({"x": x, "y": y, "users": users, "silos": silos}, seed=3),
        as_federated(per_silo(x, y, users, silos), seed=3),
        as_federated(datasets, seed=3),
    ]
    for data in forms:
        same(reference, data)
    assert reference.allocation["silo_names"] == list(SILOS)
    assert reference.source == "given in Python: 60 records, features of shape (3,), 9 users, 3 silos given"
    assert forms[3].source.startswith(f"files {tmp_path / 'clinic.npz'}, ")
    assert not reference.synthetic and reference.metric == "accuracy" and reference.n_classes == 3


def test_records_keep_their_user_and_silo_and_are_not_rescaled():
    x, y, users, silos = records()
    data = federated_data(x, y, users, silos, seed=1)
    train = data.x_train[:, 0].astype(int)
    test = data.x_test[:, 0].astype(int)
    assert sorted([*train, *test]) == list(range(len(x)))
    assert np.array_equal(data.user_ids[data.user_train], users[train])
    names = np.array(data.allocation["silo_names"])
    assert np.array_equal(names[data.silo_train], silos[train])
    assert np.array_equal(names[data.silo_test], silos[test])
    assert np.array_equal(data.x_train, x[train]) and np.array_equal(data.y_train, y[train])
    assert np.array_equal(data.record_index, train)
    # user ids in sorted order, user u is user_ids[u]
    assert list(data.user_ids) == sorted(set(users))


@settings(max_examples=25, deadline=None)
@given(
    counts=st.lists(st.lists(st.integers(0, 4), min_size=4, max_size=4), min_size=1, max_size=4),
    text_ids=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_counts_per_silo_and_user_are_preserved(counts, text_ids, seed):
    """Every (silo, user) pair keeps its records: exactly with a given test split; with a drawn
    one, each record is in training (with its user and silo) or in its silo's test set."""
    table = np.array(counts)
    if table.sum() == 0:
        table[0, 0] = 1
    silo_of, user_of = np.nonzero(table)
    repeats = table[silo_of, user_of]
    silos, users = np.repeat(silo_of, repeats) * 10, np.repeat(user_of, repeats) + 100
    if text_ids:
        users = np.array([f"u{u}" for u in users])
    order = np.random.default_rng(seed).permutation(len(silos))
    silos, users = silos[order], users[order]
    x = np.arange(len(silos), dtype=np.float32)[:, None]
    y = np.arange(len(silos)) % 2
    given_test = federated_data(
        x, y, users, silos, x_test=x[:1], y_test=y[:1], silos_test=silos[:1], n_classes=2, seed=seed
    )
    expected = np.zeros((given_test.n_silos, given_test.n_users), dtype=int)
    np.add.at(
        expected, (np.unique(silos, return_inverse=True)[1], np.unique(users, return_inverse=True)[1]), 1
    )
    assert np.array_equal(given_test.user_silo_counts(), expected)

    drawn = federated_data(x, y, users, silos, n_classes=2, seed=seed)
    train, test = drawn.x_train[:, 0].astype(int), drawn.x_test[:, 0].astype(int)
    assert sorted([*train, *test]) == list(range(len(x)))
    assert np.array_equal(drawn.user_ids[drawn.user_train], users[train])
    assert np.array_equal(np.unique(silos)[drawn.silo_train], silos[train])
    assert np.array_equal(np.unique(silos)[drawn.silo_test], silos[test])


def test_without_silos_records_are_spread_and_ids_of_any_kind_are_numbered_in_order():
    x, y, _, _ = records(40)
    users = torch.tensor([7, 3, 3, 11] * 10)
    data = federated_data(x, y, users, seed=0)
    check_consistent(data)
    assert data.n_silos == 5 and data.allocation["silos"] == "allocated uniformly"
    assert list(data.user_ids) == [3, 7, 11] and data.user_ids.dtype.kind == "i"
    assert "spread over 5 silos" in data.source
    assert federated_data(x[:3], y[:3], [1, 2, 3], n_classes=3).n_silos == 3  # never more than records
    pairs = federated_data(x[:4], y[:4], [("a", 1), ("a", 2), ("a", 1), ("b", 0)], n_classes=3)
    assert pairs.n_users == 3 and pairs.user_ids[0] == ("a", 1)


def test_given_test_split_and_tasks():
    x, y, users, silos = records()
    data = federated_data(
        x[:50], y[:50], users[:50], silos[:50], x_test=x[50:], y_test=y[50:], silos_test=silos[50:]
    )
    assert len(data.x_train) == 50 and np.array_equal(data.x_test, x[50:])
    assert np.array_equal(np.array(data.allocation["silo_names"])[data.silo_test], silos[50:])
    assert data.allocation["test"] == "given"
    time_event = np.column_stack([np.linspace(1, 9, 60), np.arange(60) % 2])
    survival = federated_data(x, time_event, users)
    check_consistent(survival)
    assert (survival.task, survival.metric, survival.n_classes) == ("survival", "c_index", 1)
    binary = federated_data(x, (y > 0).astype(float), users, task="binary")
    assert (binary.task, binary.metric, binary.n_classes) == ("binary", "roc_auc", 2)
    assert binary.y_train.dtype == np.int64
    assert federated_data(x, y, users, n_classes=7).n_classes == 7


def test_images_keep_their_shape():
    images = np.random.default_rng(0).random((30, 1, 4, 4))
    data = federated_data(images, np.arange(30) % 2, np.arange(30) // 3, n_silos=2)
    assert data.feature_shape == (1, 4, 4) and data.x_train.dtype == np.float32


def test_datasets_of_dict_items_iterable_and_single(tmp_path):
    x, y, users, silos = records(30)
    items = [{"x": x[i], "y": int(y[i]), "user": users[i]} for i in range(30)]
    one = from_datasets(StreamDataset(items), n_silos=2, seed=4)
    same(one, federated_data(x, y, users, n_silos=2, seed=4))
    assert one.source.startswith("torch Datasets given in Python: 30 records")
    listed = as_federated([TensorDataset(torch.from_numpy(x), torch.from_numpy(y), torch.arange(30) % 4)])
    assert listed.n_silos == 1 and list(listed.user_ids) == [0, 1, 2, 3]
    test = from_datasets(
        {"a": ItemDataset(items[:20])}, test={"a": ItemDataset([(x[i], y[i]) for i in range(20, 30)])}
    )
    assert np.array_equal(test.x_test, x[20:]) and len(test.x_train) == 20


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_per_silo_tables(tmp_path, suffix):
    frames = {
        "north": pd.DataFrame(
            {
                "patient": ["p1", "p2", "p1"],
                "age": [50, 61, 50],
                "smoker": ["no", "yes", "no"],
                "sick": ["y", "n", "y"],
            }
        ),
        "south": pd.DataFrame(
            {"patient": ["p2", "p3"], "age": [62, 40], "smoker": ["yes", "no"], "sick": ["n", "n"]}
        ),
    }
    paths = []
    for stem, frame in frames.items():
        paths.append(tmp_path / f"{stem}{suffix}")
        frame.to_csv(paths[-1], index=False) if suffix == ".csv" else frame.to_parquet(paths[-1])
    data = from_files(paths, user_column="patient", label_column="sick", test_fraction=0.1)
    assert data.allocation["silo_names"] == ["north", "south"]
    assert data.allocation["classes"] == ["n", "y"] and data.allocation["features"] == ["age", "smoker_yes"]
    assert list(data.user_ids) == ["p1", "p2", "p3"] and data.n_classes == 2
    everything = np.concatenate([data.x_train, data.x_test])
    assert sorted(everything[:, 0]) == [40, 50, 50, 61, 62]  # not standardised
    assert data.source.startswith(f"files {paths[0]}, {paths[1]}: 5 records")


def test_load_data_calls_the_loader_with_its_seed(tmp_path):
    loader = tmp_path / "loader.py"
    loader.write_text(
        "import numpy as np\n"
        "def load(seed):\n"
        "    rng = np.random.default_rng(seed)\n"
        "    return {'x': rng.normal(size=(20, 2)), 'y': np.arange(20) % 2, 'users': np.arange(20) % 5,\n"
        "            'task': 'binary'}\n"
        "def broken():\n"
        "    raise RuntimeError('disk on fire')\n"
        "def text():\n"
        "    return 'records.csv'\n"
        "def builtin():\n"
        "    from uldp.trainers.data import load_dataset\n"
        "    return load_dataset('heart-disease', users=20)\n"
    )
    data = load_data(f"{loader}:load", seed=2)
    again = load_data(f"{loader}:load", seed=2)
    assert np.array_equal(data.x_train, again.x_train) and data.task == "binary"
    assert data.source.startswith(f"loaded by {loader}:load: 20 records") and data.name == f"{loader}:load"
    with pytest.raises(
        InvalidParameter, match=re.escape("--data: broken failed: RuntimeError: disk on fire")
    ):
        load_data(f"{loader}:broken")
    with pytest.raises(
        DataError, match=re.escape(f"--data: {loader}:text returned a str; expected a FederatedData;")
    ):
        load_data(f"{loader}:text")
    ready = load_data(f"{loader}:builtin")
    assert ready.name == "heart-disease" and ready.source.startswith(f"loaded by {loader}:builtin (UCI Heart")
    with pytest.raises(InvalidParameter, match="--data: .* has no attribute 'missing'"):
        load_data(f"{loader}:missing")


X, Y, USERS, SILO_IDS = records(10)


class Broken(Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, index):
        if index == 2:
            raise KeyError(index)
        return X[index], Y[index], USERS[index]


BAD = [
    (lambda: federated_data(X[:0], Y[:0], USERS[:0]), "x: no records; give at least one record per silo"),
    (
        lambda: federated_data(X, Y, USERS, x_test=X[:0], y_test=Y[:0]),
        "x_test: no records; leave x_test out to draw a test split per silo",
    ),
    (
        lambda: federated_data(X, Y, None),
        "users: every record needs the id of the user it belongs to (user-level DP protects each user's "
        "records together); give users=, one id per record",
    ),
    (
        lambda: as_federated({"x": X, "y": Y}, option="--data"),
        "--data: users: the dict has no 'users' (keys given: x, y); it needs x, y and users, the id of the "
        "user each record belongs to",
    ),
    (
        lambda: federated_data(X, Y[:9], USERS),
        "x, y and users must hold one entry per record, got x 10, y 9, users 10",
    ),
    (
        lambda: federated_data(X, Y, USERS, SILO_IDS[:8]),
        "x, y, users and silos must hold one entry per record, got x 10, y 10, users 10, silos 8",
    ),
    (lambda: from_silos({}), "silos: no silo given; give (x, y, users) for at least one silo"),
    (lambda: from_datasets([]), "datasets: no silo given; give a Dataset for at least one silo"),
    (
        lambda: federated_data(X, Y, [None, *USERS[1:]]),
        "users: record 0 has no user id (None); every record needs the user it belongs to",
    ),
    (
        lambda: federated_data(X, Y, np.r_[np.nan, np.nan, np.arange(8.0)]),
        "users: record 0 has no user id (nan); every record needs the user it belongs to; "
        "2 records have none",
    ),
    (
        lambda: from_silos({"a": (X, Y, ["u"] * 9 + [" "])}),
        "users: silo 'a' record 9 has no user id (' '); every record needs the user it belongs to",
    ),
    (
        lambda: federated_data(X, Y, [1, "a"] * 5),
        "users: ids must be of one kind that sorts (all numbers or all strings), got int, str",
    ),
    (
        lambda: federated_data(X, np.r_[0.5, Y[1:]], USERS),
        "y: labels of a multiclass task must be integer class ids 0, 1, ..., got 0.5 (record 0); "
        "map your labels to class ids first",
    ),
    (
        lambda: federated_data(X, np.array(["a"] * 10), USERS),
        "y: labels of a multiclass task must be integer class ids 0, 1, ..., got 'a' (record 0); "
        "map your labels to class ids first",
    ),
    (lambda: federated_data(X, np.r_[-1, Y[1:]], USERS), "y: record 0 has label -1; class ids start at 0"),
    (
        lambda: federated_data(X, Y * 0, USERS),
        "y: every label is 0, so the task has one class; give n_classes (2 or more) or task='binary'",
    ),
    (lambda: federated_data(X, Y, USERS, task="binary"), "y: a binary task has labels 0 and 1, got label 2"),
    (
        lambda: federated_data(X, Y, USERS, task="regression"),
        "task must be one of multiclass, binary, survival, got 'regression'",
    ),
    (
        lambda: federated_data(X[:, 0], Y, USERS),
        "x: features must have shape (n, *feature_shape), a row per record, got shape (10,) "
        "(reshape a single feature to (n, 1))",
    ),
    (
        lambda: federated_data(np.where(np.eye(10, 3) > 0, np.nan, X), Y, USERS),
        "x: record 0 has a NaN or infinite feature (as float32); fill or drop it first",
    ),
    (
        lambda: federated_data(X, Y, USERS, n_silos=11),
        "n_silos 11 is more than the 10 records: give 10 or fewer",
    ),
    (
        lambda: federated_data(X, Y, USERS, SILO_IDS, n_silos=7),
        f"n_silos 7 disagrees with the {len(set(SILO_IDS))} distinct silos given",
    ),
    (lambda: federated_data(X, Y, USERS, x_test=X), "y_test: give the labels of x_test"),
    (
        lambda: federated_data(X, Y, USERS, SILO_IDS, x_test=X, y_test=Y, silos_test=["elsewhere"] * 10),
        "silos_test: test record 0 is in silo 'elsewhere', which holds no training record (training silos: "
        + ", ".join(sorted(set(SILO_IDS)))
        + ")",
    ),
    (
        lambda: from_datasets({"a": ItemDataset([(X[0], Y[0], "u"), (X[1], Y[1])])}),
        "datasets['a']: item 1 is a tuple of 2 values (ndarray, ...); each item must be (x, y, user) or a "
        "dict with keys x, y, user",
    ),
    (
        lambda: from_datasets(ItemDataset([(X[0], Y[0], "u"), (X[1, :2], Y[1], "v")])),
        "dataset: item 1 has features of shape (2,), item 0 (3,); every item needs one shape",
    ),
    (
        lambda: from_datasets(ItemDataset([{"x": X[0], "y": Y[0]}])),
        "dataset: item 0 is a dict without user; each item must be (x, y, user) or a dict with keys "
        "x, y, user",
    ),
    (lambda: from_datasets(Broken()), "dataset: reading item 2 failed: KeyError: 2"),
    (
        lambda: as_federated(42, option="--data"),
        "--data: got an int; expected a FederatedData; (x, y, users) or (x, y, users, silos);",
    ),
    (
        lambda: as_federated({"x": X, "y": Y, "users": USERS, "weights": Y}, option="--data"),
        "--data: the dict has key(s) 'weights' that uldp does not read; its keys are x, y, users, silos, "
        "x_test, y_test, silos_test, task, n_classes, n_silos, name, test_fraction",
    ),
    (
        lambda: federated_data(X, np.column_stack([np.ones(10), np.full(10, 2.0)]), USERS),
        "y: record 0 has event 2; an event is 1 (observed) or 0 (censored)",
    ),
    (lambda: from_files([]), "paths: no file given; give one file per silo"),
    (
        lambda: federated_data([[1.0, 2.0], [3.0]], [0, 1], ["a", "b"]),
        "x: cannot be read as one array; every record needs the same shape",
    ),
]


@pytest.mark.parametrize(("call", "line"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_is_one_line_naming_the_keyword(call, line):
    with pytest.raises((DataError, InvalidParameter)) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(line), message


def test_bad_files_are_refused_in_one_line(tmp_path):
    (tmp_path / "cut.npz").write_bytes(b"PK\x03\x04" + b"\0" * 20)
    with pytest.raises(DataError, match="cut.npz is not a readable .npz file"):
        from_files([tmp_path / "cut.npz"])
    np.savez(tmp_path / "a.npz", x=X, y=Y)
    with pytest.raises(
        DataError, match=re.escape(f"paths: {tmp_path / 'a.npz'} has no array 'users' (its arrays: x, y)")
    ):
        from_files([tmp_path / "a.npz"])
    np.savez(tmp_path / "b.npz", x=X, y=Y, users=np.array(USERS, dtype=object))
    with pytest.raises(DataError, match="stores an array as Python objects"):
        from_files([tmp_path / "b.npz"])
    pd.DataFrame({"user": ["a", None], "f": [1, 2], "label": [0, 1]}).to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(
        DataError, match=re.escape(f"paths: {tmp_path / 'c.csv'}: --user-column user: row 2 has no id")
    ):
        from_files([tmp_path / "c.csv"], user_column="user", label_column="label")
    with pytest.raises(InvalidParameter, match="user_column: name the tables' column of user ids"):
        from_files([tmp_path / "c.csv"], label_column="label")
    with pytest.raises(DataError, match="paths: give files of one kind"):
        from_files([tmp_path / "a.npz", tmp_path / "c.csv"])
    with pytest.raises(DataError, match=re.escape(f"paths: no file at {tmp_path / 'nope.npz'}")):
        from_files([tmp_path / "nope.npz"])
