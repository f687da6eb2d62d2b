"""Issue 32, items 4, 5 and 7: bad input is one `Error:` line and exit status 2 (never "internal
error"), the tables keep their promises, and an option that changes nothing is refused.

Each test here failed on the code before the fix; the command lines are cheap (accounting at a
few orders, heart-disease for the two training runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
import yaml

from tests.cli.fuzz import assert_contract, run
from tests.cli.fuzz_options import FEW_ORDERS, command_named
from uldp.accountants.subject.holdings import read_holdings
from uldp.cli.config import read_config
from uldp.cli.main import SUBCOMMANDS
from uldp.cli.options import PositiveInt, integral
from uldp.errors import DataError
from uldp.trainers.budget_sources import user_budgets
from uldp.trainers.dropouts import read_schedule

MECHANISM = ["--sigma", "1", "--q", "0.01", "--steps", "10", *FEW_ORDERS]


def _one_error(args: list[str], *needles: str) -> str:
    """The one `Error:` line of `uldp ARGS`, which must exit 2 and contain every needle."""
    result = run(*args)
    assert_contract(result, args)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    for needle in needles:
        assert needle in line, line
    return line


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return str(path)


# --- item 4: config values that bypassed Click's types ---------------------------------------


@pytest.mark.parametrize(
    ("args", "text", "needles"),
    [
        (
            ["account", "--q", "0.01", "--steps", "10"],
            "sigma: null\n",
            ("'sigma'", "null", "leave the key out"),
        ),
        (["account", *MECHANISM], "k: []\n", ("'k'", "an empty list")),
        (["calibrate", "--epsilon", "3", "--q", "0.01"], "steps: null\n", ("'steps'", "null")),
        (["calibrate", "--epsilon", "3", "--q", "0.01", "--steps", "10"], "k: []\n", ("'k'", "list")),
        (
            ["train", "--dataset", "heart-disease", "--rounds", "1"],
            "secure: 2\n",
            ("'secure'", "true or false"),
        ),
        (["account", "--q", "0.01", "--steps", "10"], f"sigma: {10**400}\n", ("'sigma'", "is not a number")),
    ],
)
def test_config_values_of_the_wrong_type_are_one_line(tmp_path, args, text, needles) -> None:
    _one_error([*args, "--config", _config(tmp_path, text)], "--config", *needles)


#: YAML values of every wrong shape: what a config file can hold that no command line can give.
HOSTILE_YAML = (None, [], {}, [None], [[1]], True, 2, -1, "abc", "", 10**400, 1.5, float("nan"), [1, "x"])


def _configurable(command: click.Command) -> list[click.Parameter]:
    return [p for p in command.params if not p.is_eager and p.name is not None and p.name != "config"]


def _commands() -> list[tuple[str, click.Command]]:
    found = []
    for name in SUBCOMMANDS:
        command = command_named(name)
        if isinstance(command, click.Group):
            found += [
                (f"{name} {sub}", command_named(name, sub))
                for sub in command.list_commands(click.Context(command))
            ]
        else:
            found.append((name, command))
    return found


@pytest.mark.parametrize(("name", "command"), _commands(), ids=[n for n, _ in _commands()])
def test_every_config_key_refuses_or_converts_every_yaml_value(tmp_path, name, command) -> None:
    """The fuzz of item 4: each key of each command, each value of HOSTILE_YAML. read_config either
    refuses it (click.BadParameter naming the key: the CLI's one line, exit 2) or keeps a value its
    option's type converts to something other than nothing, i.e. what a command line could give."""
    config_param = next(p for p in command.params if p.name == "config")
    path = tmp_path / "c.yaml"
    for param in _configurable(command):
        key = param.opts[0].lstrip("-") if param.opts else str(param.name)
        for value in HOSTILE_YAML:
            path.write_text(yaml.safe_dump({key: value}))
            ctx = click.Context(command)
            try:
                values = read_config(path, ctx, config_param)
            except click.BadParameter as error:
                assert repr(key) in error.message, (name, key, value, error.message)
                assert "\n" not in error.message.strip(), (name, key, value)
                continue
            assert value not in (None, [], {}), f"{name}: key {key!r} accepted {value!r}"
            converted = param.type_cast_value(ctx, values[param.name])
            assert converted is not None and converted != (), (name, key, value)


def test_the_config_fuzz_reaches_the_commands_of_the_issue() -> None:
    names = [n for n, _ in _commands()]
    assert {"account", "calibrate", "train", "report", "dropout", "subject", "personalize"} <= set(names)


def test_personalize_refuses_one_column_for_ids_and_budgets(tmp_path) -> None:
    budgets = tmp_path / "b.csv"
    budgets.write_text("id,epsilon\n1,2\n2,3\n")
    base = [
        "personalize",
        "--epsilon-csv",
        str(budgets),
        "--sigma",
        "1.2",
        "--local-steps",
        "10",
        "--rounds",
        "5",
    ]
    _one_error([*base, "--epsilon-column", "id", "--id-column", "id"], "--id-column", "'id'", "a column each")
    # Without --id-column the default id column is the budget column: records are numbered instead.
    result = run(*base, "--epsilon-column", "id", "--format", "json")
    assert result.exit_code == 0, result.output


# --- item 5: the tables keep their promises ---------------------------------------------------

SUBJECT = ["subject", "--silos", "4", "--silos-per-round", "2", "--rounds", "10", "--local-steps", "2"]
SUBJECT += ["--record-q", "0.01", "--sigma", "1"]


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("subject,member,subject\na,1,b\n", ("column 'subject' appears 2 times",)),
        ("subject,member\na,0\na,100\n", ("data row 2", "member 100", "0..3")),
        ("subject,member\na,-1\n", ("data row 1", "member -1", "0..3")),
        ("subject,member\na,s1\nb,s2\nc,s3\nd,s4\ne,s5\n", ("names 5 members", "--silos 4")),
    ],
)
def test_holdings_refuse_repeated_columns_and_members_outside_the_federation(tmp_path, text, needles) -> None:
    path = tmp_path / "h.csv"
    path.write_text(text)
    _one_error([*SUBJECT, "--holdings", str(path)], "--holdings", *needles)


