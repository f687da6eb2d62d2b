"""Issue 12 for `uldp personalize` and its files: each example the fuzzer found, as a user runs it.

Every refusal is one `Error:` line naming the option or the file and what is allowed, exit 2.
"""

from __future__ import annotations

import csv
import time

import numpy as np
import pytest

from uldp.accountants.personalized.record_rates import personalize
from uldp.accountants.personalized.record_spend import EpsilonCurve, RecordSampledFL

from .invoke import command_runner

run, run_json = command_runner("personalize")
RUN = ["--local-steps", "10", "--rounds", "50"]
CHEAP = [
    "--distribution",
    "group-3",
    "--records",
    "10",
    "--sigma",
    "3",
    "--local-steps",
    "1",
    "--rounds",
    "1",
]


def one_error_line(result, *words: str) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.output
    assert "Traceback" not in result.output
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def write(path, text: str, encoding: str = "utf-8") -> str:
    path.write_bytes(text.encode(encoding))
    return str(path)


@pytest.mark.parametrize(
    "option,value,words",
    [
        ("--records", "99999999999999999999999999", "largest supported value, 10000000"),
        ("--records", "10000001", "largest supported value, 10000000"),
        ("--seed", "1e26", "not a valid integer"),
        ("--seed", "4294967296", "0<=x<=4294967295"),
        ("--sigma", "1e155", "[0.001, 1e+06]"),
        ("--sigma", "1e-300", "[0.001, 1e+06]"),
        ("--q-min", "1e-310", "too small to compute with"),
        ("--local-steps", "10000001", "largest supported value, 10000000"),
        ("--rounds", "99999999999999999999", "largest supported value"),
        ("--plot", "", "an empty path"),
        ("--plot", "/proc/version", "not writable"),
    ],
)
def test_out_of_range_values_are_refused_by_name(option, value, words):
    args = dict(zip(CHEAP[::2], CHEAP[1::2]))
    args[option] = value
    result = run(*[item for pair in args.items() for item in pair])
    one_error_line(result, f"'{option}'", words)


def test_bisect_with_a_tolerance_below_the_spacing_of_doubles_ends_and_stays_within_budget():
    # `while hi - lo > tolerance` never ended at 1e-300: no double lies between the ends.
    curve = EpsilonCurve(RecordSampledFL(1.2, 10, 50), 1e-5)
    budgets = np.array([1.0, 2.0, 3.0])
    start = time.perf_counter()
    fine = personalize(budgets, curve, method="bisect", tolerance=1e-300)
    assert time.perf_counter() - start < 60
    assert np.all(fine.spent <= budgets) and np.all(fine.q > 0)
    np.testing.assert_array_equal(curve(fine.q), fine.spent)  # the epsilon reported is the rate's
    coarse = personalize(budgets, curve, method="bisect")
    assert np.all(fine.q >= coarse.q) and np.all(fine.q - coarse.q <= 1e-9)


def test_bisect_tolerance_has_a_ceiling():
    # 1e308 handed every record q = q_min.
    result = run(*CHEAP, "--method", "bisect", "--tolerance", "1e308")
    one_error_line(result, "'--tolerance'", "(0, 0.01]")


def test_bisect_refuses_more_distinct_budgets_than_it_serves_before_any_work():
    start = time.perf_counter()
    args = ["--distribution", "individual-1000", "--records", "10001", "--sigma", "3", *RUN]
    one_error_line(run(*args, "--method", "bisect"), "'--method'", "at most 10000 distinct", "got 10001")
    one_error_line(run(*args, "--compare"), "'--compare'", "without --compare")
    assert time.perf_counter() - start < 20
    # Many records with few distinct budgets are served.
    doc = run_json(
        "--distribution", "group-3", "--records", "100000", "--sigma", "3", *RUN, "--method", "bisect"
    )
    assert doc["methods"][0]["records"] == 100000 and doc["methods"][0]["overspent"] == 0


def test_curve_evaluates_many_rates_in_chunks_with_the_same_values(monkeypatch):
    from uldp.accountants.personalized import record_spend as personalized

    curve = EpsilonCurve(RecordSampledFL(1.2, 10, 50), 1e-5)
    qs = np.geomspace(1e-4, 1, 7)
    whole = curve(qs)
    monkeypatch.setattr(personalized, "CURVE_CHUNK", 3)
    np.testing.assert_array_equal(curve(qs), whole)
    assert curve.evaluations == 14


