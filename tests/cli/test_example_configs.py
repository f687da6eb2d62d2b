"""Every YAML file in examples/ names only current options of the command it is written for.

A renamed option (docs/cli.md) keeps its old spelling as a hidden alias that warns; an example
that still used one would teach the old spelling, and a misspelt key would be refused only when
a user runs the file. Each file says in its comments which command reads it (`uldp X --config
examples/F.yaml`); examples/compare-*.yaml are read by examples/compare-algorithms.sh, which
runs `uldp train`.
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
import yaml

from uldp.cli.main import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONFIGS = sorted(EXAMPLES.glob("*.yaml"))


def _command_of(path: Path) -> str:
    if path.name.startswith("compare-"):
        return "train"
    match = re.search(rf"uldp (\w+) --config examples/{re.escape(path.name)}", path.read_text())
    assert match, f"{path.name}: its comments must say which `uldp` command reads it"
    return match.group(1)


def _current_keys(command: click.Command) -> set[str]:
    return {opt[2:] for param in command.params for opt in param.opts if opt.startswith("--")}


def test_there_are_example_configs() -> None:
    assert len(CONFIGS) >= 8


@pytest.mark.parametrize("path", CONFIGS, ids=[path.name for path in CONFIGS])
def test_example_config_uses_current_option_names(path: Path) -> None:
    command = cli.get_command(click.Context(cli), _command_of(path))
    assert isinstance(command, click.Command)
    keys = set(yaml.safe_load(path.read_text()))
    unknown = keys - _current_keys(command)
    assert not unknown, f"{path.name}: not current options of uldp {command.name}: {sorted(unknown)}"
