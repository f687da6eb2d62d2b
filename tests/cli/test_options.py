from __future__ import annotations

import json
import sys

import click
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from uldp.cli.options import (
    INT64_MAX,
    CommaList,
    Interval,
    OpenUnitInterval,
    PositiveFloat,
    PositiveInt,
    Probability,
    comma_list_option,
    format_option,
)


@click.command()
@click.option("--sigma", type=PositiveFloat())
@click.option("--q", type=Probability())
@click.option("--delta", type=OpenUnitInterval())
@click.option("--steps", type=PositiveInt())
@comma_list_option("--k", item_type=PositiveInt())
@comma_list_option("--eps", item_type=PositiveFloat(), default="1,2")
@format_option
def dummy(**values: object) -> None:
    click.echo(json.dumps(values, sort_keys=True))


def invoke(*args: str) -> click.testing.Result:
    return CliRunner().invoke(dummy, list(args))


def test_defaults() -> None:
    result = invoke()
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "sigma": None,
        "q": None,
        "delta": None,
        "steps": None,
        "k": [],
        "eps": [1.0, 2.0],
        "fmt": "table",
    }


def test_comma_list_takes_repeats_and_commas() -> None:
    result = invoke("--k", "1,2", "--k", "4", "--k", " 8 , 16 ")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["k"] == [1, 2, 4, 8, 16]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--q", "1.5"], "Invalid value for '--q': 1.5 is not in (0, 1]"),
        (["--q", "0"], "Invalid value for '--q': 0 is not in (0, 1]"),
        (["--delta", "1"], "Invalid value for '--delta': 1 is not in (0, 1)"),
        (["--sigma", "-1"], "Invalid value for '--sigma': -1 is not in (0, inf)"),
        (["--sigma", "inf"], "Invalid value for '--sigma': inf is not in (0, inf)"),
        (["--sigma", "nan"], "Invalid value for '--sigma': nan is not in (0, inf)"),
        (["--sigma", "abc"], "Invalid value for '--sigma': abc is not a number."),
        (["--steps", "0"], "Invalid value for '--steps': 0 is not a positive integer."),
        (["--steps", "2.5"], "Invalid value for '--steps': 2.5 is not an integer."),
        (["--k", "1,0"], "Invalid value for '--k': 0 is not a positive integer."),
        (["--k", "1,,2"], "Invalid value for '--k': '1,,2' has an empty item."),
        (["--format", "xml"], "Invalid value for '--format'"),
    ],
)
def test_bad_values_exit_2_with_one_error_line(args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0], result.output


def test_help_shows_comma_list_metavar() -> None:
    result = invoke("--help")
    assert "--k INTEGER,..." in result.output
    assert "[default: table]" in result.output


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_probability_accepts_exactly_the_normal_floats_of_the_half_open_unit_interval(x: float) -> None:
    try:
        accepted = Probability().convert(repr(x), None, None)
    except click.BadParameter:
        assert not sys.float_info.min <= x <= 1
    else:
        assert sys.float_info.min <= x <= 1 and accepted == x


@pytest.mark.parametrize("text", ["1e-310", "4.9e-324", "-1e-320"])
def test_subnormal_values_are_refused_by_name(text: str) -> None:
    with pytest.raises(click.BadParameter, match="too small to compute with"):
        Interval(-1.0, 1.0).convert(text, None, None)


def test_positive_int_has_a_ceiling_that_it_names() -> None:
    assert PositiveInt().convert(str(INT64_MAX), None, None) == INT64_MAX
    with pytest.raises(click.BadParameter, match="largest supported value, 9223372036854775807"):
        PositiveInt().convert("99999999999999999999999999", None, None)
    with pytest.raises(click.BadParameter, match="largest supported value, 10"):
        PositiveInt(10).convert("11", None, None)


def test_positive_float_ceiling_is_inclusive() -> None:
    assert PositiveFloat(1e6).convert("1e6", None, None) == 1e6
    with pytest.raises(click.BadParameter, match=r"not in \(0, 1e\+06\]"):
        PositiveFloat(1e6).convert("1.0000001e6", None, None)


def test_comma_list_accepts_yaml_shapes() -> None:
    ints = CommaList(PositiveInt())
    assert ints.convert([1, 2], None, None) == [1, 2]
    assert ints.convert(3, None, None) == [3]
    with pytest.raises(click.BadParameter, match="nested"):
        ints.convert([[1], 2], None, None)


@pytest.mark.parametrize(
    "command",
    [
        ["account", "--sigma", "5", "--q", "0.01", "--steps", "10", "--k", "2", "--plot"],
        [
            "personalize",
            "--distribution",
            "three-levels",
            "--sigma",
            "20",
            "--local-steps",
            "1",
            "--rounds",
            "1",
            "--out",
        ],
        ["train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--metrics"],
        ["bench", "protocol", "--plot"],
    ],
)
def test_an_output_file_in_a_missing_directory_is_refused_before_any_work(tmp_path, command):
    from uldp.cli.main import cli

    target = tmp_path / "missing" / "out.png"
    result = CliRunner().invoke(cli, [*command, str(target)])
    assert result.exit_code == 2
    assert "does not exist or is not writable" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "target, message",
    [
        ("", "an empty path"),
        ("/proc/uldp-out.png", "does not exist or is not writable"),  # root may "access" /proc
        ("{tmp}", "is a directory"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["calibrate", "--epsilon", "3", "--q", "0.01", "--steps", "1000", "--plot"],
        ["dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0.1", "--rounds", "10", "--plot"],
        ["subject", "--silos", "4", "--silos-per-round", "4", "--rounds", "10", "--local-steps", "1"]
        + ["--record-q", "0.1", "--sigma", "1", "--plot"],
    ],
)
def test_an_unusable_plot_path_is_one_line_and_exit_2(tmp_path, command, target, message):
    from uldp.cli.main import cli

    result = CliRunner().invoke(cli, [*command, target.format(tmp=tmp_path)])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
