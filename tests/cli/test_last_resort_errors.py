"""Issue 32, item 3: the last-resort error path needs no memory to speak of.

Out of memory, even while the error is being formatted (the YAML bomb's MemoryError came from
inside the error formatter, and ended in a 79-line traceback), is one line and exit status 1;
an internal error's line is cut to a bounded length whatever the exception's message.
"""

from __future__ import annotations

import errno
from pathlib import Path

import click
import pytest

from uldp.cli.main import cli

from .fuzz import assert_contract, run

ARGS = ["account", "--sigma", "1", "--q", "0.1", "--steps", "10"]


def _account_raising(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    command = cli.get_command(click.Context(cli), "account")
    assert command is not None

    def fail(**_: object) -> None:
        raise error

    monkeypatch.setattr(command, "callback", fail)


class _Unprintable(RuntimeError):
    """An exception whose message cannot be formatted for want of memory."""

    def __str__(self) -> str:
        raise MemoryError


def _only_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_out_of_memory_in_a_command_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _account_raising(monkeypatch, MemoryError())
    result = run(*ARGS)
    assert result.exit_code == 1
    assert _only_line(result.stderr).startswith("Error: out of memory")


def test_out_of_memory_while_formatting_the_error_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _account_raising(monkeypatch, _Unprintable())
    result = run(*ARGS)
    assert result.exit_code == 1
    assert not isinstance(result.exception, MemoryError)  # handled, not escaped
    assert _only_line(result.stderr).startswith("Error: out of memory")


def test_a_huge_internal_error_message_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    _account_raising(monkeypatch, RuntimeError("x" * 5_000_000))
    result = run(*ARGS)
    assert result.exit_code == 1
    line = _only_line(result.stderr)
    assert line.startswith("Error: internal error (RuntimeError: xxx") and len(line) < 1_000


def test_a_full_disk_while_writing_an_output_names_the_option(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An OSError about a path an option gave (ENOSPC, EACCES, ENAMETOOLONG...) is the user's to
    fix: one line naming the option and the path, exit status 2 (it was "internal error")."""
    plot = tmp_path / "eps.png"
    from uldp.cli import figures

    def full_disk(path: object, data: object, **_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(figures, "atomic_write_bytes", full_disk)
    args = [*ARGS, "--k", "1,2", "--plot", str(plot)]
    result = run(*args)
    assert_contract(result, args)
    assert result.exit_code == 2
    assert _only_line(result.stderr) == f"Error: --plot {str(plot)!r}: No space left on device"


def test_an_os_error_about_no_option_s_path_is_still_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    _account_raising(monkeypatch, OSError(errno.ENOENT, "No such file or directory", "/internal/table.bin"))
    result = run(*ARGS)
    assert result.exit_code == 1
    assert _only_line(result.stderr).startswith("Error: internal error (FileNotFoundError")