def test_holdings_inside_the_federation_are_read(tmp_path) -> None:
    path = tmp_path / "h.csv"
    path.write_text("subject,member\na,0\na,3\na,3\nb,shop\n")
    assert read_holdings(path, 4) == {"a": [2, 1], "b": [1]}
    assert run(*SUBJECT, "--holdings", str(path)).exit_code == 0


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("user,epsilon,epsilon\n0,1,9\n1,1,9\n", ("column 'epsilon' appears 2 times",)),
        ("user,epsilon\n0,1\n1,1\n0,50\n", ("user 0 is listed twice", "lines 2 and 4")),
    ],
)
def test_user_budgets_refuse_repeated_columns_and_users(tmp_path, text, needles) -> None:
    path = tmp_path / "u.csv"
    path.write_text(text)
    with pytest.raises(DataError) as caught:
        user_budgets(2, str(path), 0)
    assert all(needle in str(caught.value) for needle in needles), str(caught.value)


def test_train_refuses_a_user_listed_twice_in_one_line(tmp_path) -> None:
    path = tmp_path / "u.csv"
    path.write_text("user,epsilon\n" + "".join(f"{u},1\n" for u in range(8)) + "3,100\n")
    args = ["train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--users", "8", "--rounds", "1"]
    _one_error(
        [*args, "--user-budgets", str(path)], "--user-budgets", "user 3 is listed twice", "lines 5 and 10"
    )


