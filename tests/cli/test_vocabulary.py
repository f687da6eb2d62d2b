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


def _walk(group: click.Group, prefix: str = "") -> list[str]:
    """Every command of the CLI, bench's subcommands included, as `uldp NAME --help` names it."""
    ctx = click.Context(group)
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found += _walk(command, f"{prefix}{name} ")
        elif command is not None:
            found.append(f"{prefix}{name}")
    return found


def test_every_command_is_walked() -> None:
    # A new command (or bench subcommand) must join COMMANDS, so that its options are checked.
    assert sorted(_walk(cli)) == sorted(COMMANDS)


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
        ("dropout", "--q", "--silo-q"),
        ("dropout", "--user-q", "--silo-q"),
        ("dropout", "--participants", "--silos-per-round"),
        ("subject", "--members", "--silos"),
        ("subject", "--per-round", "--silos-per-round"),
        ("subject", "--subject-members", "--subject-silos"),
        ("subject", "--items-per-member", "--items-per-silo"),
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
        "--silo-q": "0.01",
        "--dropout": "0.1",
        "--rounds": "10",
        "--epsilon": "2",
        "--silos-per-round": "50",
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
        "--silos": "4",
        "--silos-per-round": "4",
        "--subject-silos": "3",
        "--items-per-silo": "2",
        "--rounds": "5",
        "--local-steps": "2",
        "--record-q": "0.01",
        "--sigma": "1",
    },
}
# Options only some aliases' runs need (subject's --k needs --epsilon, which searches: ~1 s).
NEEDS: dict[tuple[str, str], dict[str, str]] = {("subject", "--k"): {"--epsilon": "4", "--k": "1,2"}}


def _run_options(name: str, new: str) -> dict[str, str]:
    return {**RUNS[name], **NEEDS.get((name, new), {})}


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


_EXPECTED: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[Any, str]] = {}


def _expected(name: str, options: dict[str, str], cwd: Path) -> tuple[Any, str]:
    """`_run` in the current spellings, once per command and options when no input file (whose
    path differs per test) is involved: each alias of a command compares with the same run."""
    if any(value.endswith(".csv") for value in options.values()):
        return _run(name, options, cwd)
    key = (name, tuple(options.items()))
    if key not in _EXPECTED:
        _EXPECTED[key] = _run(name, options, cwd)
    return _EXPECTED[key]


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
    options = _run_options(name, new)
    assert new in options, f"add a value for {new} to RUNS[{name!r}]"
    expected, quiet = _expected(name, options, tmp_path)
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
    options = _run_options(name, new)
    expected, _ = _expected(name, options, tmp_path)
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
    options = _run_options(name, new)
    args = [*name.split(), *(w for pair in options.items() for w in pair), old, options[new]]
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
    options = _run_options(name, new)
    args = [*name.split(), *(w for pair in options.items() if pair[0] != new for w in pair), old, "-1"]
    result = _invoke(args, tmp_path)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith(f"Error: Invalid value for '{old}' (old spelling of '{new}')")


# Spellings of one concept (docs/cli.md, Rules): across all commands at most one of each set may
# be visible in --help; the others live on only as hidden aliases (issue 34, item 3).
SYNONYMS = (
    ("--silos", "--members", "--participants-total"),
    ("--silos-per-round", "--per-round", "--participants"),
    ("--subject-silos", "--subject-members"),
    ("--items-per-silo", "--items-per-member"),
    ("--silo-q", "--client-rate", "--lambda"),
    ("--sigma", "--z", "--noise-multiplier"),
    ("--epsilon", "--budget", "--target-epsilon"),
    ("--epsilon-csv", "--budgets"),
    ("--epsilon-column", "--budget-column"),
    ("--local-steps", "--tau"),
    ("--k", "--group-sizes"),
    ("--epochs", "--num-epochs"),
    ("--dataset-size", "--n", "--number-of-examples"),
)


def _visible() -> dict[str, set[str]]:
    """Every visible long option -> the commands that show it."""
    shown: dict[str, set[str]] = {}
    for name in COMMANDS:
        for spellings in _options(_command(name)):
            for spelling in spellings:
                shown.setdefault(spelling, set()).add(name)
    return shown


@pytest.mark.parametrize("names", SYNONYMS, ids=lambda names: names[0])
def test_a_concept_has_one_visible_name_across_commands(names: tuple[str, ...]) -> None:
    shown = _visible()
    visible = [name for name in names if name in shown]
    assert visible == [names[0]], f"{names[0]} is also shown as {visible}: {[shown[n] for n in visible]}"


def _option_help(name: str, option: str) -> str:
    param = _options(_command(name)).get((option,))
    assert param is not None, (name, option)
    return str(getattr(param, "help", "") or "").lower()


def test_each_sampling_rate_samples_one_party_everywhere() -> None:
    # --user-q samples users, --silo-q silos (Baek et al.'s participants included), --record-q
    # records: the same rate under two names, or one name for two parties, fails here.
    shown = _visible()
    for option, party, not_party in (
        ("--user-q", "user", ("silo", "participant")),
        ("--silo-q", "silo", ("user",)),
        ("--record-q", "record", ()),
    ):
        for name in shown[option]:
            text = _option_help(name, option)
            assert party in text, f"uldp {name} {option}: its help does not say it samples {party}s"
            for other in not_party:
                assert other not in text, f"uldp {name} {option} samples {other}s?"


