"""docs/cli.md's option vocabulary against the commands: every --help option is in the table
for that command, every table row is true, and every old spelling works, warns once, and is
hidden from --help (issue 11, point 6)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from uldp.cli.aliases import aliases_of
from uldp.cli.main import cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
COMMANDS = (
    "account",
    "calibrate",
    "personalize",
    "dropout",
    "subject",
    "report",
    "train",
    "audit",
    "bench protocol",
)


def _vocabulary() -> list[dict[str, Any]]:
    """The table's rows: options (one parameter's spellings), commands, {command: old spellings}."""
    rows = []
    # Only "## The vocabulary" holds it; other sections have tables of their own (Files: caps).
    section = DOC.read_text(encoding="utf-8").split("\n## The vocabulary\n", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        if not line.startswith("| `--"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        assert len(cells) == 5, line
        old: dict[str, set[str]] = {}
        for entry in filter(None, (e.strip() for e in cells[4].split(";"))):
            command, spellings = entry.split(":")
            old.setdefault(command.strip(), set()).update(re.findall(r"`(--[\w-]+)`", spellings))
        rows.append(
            {
                "options": tuple(re.findall(r"`(--[\w-]+)`", cells[0])),
                "commands": {c.strip() for c in cells[3].split(",")},
                "old": old,
            }
        )
    return rows


VOCABULARY = _vocabulary()


def _command(name: str) -> click.Command:
    ctx = click.Context(cli)
    words = name.split()
    command = cli.get_command(ctx, words[0])
    for word in words[1:]:
        assert isinstance(command, click.Group)
        command = command.get_command(ctx, word)
    assert command is not None, name
    return command


def _options(command: click.Command) -> dict[tuple[str, ...], click.Parameter]:
    """Each visible option's long spellings (as --help lists them) -> the parameter."""
    return {
        tuple(o for o in (*p.opts, *p.secondary_opts) if o.startswith("--")): p
        for p in command.params
        if isinstance(p, click.Option) and not p.hidden
    }


