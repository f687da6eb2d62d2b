"""Adding an algorithm is one spec and one `register` line (docs/architecture.md): a toy one
registered here is offered, accounted, calibrated and trained by the three commands that read
the registry, and is gone from them all once unregistered."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from uldp.accountants.account import record_level
from uldp.accountants.events import SubsampledGaussian
from uldp.cli.main import cli
from uldp.trainers.algorithms import AlgorithmSpec, algorithm_names, register, unregister
from uldp.trainers.algorithms.base import SiloDelta, gaussian
from uldp.trainers.algorithms.fedavg import FedAvg
from uldp.trainers.algorithms.plans import gaussian_rounds


def toy_plan(inputs):
    return gaussian_rounds("toy", "a test's toy", "each silo adds N(0, sigma^2 C^2)", inputs)


class Toy(FedAvg):
    """FedAvg whose silos add Gaussian noise to their deltas."""

    name = "toy"

    def silo_update(self, silo, params, plan, ctx, cfg, rng):
        noise_rng, train_rng = rng.spawn(2)
        delta = super().silo_update(silo, params, plan, ctx, cfg, train_rng).delta
        return SiloDelta(silo.silo, delta + gaussian(ctx.n_params, cfg.sigma * cfg.clip, noise_rng, delta))


TOY = AlgorithmSpec(
    name="toy",
    help="FedAvg with noise, registered by a test.",
    build=lambda cfg, silos, task: Toy(),
    plan=toy_plan,
)


@pytest.fixture
def toy():
    register(TOY)
    yield TOY
    unregister("toy")


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def invoke_json(*args: str) -> dict:
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_toy_is_accounted(toy):
    doc = invoke_json("account", "--algo", "toy", "--sigma", "2", "--rounds", "10")
    [row] = doc["results"]
    assert row["algorithm"] == "toy" and row["level"] == "user"
    assert row["epsilon"] == record_level(SubsampledGaussian(2.0, 1.0, 10), 1e-5).epsilon
    assert doc["assumptions"]["algorithm"] == "toy (a test's toy)"
    for command in ("account", "calibrate", "train"):
        shown = " ".join(invoke(command, "--help").output.split())  # unwrapped
        assert "toy: FedAvg with noise, registered by a test." in shown


def test_toy_is_calibrated_as_the_mechanism_it_releases(toy):
    doc = invoke_json("calibrate", "--epsilon", "3", "--algo", "toy", "--rounds", "10")
    same = invoke_json("calibrate", "--epsilon", "3", "--algo", "uldp-avg", "--rounds", "10")
    assert doc["algorithm"] == "toy" and doc["meets_budget"]
    assert doc["sigma"] == same["sigma"]  # both are T Gaussians of multiplier sigma


def test_toy_is_trained_and_its_epsilon_is_the_one_account_prints(toy, tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("patient,a,b,y\n" + "".join(f"{i % 6},{i},{i * 2 % 7},{i % 2}\n" for i in range(60)))
    doc = invoke_json(
        "train",
        "--algo",
        "toy",
        "--data-path",
        str(table),
        "--user-column",
        "patient",
        "--label-column",
        "y",
        "--silos",
        "2",
        "--rounds",
        "2",
        "--noise-seed",
        "1",
    )
    assert doc["summary"]["algo"] == "toy" and [r["round"] for r in doc["history"]] == [1, 2]
    command = doc["assumptions"]["check"].strip("`").split("`")[0]
    assert command.startswith("uldp account --algo toy --sigma 5 --rounds 2")
    checked = invoke_json(*command.split()[1:])
    assert checked["results"][0]["epsilon"] == doc["summary"]["epsilon"]


def test_unregistered_toy_is_gone_from_every_command():
    assert "toy" not in algorithm_names()
    for args in (
        ["account", "--algo", "toy", "--sigma", "2", "--rounds", "10"],
        ["calibrate", "--epsilon", "3", "--algo", "toy", "--rounds", "10"],
        ["train", "--algo", "toy", "--dataset", "mnist"],
    ):
        result = invoke(*args)
        assert result.exit_code == 2 and "'toy' is not one of" in result.output, result.output


def test_completion_offers_the_registered_names_with_their_help(toy):
    from uldp.cli.options import AlgorithmChoice

    items = AlgorithmChoice().shell_complete(None, None, "t")
    assert [(i.value, i.help) for i in items] == [("toy", TOY.help)]
    # account and calibrate offer every algorithm with a plan, the -w variant too (issue 33).
    assert [i.value for i in AlgorithmChoice(accounted=True).shell_complete(None, None, "uldp-a")] == [
        "uldp-avg",
        "uldp-avg-w",
    ]
    assert [i.value for i in AlgorithmChoice(accounted=True).shell_complete(None, None, "d")] == []


def test_the_options_account_accepts_come_from_the_spec_plan_options():
    # Not hard-coded per name: a toy reading only what its plan reads (no user sampling, no |S|)
    # has --user-q and --silos refused, and they are accepted again once its spec names them.
    narrow = AlgorithmSpec(
        name="toy",
        help="FedAvg with noise, no sampling.",
        build=TOY.build,
        plan=toy_plan,
        plan_options=frozenset(),
    )
    register(narrow)
    try:
        refused = invoke("account", "--algo", "toy", "--sigma", "2", "--rounds", "10", "--user-q", "0.5")
        assert refused.exit_code == 2
        assert "'--user-q': not used by toy" in refused.stderr
    finally:
        unregister("toy")
    register(TOY)
    try:
        doc = invoke_json("account", "--algo", "toy", "--sigma", "2", "--rounds", "10", "--user-q", "0.5")
        assert (
            doc["results"][0]["epsilon"]
            < invoke_json("account", "--algo", "toy", "--sigma", "2", "--rounds", "10")["results"][0][
                "epsilon"
            ]
        )
    finally:
        unregister("toy")
