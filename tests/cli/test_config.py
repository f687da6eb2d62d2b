from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from uldp.cli.config import config_option
from uldp.cli.options import PositiveInt, Probability, comma_list_option


@click.command()
@config_option
@click.option("--sigma", type=float, default=1.0)
@click.option("--q", type=Probability(), default=1.0)
@click.option("--target-epsilon", type=float)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@click.option("--verbose/--quiet", default=False)
@comma_list_option("--k", item_type=PositiveInt(), default=[1])
def dummy(**values: object) -> None:
    click.echo(json.dumps(values, sort_keys=True))


def run(tmp_path: Path, yaml_text: str, *args: str) -> click.testing.Result:
    config = tmp_path / "run.yaml"
    config.write_text(yaml_text)
    return CliRunner().invoke(dummy, ["--config", str(config), *args])


def values(result: click.testing.Result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_without_config_defaults_apply() -> None:
    result = CliRunner().invoke(dummy, [])
    assert values(result) == {
        "sigma": 1.0,
        "q": 1.0,
        "target_epsilon": None,
        "fmt": "table",
        "verbose": False,
        "k": [1],
    }


def test_yaml_values_are_used(tmp_path: Path) -> None:
    text = "sigma: 0.8\nq: 0.01\ntarget-epsilon: 2\nformat: json\nverbose: true\nk: [1, 2, 4]\n"
    assert values(run(tmp_path, text)) == {
        "sigma": 0.8,
        "q": 0.01,
        "target_epsilon": 2.0,
        "fmt": "json",
        "verbose": True,
        "k": [1, 2, 4],
    }


def test_keys_may_use_underscores_and_yaml_strings_convert(tmp_path: Path) -> None:
    # YAML 1.1 reads 1e-2 as a string; the option's type still converts it.
    got = values(run(tmp_path, "target_epsilon: 3\nq: 1e-2\n"))
    assert got["target_epsilon"] == 3.0 and got["q"] == 0.01


def test_command_line_overrides_file(tmp_path: Path) -> None:
    got = values(
        run(tmp_path, "sigma: 0.8\nk: [2, 3]\nverbose: true\n", "--sigma", "2", "--k", "5", "--quiet")
    )
    assert got["sigma"] == 2.0 and got["k"] == [5] and got["verbose"] is False


@pytest.mark.parametrize("text, expected", [("k: 4\n", [4]), ("k: '1,2,4'\n", [1, 2, 4])])
def test_single_values_for_repeatable_options(tmp_path: Path, text: str, expected: list) -> None:
    assert values(run(tmp_path, text))["k"] == expected


def test_empty_file_changes_nothing(tmp_path: Path) -> None:
    assert values(run(tmp_path, ""))["sigma"] == 1.0


def _one_error_line(result: click.testing.Result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    return errors[0]


def test_unknown_key_is_one_line_naming_file_key_and_allowed(tmp_path: Path) -> None:
    line = _one_error_line(run(tmp_path, "sigma: 1\nsgima: 2\n"))
    assert "run.yaml" in line and "'sgima'" in line
    assert "allowed keys: format, k, q, sigma, target-epsilon, verbose" in line


@pytest.mark.parametrize("text", ["sigma: [1\n", "a: b: c\n", "\tsigma: 1\n"])
def test_malformed_yaml_is_one_line(tmp_path: Path, text: str) -> None:
    line = _one_error_line(run(tmp_path, text))
    assert "run.yaml" in line and "not valid YAML" in line and "line" in line


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("- sigma\n", "expected a mapping"),
        ("q: 1.5\n", "key 'q': 1.5 is not in (0, 1]"),
        ("k: [1, 0]\n", "key 'k': 0 is not a positive integer"),
        ("sigma: [1, 2]\n", "key 'sigma': expected a single value"),
        ("sigma: {a: 1}\n", "key 'sigma': expected a value, got a mapping"),
        ("sigma: 1\nsigma_: 2\n", "unknown key 'sigma_'"),
        ("target-epsilon: 1\ntarget_epsilon: 2\n", "a second time"),
        ("1: 2\n", "unknown key 1"),
        ("format: xml\n", "key 'format'"),
    ],
)
def test_bad_content_is_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    line = _one_error_line(run(tmp_path, text))
    assert "run.yaml" in line and fragment in line


def test_missing_file_exits_2() -> None:
    result = CliRunner().invoke(dummy, ["--config", "no/such/file.yaml"])
    assert result.exit_code == 2
    assert "does not exist" in result.output


@pytest.mark.parametrize(
    "text,key,line",
    [
        ("sigma: 1\nq: 0.5\nsigma: 2\n", "sigma", 3),
        ("{sigma: 1, sigma: 2}\n", "sigma", 1),
        ("q: 0.5\ntarget-epsilon: 1\ntarget-epsilon: 1\n", "target-epsilon", 3),
    ],
)
def test_a_key_given_twice_is_refused_with_its_line(tmp_path: Path, text: str, key: str, line: int) -> None:
    # PyYAML keeps the last value silently: `rounds: 1` then `rounds: 2` ran 2 rounds.
    error = _one_error_line(run(tmp_path, text))
    assert "run.yaml" in error and f"key '{key}' given twice" in error and f"line {line}," in error


def test_merge_keys_may_still_be_overridden(tmp_path: Path) -> None:
    # `<<` merges another mapping's keys under this one's own: YAML's way to override, not a repeat.
    assert values(run(tmp_path, "sigma: 2\n<<: {q: 0.25, sigma: 3}\n"))["sigma"] == 2


def test_a_byte_order_mark_is_not_part_of_the_first_key(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_bytes("sigma: 2\n".encode("utf-8-sig"))
    assert values(CliRunner().invoke(dummy, ["--config", str(config)]))["sigma"] == 2
