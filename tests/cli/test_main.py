from __future__ import annotations

import json
import subprocess
import sys

import click
from click.testing import CliRunner

from uldp import __version__
from uldp.cli.main import SUBCOMMANDS, LazyGroup, cli


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"uldp {__version__}\n"


def test_help_lists_available_commands_only() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output
    listed = cli.list_commands(click.Context(cli))
    for name in listed:
        assert name in result.output
    assert {"account", "calibrate"} <= set(listed) <= set(SUBCOMMANDS)


def test_unknown_command_exits_2() -> None:
    result = CliRunner().invoke(cli, ["no-such-command"])
    assert result.exit_code == 2
    assert "No such command" in result.output


def _group(lazy_commands: dict[str, str]) -> LazyGroup:
    @click.group(cls=LazyGroup, package="json", lazy_commands=lazy_commands)
    def group() -> None:
        """A group over the standard library's json package, whose modules define no command."""

    return group


def test_lazy_group_skips_modules_that_do_not_exist() -> None:
    group = _group({"missing": "not written yet", "decoder": "exists"})
    ctx = click.Context(group)
    assert group.list_commands(ctx) == ["decoder"]
    assert group.get_command(ctx, "missing") is None
    result = CliRunner().invoke(group, ["--help"])
    assert "missing" not in result.output
    assert "decoder" in result.output and "exists" in result.output


def test_lazy_group_rejects_module_without_command() -> None:
    group = _group({"decoder": "exists"})
    try:
        group.get_command(click.Context(group), "decoder")
    except TypeError as error:
        assert "json.decoder" in str(error)
    else:
        raise AssertionError("a module without `command` must be reported")


def _modules_loaded_by(args: list[str]) -> list[str]:
    """The modules a fresh `uldp ARGS` process has imported when it is done."""
    code = (
        "import json, sys\n"
        "from uldp.cli.main import cli\n"
        "try:\n"
        f"    cli({args!r}, prog_name='uldp')\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_help_imports_no_subcommand() -> None:
    loaded = _modules_loaded_by(["--help"])
    assert [m for m in loaded if m.startswith(("uldp.cli.commands.", "uldp.accountants"))] == []


def test_account_with_an_algorithm_imports_no_torch() -> None:
    # `uldp account --algo` reads the algorithm registry, whose modules build trainers: torch is
    # imported only when one trains, so accounting starts as fast as before.
    loaded = _modules_loaded_by(
        ["account", "--algo", "uldp-avg", "--sigma", "5", "--rounds", "100", "--user-q", "0.5"]
    )
    assert "uldp.trainers.algorithms.registry" in loaded
    assert [m for m in loaded if m.split(".")[0] == "torch"] == []


def test_a_report_of_a_plan_or_a_json_opacus_state_imports_no_torch(tmp_path) -> None:
    # Reading a JSON Opacus state or stating a plan needs no torch; only a .pt file or a run does.
    state = tmp_path / "opacus.json"
    state.write_text('{"history": [[1.0, 0.01, 100]], "mechanism": "rdp"}')
    for args in (
        ["--algo", "uldp-avg", "--sigma", "5", "--rounds", "10", "--user-q", "0.5"],
        ["--opacus", str(state)],
    ):
        loaded = _modules_loaded_by(["report", *args, "--accountant", "rdp", "--format", "json"])
        assert [m for m in loaded if m.split(".")[0] == "torch"] == [], args


def test_python_m_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "uldp", "--version"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"uldp {__version__}\n"


def test_a_bug_is_one_line_with_a_way_to_the_traceback(monkeypatch) -> None:
    import importlib

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(importlib.import_module("uldp.cli.commands.account"), "account", broken)
    result = CliRunner().invoke(cli, ["account", "--sigma", "1", "--q", "0.1", "--steps", "10"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: internal error (RuntimeError: boom); run again with ULDP_DEBUG=1 for the "
        "traceback and please report it"
    ]
    monkeypatch.setenv("ULDP_DEBUG", "1")
    result = CliRunner().invoke(cli, ["account", "--sigma", "1", "--q", "0.1", "--steps", "10"])
    assert isinstance(result.exception, RuntimeError)


def test_ctrl_c_in_any_command_exits_130_in_one_line(monkeypatch) -> None:
    # 128 + SIGINT, as uldp train and SIGTERM/SIGHUP (128 + theirs) report it; was "Aborted!", 1.
    import importlib

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(importlib.import_module("uldp.cli.commands.account"), "account", interrupted)
    result = CliRunner().invoke(cli, ["account", "--sigma", "1", "--q", "0.1", "--steps", "10"])
    assert result.exit_code == 130
    assert result.output.strip().splitlines() == ["Interrupted (Ctrl-C): no half-written output is left."]
