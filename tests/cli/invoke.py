"""Running one `uldp` subcommand in-process, as the end-to-end CLI tests do."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from typing import Any

from click.testing import CliRunner, Result

from uldp.cli.main import cli


def command_runner(name: str) -> tuple[Callable[..., Result], Callable[..., Any]]:
    """(run, run_json) for `uldp NAME ...`: the raw result, and the parsed JSON of a success."""

    def run(*args: str) -> Result:
        return CliRunner().invoke(cli, [name, *args])

    def run_json(*args: str) -> Any:
        result = run(*args, "--format", "json")
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    return run, run_json


def write_budgets(path, rows, header=("id", "epsilon")) -> str:
    """A budgets CSV at `path` (header, then `rows`), for `uldp personalize --epsilon-csv`."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def read_rows(path) -> list[dict]:
    """A CSV file's rows as dicts (the rates `--out` writes)."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))