def _help(name: str) -> str:
    result = CliRunner().invoke(cli, [*name.split(), "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_table_is_there_and_covers_the_renamed_concepts() -> None:
    names = {option for row in VOCABULARY for option in row["options"]}
    assert {"--sigma", "--epsilon", "--user-q", "--silo-q", "--record-q", "--local-steps"} <= names
    assert len(names) == sum(len(row["options"]) for row in VOCABULARY), "an option listed twice"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_in_help_is_in_the_vocabulary_for_that_command(name: str) -> None:
    text = _help(name)
    listed = {row["options"]: row["commands"] for row in VOCABULARY}
    for spellings in _options(_command(name)):
        if spellings == ("--help",):
            continue
        assert spellings in listed, f"uldp {name}: {', '.join(spellings)} is not in docs/cli.md"
        assert name in listed[spellings], f"docs/cli.md does not list uldp {name} for {spellings[0]}"
        # --help shows it under that name.
        assert re.search(rf"^  {re.escape(spellings[0])}\b", text, re.M), (name, spellings)


@pytest.mark.parametrize("row", VOCABULARY, ids=lambda row: row["options"][0])
def test_every_row_of_the_vocabulary_is_true(row: dict[str, Any]) -> None:
    for name in row["commands"]:
        assert name in COMMANDS, f"{row['options'][0]}: unknown command {name!r}"
        options = _options(_command(name))
        assert row["options"] in options, f"uldp {name} has no {', '.join(row['options'])}"
        documented = row["old"].get(name, set())
        assert set(aliases_of(options[row["options"]])) == documented, (name, row["options"])
    assert set(row["old"]) <= row["commands"]


def _aliases() -> list[tuple[str, str, str]]:
    """(command, old spelling, new spelling) for every hidden alias of every command."""
    found = []
    for name in COMMANDS:
        for spellings, param in _options(_command(name)).items():
            found.extend((name, old, spellings[0]) for old in aliases_of(param))
    return found


def test_the_renamed_options_have_their_old_spellings() -> None:
    assert {(c, old, new) for c, old, new in _aliases()} >= {
        ("dropout", "--z", "--sigma"),
        ("dropout", "--budget", "--epsilon"),
        ("dropout", "--q", "--user-q"),
        ("personalize", "--tau", "--local-steps"),
        ("personalize", "--client-rate", "--silo-q"),
        ("personalize", "--budgets", "--epsilon-csv"),
        ("personalize", "--budget-column", "--epsilon-column"),
        ("subject", "--q", "--record-q"),
        ("subject", "--group-sizes", "--k"),
    }


@pytest.mark.parametrize("name", sorted({c for c, _, _ in _aliases()}))
def test_old_spellings_are_hidden_from_help(name: str) -> None:
    text = _help(name)
    for command, old, _ in _aliases():
        if command == name:
            assert not re.search(rf"^  {re.escape(old)}\b", text, re.M), f"{old} shown by uldp {name} --help"


# A valid run of each command with aliases, in the current spellings; the value the alias test
# gives under the old spelling is the one here.
RUNS: dict[str, dict[str, str]] = {
    "dropout": {
        "--sigma": "1",
        "--user-q": "0.01",
        "--dropout": "0.1",
        "--rounds": "10",
        "--epsilon": "2",
        "--participants": "50",
    },
    "personalize": {
        "--epsilon-csv": "budgets.csv",
        "--epsilon-column": "eps",
        "--sigma": "1.2",
        "--local-steps": "10",
        "--rounds": "5",
        "--silo-q": "0.5",
    },
    "train": {
        "--algo": "rpdp",
        "--data-path": "table.csv",
        "--user-column": "patient",
        "--label-column": "y",
        "--epsilon-csv": "records.csv",
        "--epsilon-column": "eps",
        "--rounds": "1",
        "--local-steps": "2",
        "--noise-seed": "1",
    },
    "subject": {
        "--members": "4",
        "--per-round": "4",
        "--rounds": "5",
        "--local-steps": "2",
        "--record-q": "0.01",
        "--sigma": "1",
        "--epsilon": "4",
        "--k": "1,2",
    },
}


def _invoke(args: list[str], cwd: Path):
    """`uldp ARGS`, with the files RUNS names written into `cwd`: a budgets file (personalize),
    a table of 40 records and their budgets by record number (train)."""
    files = {
        "budgets.csv": "id,eps\na,0.5\nb,1\nc,2\n",
        "table.csv": "patient,a,y\n" + "".join(f"{i % 8},{i / 10},{i % 2}\n" for i in range(40)),
        "records.csv": "id,eps\n" + "".join(f"{i},{1 + i % 2}\n" for i in range(1, 41)),
    }
    for name, text in files.items():
        (cwd / name).write_text(text, encoding="utf-8")
    return CliRunner().invoke(cli, [str(cwd / arg) if arg in files else arg for arg in args])


def _run(name: str, options: dict[str, str], cwd: Path) -> tuple[Any, str]:
    args = [*name.split(), *(w for pair in options.items() for w in pair), "--format", "json"]
    result = _invoke(args, cwd)
    assert result.exit_code == 0, result.output
    return _timeless(json.loads(result.stdout)), result.stderr


def _timeless(document: Any) -> Any:
    """The JSON document without its wall-clock timings, which differ from run to run."""
    if isinstance(document, dict):
        return {k: _timeless(v) for k, v in document.items() if "seconds" not in k and k != "elapsed_s"}
    if isinstance(document, list):
        return [_timeless(v) for v in document]
    return document


@pytest.mark.parametrize("case", _aliases(), ids=lambda case: f"{case[0]} {case[1]}")
def test_an_old_spelling_works_the_same_and_warns_once(case: tuple[str, str, str], tmp_path: Path) -> None:
    name, old, new = case
    options = RUNS[name]
    assert new in options, f"add a value for {new} to RUNS[{name!r}]"
    expected, quiet = _run(name, options, tmp_path)
    assert quiet == ""
    renamed = {(old if key == new else key): value for key, value in options.items()}
    got, warning = _run(name, renamed, tmp_path)
    assert got == expected
    assert warning.splitlines() == [
        f"Warning: {old} is an old spelling of {new}; it still works, but use {new}."
    ]


@pytest.mark.parametrize("case", _aliases(), ids=lambda case: f"{case[0]} {case[1]}")
def test_an_old_spelling_works_as_a_config_key_and_warns(case: tuple[str, str, str], tmp_path: Path) -> None:
    name, old, new = case
    options = RUNS[name]
    expected, _ = _run(name, options, tmp_path)
    config = tmp_path / "plan.yaml"
    value = str(tmp_path / options[new]) if options[new].endswith(".csv") else options[new]
    config.write_text(f"{old.lstrip('-')}: '{value}'\n", encoding="utf-8")
    rest = {key: value for key, value in options.items() if key != new}
    got, warning = _run(name, {**rest, "--config": str(config)}, tmp_path)
    assert got == expected
    assert warning.splitlines() == [
        f"Warning: {config}: key {old.lstrip('-')!r} is an old spelling of {new.lstrip('-')!r}; "
        f"it still works, but use {new.lstrip('-')!r}."
    ]


@pytest.mark.parametrize("case", _aliases(), ids=lambda case: f"{case[0]} {case[1]}")
def test_an_option_and_its_old_spelling_together_are_refused(
    case: tuple[str, str, str], tmp_path: Path
) -> None:
    name, old, new = case
    value = RUNS[name][new]
    args = [*name.split(), *(w for pair in RUNS[name].items() for w in pair), old, value]
    result = _invoke(args, tmp_path)
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == f"Error: give {old} or {new}, not both (the same option)"


def _type_name(name: str, option: str) -> str:
    command = cli.get_command(click.Context(cli), name.split()[0])
    assert command is not None
    param = next(p for p in command.params if option in p.opts)
    return str(param.type.name)


@pytest.mark.parametrize(
    "case",
    [case for case in _aliases() if _type_name(case[0], case[2]) in {"float", "integer"}],
    ids=lambda case: f"{case[0]} {case[1]}",
)
def test_an_old_spelling_with_a_refused_value_gets_one_error_line_naming_it(
    case: tuple[str, str, str], tmp_path: Path
) -> None:
    # The warning comes only once the value is accepted, so a fuzzer sees exactly one line.
    name, old, new = case
    args = [*name.split(), *(w for pair in RUNS[name].items() if pair[0] != new for w in pair), old, "-1"]
    result = _invoke(args, tmp_path)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith(f"Error: Invalid value for '{old}' (old spelling of '{new}')")