@pytest.mark.parametrize(
    "extra,option,reader",
    [
        (["--tolerance", "1e-6"], "--tolerance", "--method bisect"),
        (["--epsilon-column", "eps"], "--epsilon-column", "--epsilon-csv"),
        (["--id-column", "user"], "--id-column", "--epsilon-csv"),
    ],
)
def test_options_the_distribution_or_method_ignores_are_refused(extra, option, reader):
    one_error_line(run(*CHEAP, *extra), f"'{option}'", reader, "leave it out")


@pytest.mark.parametrize("extra,option", [(["--records", "5"], "--records"), (["--seed", "3"], "--seed")])
def test_options_a_budgets_file_ignores_are_refused(tmp_path, extra, option):
    src = write(tmp_path / "b.csv", "id,epsilon\na,1\n")
    one_error_line(run("--epsilon-csv", src, "--sigma", "3", *RUN, *extra), f"'{option}'", "--distribution")


def test_an_ignored_option_from_a_config_file_counts_as_the_users(tmp_path):
    config = tmp_path / "p.yaml"
    config.write_text("distribution: group-3\nsigma: 3\nlocal-steps: 1\nrounds: 1\ntolerance: 1e-6\n")
    one_error_line(run("--config", str(config)), "'--tolerance'")
    # With bisect it is read; the default value is never refused.
    assert run_json("--config", str(config), "--method", "bisect")["methods"][0]["tolerance"] == 1e-6
    run_json(*CHEAP)


def test_calibrating_to_budgets_that_are_all_zero_is_refused_by_name(tmp_path):
    src = write(tmp_path / "b.csv", "id,epsilon\na,0\n")
    one_error_line(
        run("--epsilon-csv", src, "--calibrate-sigma", *RUN), "'--calibrate-sigma'", "every budget is 0"
    )


@pytest.fixture(params=["pyarrow", "csv module"])
def reader(request, monkeypatch):
    """Each reader test runs on both paths: one reader, one behaviour."""
    if request.param == "csv module":
        from uldp.cli import personalize_io

        monkeypatch.setattr(personalize_io, "_pyarrow", lambda: False)
    else:
        pytest.importorskip("pyarrow")
    return request.param


def _rates(tmp_path, src, *extra):
    out = tmp_path / "q.csv"
    run_json("--epsilon-csv", src, "--sigma", "3", *RUN, "--out", str(out), *extra)
    with open(out, newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path, reader):
    plain = _rates(tmp_path, write(tmp_path / "plain.csv", "id,epsilon\na,1\nb,2\n"))
    marked = _rates(tmp_path, write(tmp_path / "bom.csv", "id,epsilon\na,1\nb,2\n", "utf-8-sig"))
    assert marked == plain and [r["id"] for r in marked] == ["a", "b"]
    first = _rates(tmp_path, write(tmp_path / "bom2.csv", "epsilon,id\n1,a\n2,b\n", "utf-8-sig"))
    assert [(r["id"], r["q"]) for r in first] == [(r["id"], r["q"]) for r in plain]


def test_a_duplicated_column_name_is_refused(tmp_path, reader):
    src = write(tmp_path / "dup.csv", "id,epsilon,epsilon\na,0.5,3\n")
    one_error_line(
        run("--epsilon-csv", src, "--sigma", "3", *RUN),
        "'--epsilon-csv'",
        "dup.csv",
        "'epsilon' appears 2 times",
    )


@pytest.mark.parametrize(
    "body,words",
    [
        ("a,1,7\nb,2\n", "row 1 has 3 fields, the header has 2"),
        ("a,1\nb\n", "row 2 has 1 field, the header has 2"),
        ("a,1\nb,lots\n", "row 2: budget 'lots' is not a number"),
    ],
)
def test_bad_rows_get_the_same_error_on_both_paths(tmp_path, reader, body, words):
    src = write(tmp_path / "bad.csv", "id,epsilon\n" + body)
    one_error_line(run("--epsilon-csv", src, "--sigma", "3", *RUN), "'--epsilon-csv'", "bad.csv", words)


def test_both_paths_read_the_same_values(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    from uldp.cli import personalize_io

    # Spaces around a number and a blank line: pyarrow refuses the padded number, the csv module
    # reads it; the result must not depend on which is installed.
    src = write(tmp_path / "b.csv", "id,epsilon\na, 1.5\n\nb,2\n")
    fast = _rates(tmp_path, src)
    monkeypatch.setattr(personalize_io, "_pyarrow", lambda: False)
    slow = _rates(tmp_path, src)
    # The two writers spell floats their own way (2 / 2.0); the values are what must agree.
    numbers = [{k: v if k in ("id", "status") else float(v) for k, v in r.items()} for r in slow]
    assert numbers == [{k: v if k in ("id", "status") else float(v) for k, v in r.items()} for r in fast]
    assert [r["epsilon"] for r in numbers] == [1.5, 2.0]
