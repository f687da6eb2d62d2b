"""Each example of issue 12 for account, calibrate, dropout, subject and bench: one `Error:` line
naming the option and what is allowed, exit 2, at once (tests/cli/fuzz.py's contract)."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import click
import numpy as np
import pytest

from uldp.cli.main import cli

from .fuzz import assert_contract, run
from .fuzz_options import CHEAP_BENCH

BENCH = CHEAP_BENCH


def refused(*args: str, naming: str, saying: str = "", within: float = 5) -> str:
    """Run `uldp ARGS`, check the contract and the refusal (in `within` seconds), and return the
    Error line."""
    start = time.perf_counter()
    result = run(*args)
    assert_contract(result, args)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert naming in line and saying in line, line
    assert time.perf_counter() - start < within, "refused only after the work"
    return line


@pytest.mark.parametrize(
    "args",
    [
        ["account", "--sigma", "1e155", "--q", "0.01", "--steps", "1000"],
        ["account", "--sigma", "1e155", "--q", "0.01", "--steps", "1000", "--accountant", "pld,prv"],
        ["calibrate", "--epsilon", "3", "--q", "0.01", "--sigma", "1e155"],
        ["dropout", "--sigma", "1e155", "--silo-q", "0.01", "--dropout", "0.1", "--rounds", "10"],
        ["dropout", "--sigma", "1e-300", "--silo-q", "0.01", "--dropout", "0.1", "--rounds", "10"],
        [
            *["subject", "--silos", "4", "--silos-per-round", "2", "--rounds", "2", "--local-steps", "2"],
            *["--record-q", "0.01", "--sigma", "1e155"],
        ],
        ["account", "--sigma", "1e-300", "--q", "0.01", "--steps", "10"],
    ],
)
def test_a_sigma_beyond_the_range_is_refused_by_name(args: list[str]) -> None:
    refused(*args, naming="'--sigma'", saying="[1e-06, 1e+06]")


@pytest.mark.parametrize(
    "args, option",
    [
        (
            ["dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0.1", "--rounds", "10"],
            "--silos-per-round",
        ),
        (
            [
                "subject",
                "--silos-per-round",
                "2",
                "--rounds",
                "2",
                "--local-steps",
                "2",
                "--record-q",
                "0.01",
                "--sigma",
                "1",
            ],
            "--silos",
        ),
        (BENCH, "--n-max"),
    ],
)
def test_a_huge_integer_is_refused_by_name_with_the_largest_allowed(args: list[str], option: str) -> None:
    refused(
        *args, option, "99999999999999999999999999", naming=f"'{option}'", saying="largest supported value"
    )


@pytest.mark.parametrize("value", ["1e-320", "1e308"])
def test_bench_precision_outside_its_range_is_refused(value: str) -> None:
    # Both were a ZeroDivisionError.
    refused(*BENCH, "--precision", value, naming="'--precision'")


PLOTTING = [
    ["account", "--sigma", "1", "--q", "0.01", "--steps", "10", "--k", "1,2"],
    ["calibrate", "--epsilon", "3", "--q", "0.01", "--steps", "10"],
    ["dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0.1", "--rounds", "10"],
    [
        "subject",
        "--silos",
        "4",
        "--silos-per-round",
        "2",
        "--rounds",
        "2",
        "--local-steps",
        "2",
        "--record-q",
        "0.01",
    ]
    + ["--sigma", "1"],
    BENCH,
]


@pytest.mark.parametrize("args", PLOTTING, ids=lambda a: a[0])
@pytest.mark.parametrize("path", ["", "/proc/version"])
def test_an_unusable_plot_path_is_refused_before_any_work(args: list[str], path: str) -> None:
    refused(*args, "--plot", path, naming="'--plot'")


def test_prv_that_cannot_discretise_is_refused_with_the_reason_and_the_alternatives() -> None:
    args = ["account", "--sigma", "0.1", "--q", "0.5", "--steps", "10", "--accountant", "prv"]
    line = refused(*args, naming="prv", within=60)
    assert "use --accountant rdp or pld" in line


def test_pld_group_of_a_million_is_refused_with_the_largest_k_it_serves() -> None:
    from uldp.accountants.events import MAX_PLD_GROUP_K

    args = [
        "account",
        "--sigma",
        "1",
        "--q",
        "0.01",
        "--steps",
        "10",
        "--k",
        "1000000",
        "--group-method",
        "pld",
    ]
    refused(*args, naming="'--k'", saying=str(MAX_PLD_GROUP_K))


@pytest.mark.parametrize(
    "args, option",
    [
        (["calibrate", "--epsilon", "3", "--algo", "uldp-avg", "--rounds", "0"], "--rounds"),
        (["account", "--sigma", "1", "--algo", "uldp-avg", "--rounds", "0"], "--rounds"),
        (["account", "--sigma", "1", "--q", "0.01", "--steps", "0"], "--steps"),
        (["dropout", "--sigma", "1", "--silo-q", "0.01", "--dropout", "0.1", "--rounds", "0"], "--rounds"),
    ],
)
def test_zero_releases_are_refused(args: list[str], option: str) -> None:
    refused(*args, naming=f"'{option}'")


@pytest.mark.parametrize("command", ["account", "calibrate"])
def test_orders_with_an_empty_item_are_refused(command: str) -> None:
    base = ["--sigma", "1"] if command == "account" else ["--epsilon", "3"]
    refused(
        command,
        *base,
        "--q",
        "0.01",
        "--steps",
        "10",
        "--orders",
        "2,3,,4",
        naming="'--orders'",
        saying="empty",
    )


UNUSED = [
    (["account", "--sigma", "1", "--algo", "uldp-avg", "--rounds", "2"], "--batch-size", "10"),
    (["account", "--sigma", "1", "--algo", "uldp-avg", "--rounds", "2"], "--record-q", "0.1"),
    (["account", "--sigma", "1", "--algo", "uldp-avg", "--rounds", "2"], "--local-epochs", "2"),
    (["account", "--sigma", "1", "--algo", "uldp-avg", "--rounds", "2"], "--k", "4"),
    (["account", "--sigma", "1", "--q", "0.01", "--steps", "10"], "--rounds", "2"),
    (["account", "--sigma", "1", "--q", "0.01", "--steps", "10"], "--user-q", "0.5"),
    (["account", "--sigma", "1", "--q", "0.01", "--steps", "10"], "--silos", "3"),
    (["account", "--sigma", "1", "--q", "0.01", "--steps", "10"], "--group-method", "pld"),
    (
        ["account", "--sigma", "1", "--algo", "uldp-group", "--rounds", "2", "--k", "2", "--record-q", "0.1"],
        "--user-q",
        "0.5",
    ),
    (["calibrate", "--epsilon", "3", "--algo", "uldp-avg", "--rounds", "2"], "--record-q", "0.1"),
    (["calibrate", "--epsilon", "3", "--algo", "uldp-avg", "--rounds", "2"], "--q", "0.1"),
    (["calibrate", "--epsilon", "3", "--algo", "uldp-avg", "--rounds", "2"], "--k", "4"),
    (["calibrate", "--epsilon", "3", "--q", "0.01", "--steps", "10"], "--rounds", "2"),
    (["calibrate", "--epsilon", "3", "--q", "0.01", "--steps", "10"], "--group-method", "normal"),
]


@pytest.mark.parametrize("args, option, value", UNUSED, ids=lambda x: x if isinstance(x, str) else None)
def test_an_option_the_chosen_algorithm_ignores_is_refused_by_name(
    args: list[str], option: str, value: str
) -> None:
    refused(*args, option, value, naming=f"'{option}'", saying="drop it")


def test_an_ignored_option_from_a_config_file_is_refused_too(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("record_q: 0.1\n")
    args = ["account", "--sigma", "1", "--algo", "uldp-avg", "--rounds", "2", "--config", str(config)]
    refused(*args, naming="'--record-q'", saying="drop it")


def test_defaults_of_unused_options_are_not_refused() -> None:
    # --user-q and --local-epochs have defaults; only a value the user gave is refused.
    result = run("account", "--sigma", "1", "--q", "0.01", "--steps", "10", "--orders", "2,4,8")
    assert result.exit_code == 0, result.output


def test_no_warning_reaches_the_terminal_from_any_command() -> None:
    @click.command("warns")
    def warns() -> None:
        np.exp(np.array([1e308]))  # RuntimeWarning: overflow encountered in exp
        warnings.warn("a library's warning", UserWarning, stacklevel=1)
        click.echo("done")

    cli.add_command(warns)
    try:
        result = run("warns")
    finally:
        cli.commands.pop("warns")
    assert result.exit_code == 0
    assert result.stdout == "done\n"
    assert result.stderr == ""
