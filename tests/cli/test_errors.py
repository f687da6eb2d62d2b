from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from uldp.cli.errors import library_errors
from uldp.cli.main import cli
from uldp.errors import DataError, InvalidParameter, ProtocolError, UldpError, UnreachableBudget


@click.command()
@click.option("--fail", is_flag=True)
@library_errors()
def dummy(fail: bool) -> None:
    if fail:
        raise UnreachableBudget("target epsilon 0.01 is unreachable\nwith these orders")
    click.echo("ok")


def test_library_error_becomes_one_line_usage_error() -> None:
    result = CliRunner().invoke(dummy, ["--fail"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    expected = "Error: target epsilon 0.01 is unreachable with these orders"
    assert expected in result.output.splitlines()


def test_no_error_passes_through() -> None:
    result = CliRunner().invoke(dummy, [])
    assert result.exit_code == 0 and result.output == "ok\n"


@pytest.mark.parametrize("error", [InvalidParameter, UnreachableBudget, DataError, ProtocolError])
def test_every_library_error_is_a_uldp_error_and_a_value_error(error) -> None:
    # ValueError kept as a base so that callers written against the earlier contract still work.
    assert issubclass(error, UldpError) and issubclass(error, ValueError)


def _invoke_raising(error: Exception) -> tuple[int, list[str]]:
    @cli.command("explode-for-test")
    def explode() -> None:
        raise error

    try:
        result = CliRunner().invoke(cli, ["explode-for-test"])
    finally:
        cli.commands.pop("explode-for-test")
    return result.exit_code, result.output.splitlines()


def test_group_turns_library_error_from_any_subcommand_into_usage_error() -> None:
    code, lines = _invoke_raising(InvalidParameter("bad input"))
    assert code == 2
    assert "Error: bad input" in lines


def test_a_plain_value_error_is_a_bug_not_the_users_fault() -> None:
    # A ValueError from numpy or torch deep inside is not bad input: one line, exit status 1.
    code = (
        "import click, sys\n"
        "from uldp.cli.main import cli\n"
        "@cli.command('explode')\n"
        "def explode():\n"
        "    raise ValueError('operands could not be broadcast together')\n"
        "cli(['explode'], prog_name='uldp')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: internal error (ValueError: operands")
    assert "ULDP_DEBUG=1" in lines[0]