def test_a_dropout_schedule_with_a_byte_order_mark_is_read(tmp_path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("round,participant,at\n1,0,upload\n2,1,calibration\n", encoding="utf-8-sig")
    schedule = read_schedule(path, 4, rounds=2)
    assert schedule.drops == {(1, 0): 1, (2, 1): 2}


@pytest.mark.parametrize("cell", ["²", "1.0", "-1", "0"])
def test_a_dropout_schedule_round_that_is_not_a_round_is_a_data_error(tmp_path, cell) -> None:
    path = tmp_path / "s.csv"
    path.write_text(f"round,participant,at\n{cell},0,upload\n")
    with pytest.raises(DataError, match="line 2: round must be an integer >= 1"):
        read_schedule(path, 4, rounds=2)


def test_a_dropout_schedule_row_past_the_last_round_is_refused(tmp_path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("round,participant,at\n1,0,upload\n3,1,upload\n")
    with pytest.raises(DataError, match="line 3: round 3 is past the run's last round, 2"):
        read_schedule(path, 4, rounds=2)
    args = ["train", "--algo", "dp-fedavg-robust", "--dataset", "heart-disease", "--users", "40"]
    _one_error(
        [*args, "--rounds", "2", "--dropout-schedule", str(path)], "--dropout-schedule", "line 3", "round 3"
    )


def test_resume_on_a_folder_without_a_checkpoint_is_refused(tmp_path) -> None:
    empty = tmp_path / "ck"
    empty.mkdir()
    args = ["train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "1"]
    args += ["--checkpoint", str(empty), "--resume"]
    _one_error(args, "--resume", "holds no checkpoint", "drop --resume")
    assert not any(empty.iterdir())  # nothing was trained, nothing written


# --- item 7: options that change nothing, and numbers people write -----------------------------


@pytest.mark.parametrize("flag", [("--conversion", "classic"), ("--orders", "2,3")])
@pytest.mark.parametrize(
    "line",
    [
        "account --sigma 1 --q 0.01 --steps 10 --accountant pld",
        "account --sigma 1 --q 0.01 --steps 10 --accountant pld --k 2 --group-method pld",
        "calibrate --epsilon 3 --q 0.01 --steps 10 --accountant pld",
        "report --sigma 1 --q 0.01 --steps 10 --accountant pld",
        "dropout --sigma 1 --silo-q 0.01 --dropout 0.1 --rounds 10 --accountant pld",
    ],
)
def test_rdp_options_without_an_rdp_bound_are_refused(line, flag) -> None:
    _one_error([*line.split(), *flag], f"'{flag[0]}'", "only RDP bounds read it")


def test_rdp_options_are_taken_where_an_rdp_bound_reads_them(tmp_path) -> None:
    # The RDP accountant, or a group bound by Lemma 6 next to PLD, reads them; defaults never count.
    assert run("account", *MECHANISM, "--accountant", "pld,rdp", "--conversion", "classic").exit_code == 0
    plain = "account --sigma 1 --q 0.01 --steps 10 --accountant pld".split()
    assert run(*plain, "--k", "2", *FEW_ORDERS).exit_code == 0
    assert run(*plain).exit_code == 0
    # A --config value is the user's too.
    config = _config(tmp_path, "conversion: classic\n")
    calibrate = "calibrate --epsilon 3 --q 0.01 --steps 10 --accountant pld".split()
    _one_error([*calibrate, "--config", config], "'--conversion'")


def test_report_epochs_refuses_subnormals() -> None:
    base = "report --sigma 1.1 --dataset-size 60000 --batch-size 256 --accountant rdp".split()
    _one_error([*base, "--epochs", "5e-324"], "'--epochs'", "too small")
    assert run(*base, "--epochs", "1e-300").exit_code == 0  # tiny but a number: one step, as TF-Privacy


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("1e9", 10**9),
        ("2.5e3", 2500),
        ("1E5", 100000),
        ("100", 100),
        ("4.0", 4),
        ("1.5", None),
        ("1e400", 10**30),
        ("nan", None),
        ("inf", None),
        ("0x10", None),
        ("1e-3", None),
        ("1e999999999", 10**30),
    ],
)
def test_integers_may_be_written_in_exponent_form(text, number) -> None:
    assert integral(text) == number


def test_steps_in_exponent_form_account_as_the_integer() -> None:
    plain = json.loads(
        run("account", *MECHANISM[:4], "--steps", "100000", *FEW_ORDERS, "--format", "json").stdout
    )
    written = json.loads(
        run("account", *MECHANISM[:4], "--steps", "1e5", *FEW_ORDERS, "--format", "json").stdout
    )
    assert written["results"] == plain["results"]
    _one_error(["account", *MECHANISM[:4], "--steps", "1.5e0"], "'--steps'", "not an integer")
    _one_error(["account", *MECHANISM[:4], "--steps", "1e400"], "'--steps'", "above the largest")
    assert PositiveInt().convert("1e9", None, None) == 10**9


def test_an_epsilon_of_zero_at_a_large_delta_is_explained() -> None:
    """--delta 0.5: every accountant's epsilon is 0 (PRV's was -0.68, printed as is); each command
    says what that means."""
    base = ["--sigma", "5", "--q", "0.01", "--steps", "100", *FEW_ORDERS, "--delta", "0.5"]
    account = json.loads(run("account", *base, "--accountant", "rdp,pld,prv", "--format", "json").stdout)
    assert [r["epsilon"] for r in account["results"]] == [0.0, 0.0, 0.0]
    assert all(r["note"] for r in account["results"])
    table = run("account", *base[:6], "--delta", "0.5", "--accountant", "pld").stdout
    assert "epsilon 0 at delta 0.5" in table
    report = json.loads(run("report", *base, "--accountant", "rdp", "--format", "json").stdout)
    assert any("epsilon 0 at delta 0.5" in c for c in report["caveats"])
    dropout = json.loads(
        run(
            "dropout",
            "--sigma",
            "5",
            "--user-q",
            "0.01",
            "--dropout",
            "0",
            "--rounds",
            "10",
            "--delta",
            "0.5",
            "--format",
            "json",
        ).stdout
    )
    assert any("epsilon 0 at delta 0.5" in n for n in dropout["notes"])
    # At a usual delta no such note.
    usual = json.loads(run("account", *base[:-2], "--format", "json").stdout)
    assert not any(r["note"] for r in usual["results"])