def test_group_k_means_uldp_groups_k_in_every_command_that_has_it() -> None:
    # Trained with --group-k 8, accounted with --group-k 8 (the train check line says so), the
    # same numbers as the --k 8 that account took before; --k stays a stated group size.
    plan = ["--algo", "uldp-group", "--rounds", "10", "--silo-sizes", "100,100", "--batch-size", "10"]
    by_group_k = _json_of(["account", "--sigma", "5", *plan, "--group-k", "8"])
    assert by_group_k["results"] == _json_of(["account", "--sigma", "5", *plan, "--k", "8"])["results"]
    assert [r["k"] for r in by_group_k["results"]] == [8, 8]
    sigma = _json_of(["calibrate", "--epsilon", "4", *plan, "--group-k", "8"])["sigma"]
    assert sigma == _json_of(["calibrate", "--epsilon", "4", *plan, "--k", "8"])["sigma"]
    for name in ("account", "calibrate", "report", "train", "audit"):
        assert "records kept per user" in _option_help(name, "--group-k")
    import numpy as np

    from uldp.trainers.algorithms.base import TrainConfig
    from uldp.trainers.algorithms.group import UldpGroup

    trainer = UldpGroup(8, [np.ones(100, bool), np.ones(100, bool)])
    flags = trainer.account_flags(TrainConfig(algo="uldp-group", rounds=1, batch_size=10), 2)
    assert "--group-k 8" in " ".join(flags) and "--k " not in " ".join(flags)


def _json_of(args: list[str]) -> Any:
    result = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_no_help_text_names_an_old_spelling_as_current() -> None:
    # An old spelling that is no current option anywhere must not appear in any --help text
    # (train --help named --budgets for rpdp after it became --epsilon-csv).
    shown = _visible()
    old = {alias for _, alias, _ in _aliases()} - set(shown)
    for name in COMMANDS:
        text = _help(name)
        for spelling in old:
            assert not re.search(rf"{re.escape(spelling)}(?![\w-])", text), (
                f"uldp {name} --help names {spelling}"
            )


def test_dp_fedavg_robust_samples_silos_at_silo_q_and_keeps_user_q_working(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from uldp.cli.commands.train.dropouts import silo_rate

    command = _command("train")
    base = ["--algo", "dp-fedavg-robust", "--dataset", "mnist"]
    for args, warned in ((["--silo-q", "0.25"], False), (["--user-q", "0.25"], True)):
        with command.make_context("train", [*base, *args]) as ctx:
            options = dict(ctx.params)
            silo_rate(ctx, options)
        # The trainer reads the rate of whoever a round samples as TrainConfig.user_q.
        assert options["user_q"] == 0.25 and options["silo_q"] is None
        assert ("--user-q is an old spelling of --silo-q" in capsys.readouterr().err) == warned
    with command.make_context("train", [*base, "--user-q", "0.5", "--silo-q", "0.5"]) as ctx:
        with pytest.raises(click.UsageError, match="give --silo-q or --user-q, not both"):
            silo_rate(ctx, dict(ctx.params))


@pytest.mark.parametrize(
    ("config", "args", "rate", "warning"),
    [
        # The command line overrides the config file, as for every option (README).
        ("user_q: 0.5\n", ["--silo-q", "0.25"], 0.25, None),
        ("silo_q: 0.5\n", ["--user-q", "0.3"], 0.3, "Warning: --user-q is an old spelling of --silo-q"),
        # The file's old key alone still works, warned about by name as config.py words it.
        ("user_q: 0.5\n", [], 0.5, "key 'user_q' is an old spelling of 'silo-q'"),
        # Both spellings from the same place: refused.
        ("user_q: 0.5\nsilo_q: 0.4\n", [], None, "Error: give --silo-q or --user-q, not both"),
    ],
)
def test_dp_fedavg_robusts_silo_rate_from_a_config_file_and_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, args: list[str], rate, warning
) -> None:
    import importlib

    started: list[dict[str, Any]] = []

    def start(options: dict[str, Any]) -> None:  # stop after parsing and the checks: no training
        started.append(options)
        raise SystemExit(0)

    monkeypatch.setattr(importlib.import_module("uldp.cli.commands.train.command"), "start", start)
    path = tmp_path / "run.yaml"
    path.write_text(config, encoding="utf-8")
    argv = ["train", "--algo", "dp-fedavg-robust", "--dataset", "mnist", "--config", str(path), *args]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == (0 if rate is not None else 2), result.output
    assert (warning is None and result.stderr == "") or (warning is not None and warning in result.stderr)
    if rate is not None:
        # The trainer reads the rate of whoever a round samples as TrainConfig.user_q.
        assert started[0]["user_q"] == rate and started[0]["silo_q"] is None
        if warning and "key" in warning:
            assert result.stderr.startswith(f"Warning: {path}: key 'user_q'")
