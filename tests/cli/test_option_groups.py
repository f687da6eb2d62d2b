"""`uldp.cli.option_groups`: options listed under headings in `--help`, with Click alone."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from uldp.cli.option_groups import GroupedCommand, OptionGroup, grouped_command

INPUT = OptionGroup.of(
    "Input",
    click.option("--path", help="Where to read."),
    click.option("--old-path", hidden=True, help="An old spelling."),
)
OUTPUT = OptionGroup.of("Output", click.option("--a-much-longer-option-name", help="Where to write."))


@grouped_command("demo", INPUT, OUTPUT)
@click.option("--verbose", is_flag=True, help="Say more.")
def demo(**options):
    """A demo."""
    click.echo(repr(sorted(options.items())))


def test_groups_keep_their_options_in_order():
    assert [p.name for p in INPUT.params] == ["path", "old_path"]
    assert [p.name for p in demo.params] == ["path", "old_path", "a_much_longer_option_name", "verbose"]


def test_help_lists_each_group_under_its_heading_and_the_rest_last():
    lines = CliRunner().invoke(demo, ["--help"]).output.splitlines()
    headings = [line for line in lines if line.endswith(":") and not line.startswith(" ")]
    assert headings == ["Input:", "Output:", "Other options:"]
    text = "\n".join(lines)
    assert text.index("Input:") < text.index("--path") < text.index("Output:")
    assert text.index("Other options:") < text.index("--verbose") and "--help" in text
    assert "--old-path" not in text  # hidden stays hidden
    # One first column across the headings, as Click's single list has.
    starts = {line.index("Where") for line in lines if "Where to" in line} | {
        line.index("Say more") for line in lines if "Say more" in line
    }
    assert len(starts) == 1


def test_the_options_parse_as_usual():
    result = CliRunner().invoke(demo, ["--path", "p", "--verbose"])
    assert result.exit_code == 0, result.output
    assert "('path', 'p')" in result.output and "('verbose', True)" in result.output


def test_an_option_in_two_groups_or_not_in_the_command_is_refused():
    with pytest.raises(ValueError, match="more than one option group"):
        GroupedCommand("bad", params=list(INPUT.params), option_groups=[INPUT, INPUT])
    with pytest.raises(ValueError, match="does not have"):
        GroupedCommand("bad", params=[], option_groups=[OUTPUT])
