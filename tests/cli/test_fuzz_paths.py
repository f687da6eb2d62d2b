"""Hostile paths for every file option of every command (issue 32, items 1, 3 and 4).

A file name over 255 bytes (ENAMETOOLONG), a folder that does not exist, a path through a regular
file (ENOTDIR) and a symlink loop: each is one `Error:` line naming the option, exit status 2
(tests/cli/fuzz.py's contract). Before, a name too long was "internal error", exit 1, for
--plot of every command and for --checkpoint.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from uldp.cli.main import SUBCOMMANDS, cli

from .fuzz import assert_contract, run
from .fuzz_options import CHEAP_BENCH, FEW_ORDERS

ACCOUNT = ["account", "--sigma", "1", "--q", "0.01", "--steps", "10", "--k", "1,2", *FEW_ORDERS]
CALIBRATE = ["calibrate", "--epsilon", "3", "--q", "0.01", "--steps", "10", *FEW_ORDERS]
DROPOUT = ["dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0.1", "--silos-per-round", "50"]
DROPOUT += ["--rounds", "10", "--no-paper", *FEW_ORDERS]
SUBJECT = ["subject", "--sigma", "1", "--silos", "2", "--silos-per-round", "1", "--rounds", "2"]
SUBJECT += ["--local-steps", "2", "--record-q", "0.1"]
PERSONALIZE = ["personalize", "--sigma", "1", "--rounds", "3", "--local-steps", "2", "--records", "10"]
REPORT = ["report", "--sigma", "1", "--q", "0.01", "--steps", "10", "--accountant", "rdp", *FEW_ORDERS]
AUDIT = ["audit", "--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "1", "--users", "8"]
TRAIN = ["train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "1", "--users", "8"]
ROBUST = ["train", "--algo", "dp-fedavg-robust", "--dataset", "heart-disease", "--rounds", "1"]
RPDP = ["train", "--algo", "rpdp", "--dataset", "heart-disease", "--rounds", "1", "--local-steps", "2"]

#: (command line, option): every option naming a file or folder, written or read.
FILE_OPTIONS = [
    *[(base, "--plot") for base in (ACCOUNT, CALIBRATE, DROPOUT, SUBJECT, PERSONALIZE, REPORT, AUDIT, TRAIN)],
    *[
        (base, "--config")
        for base in (ACCOUNT, CALIBRATE, DROPOUT, SUBJECT, PERSONALIZE, REPORT, AUDIT, TRAIN)
    ],
    (PERSONALIZE, "--out"),
    (REPORT, "--out"),
    (AUDIT, "--out"),
    (TRAIN, "--metrics"),
    (TRAIN, "--checkpoint"),
    (TRAIN, "--tensorboard"),
    (TRAIN, "--user-budgets"),
    (ROBUST, "--dropout-schedule"),
    (RPDP, "--epsilon-csv"),
    (["personalize", "--sigma", "1", "--rounds", "3", "--local-steps", "2"], "--epsilon-csv"),
    (SUBJECT, "--holdings"),
    (["report"], "--run"),
    (["report"], "--opacus"),
    (["train", "--algo", "uldp-avg", "--user-column", "u", "--label-column", "y"], "--data-path"),
    (["audit", "--algo", "uldp-avg", "--user-column", "u", "--label-column", "y"], "--data-path"),
    (CHEAP_BENCH, "--plot"),
    (CHEAP_BENCH, "--config"),
]

LONG = "a" * 300  # over NAME_MAX (255) on every common file system


def _hostile(tmp_path: Path, kind: str) -> str:
    if kind == "name too long":
        return str(tmp_path / f"{LONG}.png")
    if kind == "folder name too long":
        return str(tmp_path / LONG / "out.png")
    if kind == "missing folder":
        return str(tmp_path / "no-such-folder" / "out.png")
    if kind == "through a file":
        (tmp_path / "file.txt").write_text("x")
        return str(tmp_path / "file.txt" / "out.png")
    if kind == "symlink loop":
        (tmp_path / "loop.png").symlink_to("loop.png")
        return str(tmp_path / "loop.png")
    raise AssertionError(kind)


KINDS = ["name too long", "folder name too long", "missing folder", "through a file", "symlink loop"]
#: Where a kind is no error: --checkpoint DIR and --tensorboard DIR make their missing folders
#: (`mkdir -p`).
VALID = {("--checkpoint", "missing folder"), ("--tensorboard", "missing folder")}
#: Other names an option's messages use for it: --data-path's older spelling.
SPELLINGS = {"--data-path": ("--data-path", "--path")}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("base", "option"), FILE_OPTIONS, ids=[f"{base[0]}-{option}" for base, option in FILE_OPTIONS]
)
def test_a_hostile_path_is_one_line_naming_the_option(
    tmp_path: Path, base: list[str], option: str, kind: str
) -> None:
    if (option, kind) in VALID:
        pytest.skip(f"{option} takes a {kind}")
    args = [*base, option, _hostile(tmp_path, kind)]
    result = run(*args)
    assert_contract(result, args)
    assert result.exit_code == 2, result.output
    assert any(name in result.stderr for name in SPELLINGS.get(option, (option,))), result.stderr


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    out = []
    for name in SUBCOMMANDS:
        command = cli.get_command(ctx, name)
        if isinstance(command, click.Group):
            out += [(f"{name} {sub}", each) for sub, each in command.commands.items()]
        elif command is not None:
            out.append((name, command))
    return out


def test_every_file_option_of_every_command_is_fuzzed_here() -> None:
    """A new option naming a file cannot ship without its hostile paths."""
    fuzzed = {
        (" ".join(w for w in base[:2] if not w.startswith("-")), option) for base, option in FILE_OPTIONS
    }
    missing = [
        (name, param.opts[0])
        for name, command in _commands()
        for param in command.params
        if isinstance(param.type, click.Path) and (name, param.opts[0]) not in fuzzed
    ]
    assert not missing, f"file options without hostile-path cases: {missing}"
