"""`uldp train` as a small package (issue 33): `--help` lists every option once, under the
heading of what it is about (the common ones, then each algorithm family's); every registered
algorithm belongs to exactly one family; the command function stays short."""

from __future__ import annotations

import inspect
import re

import click
import pytest
from click.testing import CliRunner

from uldp.cli.commands import train as train_command
from uldp.cli.commands.train.command import OPTION_GROUPS
from uldp.cli.commands.train.families import FAMILIES, families_of, family_of
from uldp.cli.main import cli
from uldp.trainers.algorithms import AlgorithmSpec, algorithm_names, register, unregister
from uldp.trainers.algorithms.fedavg import FedAvg

COMMAND = train_command.command
HEADINGS = [
    "Algorithm",
    "Data",
    "Model and training",
    "Privacy",
    "Secure computation",
    "ULDP-FL algorithms",
    "rPDP-FL algorithms",
    "Dropout-robust algorithm",
    "Engine",
    "Output",
    "Other options",
]


def _sections() -> dict[str, list[str]]:
    """`uldp train --help`'s headings, in order, each with the lines under it."""
    text = CliRunner().invoke(cli, ["train", "--help"], terminal_width=200).output
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":") and not line.startswith("Usage"):
            current = line[:-1]
            assert current not in sections, f"heading {current!r} twice"
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return sections


def _listed(lines: list[str], param: click.Parameter) -> int:
    """How many of `lines` start `param`'s entry (its first spelling, two spaces in)."""
    first = re.escape((*param.opts, *param.secondary_opts)[0])
    return sum(bool(re.match(rf"^  {first}(,| |$)", line)) for line in lines)


def test_help_shows_the_headings_in_order():
    assert list(_sections()) == HEADINGS


def test_help_lists_every_shown_option_once_under_its_heading():
    sections = _sections()
    ctx = click.Context(COMMAND, info_name="train")
    heading_of = {id(p): group.heading for group in OPTION_GROUPS for p in group.params}
    params = [p for p in COMMAND.get_params(ctx) if isinstance(p, click.Option)]
    assert len(params) > 50  # the walk below covers them all, not a handful
    for param in params:
        counts = {heading: _listed(lines, param) for heading, lines in sections.items()}
        if param.hidden:
            assert sum(counts.values()) == 0, param.name
            continue
        expected = heading_of.get(id(param), "Other options")
        assert counts[expected] == 1, (param.name, expected, counts)
        assert sum(counts.values()) == 1, (param.name, counts)


def test_each_family_s_options_are_under_its_heading():
    sections = _sections()
    for family in FAMILIES.values():
        assert family.options in OPTION_GROUPS
        for param in family.options.params:
            assert _listed(sections[family.heading], param) == 1, (family.name, param.name)


def test_every_registered_algorithm_has_exactly_one_family():
    for name in algorithm_names():
        assert len(families_of(name)) == 1, (name, [f.name for f in families_of(name)])
    assert {name: family_of(name).name for name in algorithm_names()} == {
        "default": "ULDP-FL",
        "uldp-naive": "ULDP-FL",
        "uldp-group": "ULDP-FL",
        "uldp-avg": "ULDP-FL",
        "uldp-avg-w": "ULDP-FL",
        "uldp-sgd": "ULDP-FL",
        "uldp-sgd-w": "ULDP-FL",
        "rpdp": "rPDP-FL",
        "unidp": "rPDP-FL",
        "dp-fedavg-robust": "dropouts",
        "userldp": "subject-level",
        "localgroupdp": "subject-level",
        "higradavgdp": "subject-level",
        "localitemdp": "subject-level",
    }


@pytest.fixture
def plug_in():
    """An algorithm registered after the CLI was imported (a plug-in's), of no special kind."""
    spec = register(AlgorithmSpec(name="plug-in", help="A test's plug-in.", build=lambda c, s, t: FedAvg()))
    yield spec
    unregister(spec.name)


def test_an_algorithm_registered_later_has_a_family(plug_in):
    assert family_of(plug_in.name).name == "ULDP-FL"


def test_the_command_function_stays_short():
    lines = inspect.getsource(COMMAND.callback).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def "))
    body = lines[start + 1 :]
    assert len(body) < 150, f"uldp train's command function has {len(body)} lines"


def test_a_family_heading_holds_only_options_no_other_familys_algorithm_reads():
    # An option that algorithms of two families read (--local-steps, --group-k, --secure) sits
    # under a common heading, never under one family's: the heading must not mislead.
    from uldp.cli.commands.train.checks import ALGORITHM_OPTIONS
    from uldp.trainers.algorithms import get_algorithm

    checked = 0
    for family in FAMILIES.values():
        for param in family.options.params:
            field = ALGORITHM_OPTIONS.get(param.name)
            if field is None:
                continue
            readers = [name for name in algorithm_names() if field in get_algorithm(name).options]
            strangers = [name for name in readers if family_of(name) is not family]
            assert not strangers, f"--{param.name} is under {family.heading!r} but {strangers} read it"
            checked += 1
    assert checked >= 8  # the dropout options, --silo-q, --local-batch-size, --epsilon at least


@pytest.mark.parametrize("family_name", list(FAMILIES))
def test_a_family_renders_a_run_that_reports_none_of_its_own_figures(family_name):
    # A plug-in claimed by a family (observed, subject level...) may report only the user-level
    # epsilon: the family then shows that, rather than failing after the whole run.
    family = FAMILIES[family_name]
    summary = {"algo": "plug-in", "epsilon": 1.5, "server_epsilon": 2.5, "rounds": 2, "silos": 3}
    rows = [
        {"round": 1, "epsilon": 1.0, "server_epsilon": 2.0},
        {"round": 2, "epsilon": 1.5, "server_epsilon": 2.5},
    ]
    columns, shown = family.columns(summary, rows, "table")
    assert ("epsilon", "epsilon (model)") in columns and ("server_epsilon", "epsilon (server)") in columns
    assert shown == rows
    assert all("epsilon (model)" in note for note in family.notes(summary, rows))
