from __future__ import annotations

import click
from click.testing import CliRunner

from uldp.cli.errors import library_errors
from uldp.cli.main import cli


@click.command()
@click.option("--fail", is_flag=True)
@library_errors()
def dummy(fail: bool) -> None:
    if fail:
        raise ValueError("target epsilon 0.01 is unreachable\nwith these orders")
    click.echo("ok")


def test_value_error_becomes_one_line_usage_error() -> None:
    result = CliRunner().invoke(dummy, ["--fail"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    expected = "Error: target epsilon 0.01 is unreachable with these orders"
    assert expected in result.output.splitlines()


def test_no_error_passes_through() -> None:
    result = CliRunner().invoke(dummy, [])
    assert result.exit_code == 0 and result.output == "ok\n"


def test_group_turns_value_error_from_any_subcommand_into_usage_error() -> None:
    @cli.command("explode-for-test")
    def explode() -> None:
        raise ValueError("bad input")

    try:
        result = CliRunner().invoke(cli, ["explode-for-test"])
    finally:
        cli.commands.pop("explode-for-test")
    assert result.exit_code == 2
    assert "Error: bad input" in result.output.splitlines()
