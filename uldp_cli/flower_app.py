"""uldp's ServerApp for a deployed Flower federation: `uldp train --engine flower` run by Flower.

The SuperLink starts this ServerApp for a run submitted with `flwr run` (examples/flower/: the
app directory `uldp_app` names this module and `uldp.trainers.flower.client_app`). Its run config
holds one key, `train-args`: the `uldp train` options as on a command line (`--algo uldp-avg-w
--dataset heart-disease --secure --metrics run.jsonl ...`). The ServerApp runs the `uldp train`
command with them and `--engine flower`, inside `serving(grid)`: the rounds go to the SuperNodes
connected to the SuperLink, each reading its own silo's partition file, and the command prints
the same table and writes the same metrics file, plot and checkpoint as in process. It lives
in the CLI package because it is an entry point: it parses, runs the command, renders.

A refused option or a failed silo prints the command's one `Error:` line and fails the run (an
exception, so that Flower marks it failed at once and keeps the output).
"""

from __future__ import annotations

import shlex

import click
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from uldp.trainers.flower.deployment import serving

app = ServerApp()


class RunFailed(RuntimeError):
    """The `uldp train` command of the run stopped with an error (printed above)."""


@app.main()
def main(grid: Grid, context: Context) -> None:
    from uldp.cli.commands.train import command

    args = shlex.split(str(context.run_config.get("train-args", "")))
    if "--engine" in args:
        raise RunFailed("train-args: leave out --engine: a deployed run is --engine flower")
    try:
        with serving(grid):
            command.main(args=[*args, "--engine", "flower"], prog_name="uldp train", standalone_mode=False)
    except click.ClickException as error:
        error.show()
        raise RunFailed(error.format_message()) from None
    except click.exceptions.Exit as done:
        if done.exit_code:
            raise RunFailed(f"uldp train exited with status {done.exit_code}") from None
