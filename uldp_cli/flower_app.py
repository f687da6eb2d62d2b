"""uldp's ServerApp for a deployed Flower federation: `uldp train --engine flower` run by Flower.

The SuperLink starts this ServerApp for a run submitted with `flwr run` (examples/flower/: the
app directory `uldp_app` names this module and `uldp.trainers.flower.client_app`). Its run config
holds one key, `train-args`: the `uldp train` options as on a command line (`--algo uldp-avg-w
--dataset heart-disease --secure --metrics run.jsonl ...`). The ServerApp runs the `uldp train`
command with them and `--engine flower`, inside `serving(grid)`: the rounds go to the SuperNodes
connected to the SuperLink, each reading its own silo's partition file, and the command prints
the same table and writes the same metrics file, plot and checkpoint as in process. It lives
in the CLI package because it is an entry point: it parses, runs the command, renders.

A refused option or a failed silo prints the command's one `Error:` line, as `uldp train` does
(no usage text: a silo that failed is not a usage error), and fails the run with `RunFailed`, so
that Flower marks it failed at once and keeps the output. Flower logs a failed ServerApp's
exception with its traceback; for `RunFailed`, whose line is printed already, the traceback is
left out (`_KnownFailure`). Off a terminal (the SuperLink's log stream, a log file), Flower's log
lines carry no colour codes.
"""

from __future__ import annotations

import logging
import shlex
from typing import NoReturn

import click
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from uldp.trainers.flower.deployment import serving
from uldp.trainers.flower.simulation import quiet_colours

app = ServerApp()


class RunFailed(RuntimeError):
    """The `uldp train` command of the run stopped with an error (printed above)."""


class _KnownFailure(logging.Filter):
    """Drops the traceback from Flower's "ServerApp raised an exception" record when the exception
    is `RunFailed`: its one `Error:` line is printed already, and the traceback (Flower's and this
    module's frames) tells the user nothing more. Every other exception keeps its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], RunFailed):
            record.exc_info, record.exc_text = None, None
        return True


def _quiet_known_failures() -> None:
    logger = logging.getLogger("flwr")  # flwr.common.logger's FLOWER_LOGGER, the one Flower logs to
    if not any(isinstance(existing, _KnownFailure) for existing in logger.filters):
        logger.addFilter(_KnownFailure())


@app.main()
def main(grid: Grid, context: Context) -> None:
    from uldp.cli.commands.train import command
    from uldp.cli.errors import one_line

    _quiet_known_failures()
    args = shlex.split(str(context.run_config.get("train-args", "")))
    if "--engine" in args:
        _fail("train-args: leave out --engine: a deployed run is --engine flower")
    try:
        with serving(grid), quiet_colours():  # the run's output goes to Flower's log stream
            command.main(args=[*args, "--engine", "flower"], prog_name="uldp train", standalone_mode=False)
    except click.ClickException as error:
        # What `uldp train` prints (uldp_cli/main.py), never Click's usage lines (`error.show()`).
        _fail(one_line(error.format_message()))
    except click.exceptions.Exit as done:
        if done.exit_code:
            raise RunFailed(f"uldp train exited with status {done.exit_code}") from None


def _fail(message: str) -> NoReturn:
    """Print the run's one `Error:` line and fail the run (Flower marks it failed)."""
    click.echo(f"Error: {message}", err=True)
    raise RunFailed(message) from None
