"""The `uldp` command group.

Subcommand modules pull in numpy, scipy and the accountants, so they are imported only when that
subcommand runs: `uldp --help` and `uldp --version` import none of them, and `uldp account`
imports only `uldp.cli.commands.account`.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import click

from uldp import __version__
from uldp.cli.errors import MissingExtra, file_error_line, library_errors, missing_extra, one_line
from uldp.cli.signals import install as install_signal_handlers
from uldp.errors import EngineError

COMMANDS_PACKAGE = "uldp.cli.commands"

# name -> one-line help shown by `uldp --help`. Kept here rather than read from the command so
# that listing commands does not import them; the command's own docstring is what
# `uldp NAME --help` shows.
SUBCOMMANDS: Mapping[str, str] = MappingProxyType(
    {
        "account": "Privacy spent (epsilon at delta) by a training configuration.",
        "calibrate": "Noise multiplier that meets a target (epsilon, delta).",
        "personalize": "Per-record sampling probabilities from per-record budgets (rPDP-FL).",
        "dropout": "Privacy lost when participants drop out, and the noise that restores it.",
        "subject": "Subject-level DP across federation members (horizontal composition).",
        "report": "A privacy statement for a plan or a run: every guarantee and what it means.",
        "train": "Train with a ULDP-FL algorithm and track utility and epsilon per round.",
        "audit": "Audit a training run: canaries, one run, an empirical lower bound on epsilon.",
        "bench": "Benchmarks: the cost of the private weighting protocol.",
    }
)


class LazyGroup(click.Group):
    """A group whose subcommands live in `<package>.<name>` modules, each exposing `command`.

    A listed module that does not exist (yet) is left out of the listing and reported as an
    unknown command, so the CLI keeps working while subcommands are being added.
    """

    def __init__(self, *args: Any, package: str, lazy_commands: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.package = package
        self.lazy_commands = dict(lazy_commands)

    def _module_name(self, name: str) -> str:
        return f"{self.package}.{name}"

    def _module_exists(self, name: str) -> bool:
        # find_spec locates the file without executing the module.
        return importlib.util.find_spec(self._module_name(name)) is not None

    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = [name for name in self.lazy_commands if self._module_exists(name)]
        return sorted({*super().list_commands(ctx), *lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        eager = super().get_command(ctx, cmd_name)
        if eager is not None or cmd_name not in self.lazy_commands:
            return eager
        if not self._module_exists(cmd_name):
            return None
        module = importlib.import_module(self._module_name(cmd_name))
        command = getattr(module, "command", None)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module.__name__} must define a click command named `command`")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Click's default asks every command for its short help, which would import them all.
        rows = [
            (name, self.lazy_commands.get(name) or self._eager_short_help(ctx, name))
            for name in self.list_commands(ctx)
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def _eager_short_help(self, ctx: click.Context, name: str) -> str:
        command = super().get_command(ctx, name)
        return command.get_short_help_str() if command is not None else ""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        """Like click's, but bad input is reported as exactly one `Error: ...` line (exit 2).

        Python and numpy warnings are silenced for the whole command: the library handles every
        overflow it expects (np.errstate) and refuses values that give no finite result, so a
        warning that is left can only be a numpy RuntimeWarning about an intermediate inf that
        was handled, a page of text the user can do nothing about (issue 12). The filter is
        restored on return, so a caller that runs the CLI in-process (tests) keeps its own.
        """
        with warnings.catch_warnings():
            if not os.environ.get("ULDP_DEBUG"):  # a developer chasing a warning still sees it
                warnings.simplefilter("ignore")
            return self._main(*args, standalone_mode=standalone_mode, **kwargs)

    def _main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[call-overload]
        try:
            return self._report(*args, **kwargs)
        except MemoryError:
            # Raised again while reporting an error (formatting a huge message, issue 32's YAML
            # bomb): the line is ready-made, so saying it needs no memory.
            _say_out_of_memory()
            sys.exit(1)

    def _report(self, *args: Any, **kwargs: Any) -> Any:
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[call-overload]
        except click.exceptions.NoArgsIsHelpError as err:
            err.show()
            sys.exit(err.exit_code)
        except click.ClickException as err:
            click.echo(f"Error: {one_line(err.format_message())}", err=True)
            sys.exit(err.exit_code)
        except click.Abort as err:
            if isinstance(err.__cause__ or err.__context__, KeyboardInterrupt):
                # Ctrl-C: the shell's 128 + SIGINT, as SIGTERM and SIGHUP give 128 + theirs; every
                # `finally` has run, so no temporary file is left.
                click.echo("Interrupted (Ctrl-C): no half-written output is left.", err=True)
                sys.exit(128 + signal.SIGINT)
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except MemoryError:
            _say_out_of_memory()
            sys.exit(1)
        except OSError as err:
            # A path an option gave that cannot be opened or written (a name over 255 bytes, a
            # missing folder, a full disk): the user's to fix, one line naming the option.
            line = file_error_line(err)
            if line is None:
                _say_internal_error(err)
                sys.exit(1)
            click.echo(f"Error: {line}", err=True)
            sys.exit(2)
        except EngineError as err:  # the environment's (Ray could not start): what to try, no bug report
            if os.environ.get("ULDP_DEBUG"):  # Ray's own error under it, for whoever digs deeper
                traceback.print_exception(err)
            click.echo(f"Error: {one_line(err)}", err=True)
            sys.exit(1)
        except Exception as err:  # a bug, not bad input: say so in one line, keep the details
            _say_internal_error(err)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        # The words naming the subcommand (`train`, `bench protocol`), read before invoking
        # consumes them, for the message about a missing extra.
        words = [*getattr(ctx, "_protected_args", ()), *ctx.args]
        command = " ".join(["uldp", *itertools.takewhile(lambda w: not w.startswith("-"), words[:2])])
        # Safety net: a ValueError from the library is bad input, never a traceback.
        try:
            with library_errors():
                return super().invoke(ctx)
        except ModuleNotFoundError as error:
            # The one place a missing optional dependency (torch, phe, mlxtend, ...) is reported:
            # which extra to install, exit status 2, instead of "internal error".
            extra = missing_extra(error)
            if extra is None:
                raise
            raise MissingExtra(command, error, extra) from error


_OUT_OF_MEMORY = (
    "Error: out of memory: ask for a smaller computation (fewer records, "
    "steps or group sizes, or another accountant)\n"
)
_OUT_OF_MEMORY_BYTES = _OUT_OF_MEMORY.encode()
#: An exception's own message is cut to this many characters: a message can be huge (a repr of
#: a whole array), and the line is for a person.
_MESSAGE_CHARS = 500


def _say_out_of_memory() -> None:
    try:
        sys.stderr.write(_OUT_OF_MEMORY)
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - even the stream's buffer could not grow: the bare fd
        os.write(2, _OUT_OF_MEMORY_BYTES)


def _say_internal_error(err: BaseException) -> None:
    """One line for an exception that is a bug (exit status 1); the traceback with ULDP_DEBUG=1."""
    if os.environ.get("ULDP_DEBUG"):
        raise err
    message = one_line(str(err)[:_MESSAGE_CHARS])
    click.echo(
        f"Error: internal error ({type(err).__name__}: {message}); "
        "run again with ULDP_DEBUG=1 for the traceback and please report it",
        err=True,
    )


@click.group(
    cls=LazyGroup,
    package=COMMANDS_PACKAGE,
    lazy_commands=SUBCOMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, "--version", prog_name="uldp", message="%(prog)s %(version)s")
def cli() -> None:
    """User-level differential privacy for cross-silo federated learning: accounting, budgets,
    training and the private weighting protocol."""
    install_signal_handlers()  # SIGTERM/SIGHUP unwind like Ctrl-C: temp files removed, exit 128+n
