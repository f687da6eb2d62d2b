"""Every algorithm on Flower's simulation engine against the same run in process, and the faults
a federation meets (a silo that crashes, stalls, or sends a malformed message).

All runs share one simulation (one Ray start, the same three SuperNodes): starting Ray costs
more than the runs themselves. The silos run `tests.flower.faulty_app`, which is uldp's own
ClientApp except in the runs marked by its FAULTS sigmas.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the 'flower' extra is not installed")  # CI installs it

from tests.flower.faulty_app import FAULTS, STALL_S  # noqa: E402
from tests.flower.faulty_app import app as faulty_app  # noqa: E402
from tests.flower.leftovers import MARK, new_mark, processes_marked  # noqa: E402
from tests.trainers.synthetic import make_data  # noqa: E402
from uldp.errors import EngineError  # noqa: E402
from uldp.trainers.algorithms import TrainConfig, algorithm_names, get_algorithm  # noqa: E402
from uldp.trainers.flower.partitions import write_partitions  # noqa: E402
from uldp.trainers.flower.records import MalformedReply, SiloFailed  # noqa: E402
from uldp.trainers.flower.server import FlowerSilos  # noqa: E402
from uldp.trainers.flower.simulation import describe, run_federation  # noqa: E402
from uldp.trainers.rates import personalize_data  # noqa: E402
from uldp.trainers.runner import run, train  # noqa: E402

pytestmark = pytest.mark.slow  # one shared simulation: Ray and 30-odd runs, minutes on 2 cores

SILOS = 3


class SpySilos(FlowerSilos):
    """FlowerSilos that remembers what the server was given in setup."""

    def prepare(self, cfg, task, noise_fixed):
        algorithm, counts = super().prepare(cfg, task, noise_fixed)
        self.server_counts = counts
        return algorithm, counts


class ServerFailed(Exception):
    """Raised by the shared simulation's server once its runs are done."""


def _config(algo: str, **settings) -> TrainConfig:
    base = dict(algo=algo, rounds=2, seed=1, noise_seed=3, sigma=2.0)
    base.update(settings)
    return TrainConfig(**base)


# Every registered algorithm; user sampling (server view) and Protocol 1 on top.
CASES = {name: _config(name) for name in algorithm_names() if not get_algorithm(name).record_level}
# Personalised budgets (issue 14): each record's q travels in its silo's partition, the silo
# sampling in the plan; users' q_u stay with the server. name: (config, personalize_data options)
PERSONAL = {
    "rpdp": (_config("rpdp", local_steps=2), {"distribution": "three-levels"}),
    "unidp": (
        _config("unidp", local_steps=2, batch_size=8),
        {"distribution": "three-levels", "batch_size": 8},
    ),
    "rpdp silo_q=0.5": (_config("rpdp", local_steps=2, silo_q=0.5, rounds=3), {"distribution": "group-3"}),
    "uldp-avg user budgets": (_config("uldp-avg"), {"user_budgets_from": "group-3"}),
    "uldp-sgd-w secure user budgets": (
        _config("uldp-sgd-w", secure=True, test_keys=True, key_bits=1024),
        {"user_budgets_from": "three-levels"},
    ),
}
CASES.update({name: cfg for name, (cfg, _) in PERSONAL.items()})
CASES["uldp-avg q=0.5"] = _config("uldp-avg", user_q=0.5)
CASES["uldp-avg-w secure"] = _config("uldp-avg-w", secure=True, test_keys=True, key_bits=1024)
CASES["uldp-sgd-w secure q=0.5"] = _config(
    "uldp-sgd-w", secure=True, test_keys=True, key_bits=1024, user_q=0.5
)
# Baek et al.'s dp-fedavg-robust: simulated dropouts at both phases, and secure aggregation.
CASES["dp-fedavg-robust dropouts"] = _config("dp-fedavg-robust", dropout=0.34, rounds=3)
CASES["dp-fedavg-robust secure q=0.7"] = _config(
    "dp-fedavg-robust", secure=True, user_q=0.7, dropout=0.2, dropout_at="calibration", rounds=3
)
FAULT_CASES = {
    kind: _config("dp-fedavg-robust" if kind == "stall-upload" else "uldp-naive", sigma=sigma, rounds=3)
    for sigma, (_, _, kind) in FAULTS.items()
}
RESUMED = _config("uldp-avg", rounds=1)
# A small model keeps Protocol 1's Paillier work (users x parameters exponentiations) small.
MODEL = "logistic"
TIMEOUT = 5.0  # seconds the stalling silo (it sleeps faulty_app.STALL_S, 10) is given; others the default


def _personal_data(data, cfg: TrainConfig, options: dict):
    spec = get_algorithm(cfg.algo)
    personal, _ = personalize_data(
        data,
        algo=cfg.algo,
        record_level=spec.record_level,
        seed=0,
        sigma=cfg.sigma,
        local_steps=cfg.local_steps,
        rounds=cfg.rounds,
        silo_q=cfg.silo_q,
        delta=cfg.delta,
        **options,
    )
    return personal


@pytest.fixture(scope="module")
def federation():
    data = make_data("binary", n=240, users=12, silos=SILOS)
    outcomes: dict[str, object] = {}
    spies: dict[str, SpySilos] = {}
    datasets = {name: _personal_data(data, cfg, options) for name, (cfg, options) in PERSONAL.items()}
    with tempfile.TemporaryDirectory() as directory:
        write_partitions(data, directory)
        description = describe(data, MODEL, directory)
        descriptions = {}
        for name, own in datasets.items():
            own_directory = f"{directory}/{name.replace(' ', '_')}"
            write_partitions(own, own_directory)  # the q of each record travel with its silo's records
            descriptions[name] = describe(own, MODEL, own_directory)

        def serve(grid):
            # A checkpoint written after round 1 on Flower, resumed on Flower for rounds 2-3.
            with tempfile.TemporaryDirectory() as checkpoint:
                run(data, SpySilos(grid, description), RESUMED, model_name=MODEL, checkpoint_dir=checkpoint)
                cfg = dataclasses.replace(RESUMED, rounds=3)
                outcomes["resumed"] = run(
                    data,
                    SpySilos(grid, description),
                    cfg,
                    model_name=MODEL,
                    checkpoint_dir=checkpoint,
                    resume=True,
                )
            for name, cfg in [*CASES.items(), *FAULT_CASES.items()]:
                timeout = {"timeout": TIMEOUT} if name in ("stall", "stall-upload") else {}
                spies[name] = SpySilos(grid, descriptions.get(name, description), **timeout)
                try:
                    outcomes[name] = run(datasets.get(name, data), spies[name], cfg, model_name=MODEL)
                except (MalformedReply, SiloFailed, EngineError) as error:
                    outcomes[name] = error
                if name in ("stall", "stall-upload"):
                    # The server gave up on the stalled silo after TIMEOUT; its ClientApp still
                    # sleeps, and when it returns the simulation writes that silo's context back,
                    # the finished run's settings and all. The runs here share one Flower run, and
                    # so that context: let it land before the next run's setup, or it replaces it
                    # (the clean-clone CI, under load, once saw stall-upload's silo 1 answer with
                    # the stall run's ULDP-NAIVE). Separate `uldp train` runs never share one.
                    time.sleep(STALL_S - TIMEOUT + 3.0)
            raise ServerFailed  # leaves the ServerApp while Ray runs, as a bug of ours would

        mark = new_mark()
        os.environ[MARK] = mark  # inherited by every process Ray starts
        try:
            with pytest.raises(ServerFailed):
                run_federation(SILOS, serve, client_app=faulty_app)
        finally:
            del os.environ[MARK]
        outcomes["left behind"] = processes_marked(mark)
    return data, outcomes, spies, datasets


def test_no_ray_process_outlives_a_simulation_whose_server_raised(federation):
    """The exception reaches the caller, and every process Ray started has ended by then."""
    _, outcomes, _, _ = federation
    assert outcomes["left behind"] == []


@pytest.mark.parametrize("name", list(CASES))
def test_flower_equals_in_process(federation, name):
    data, outcomes, _, datasets = federation
    cfg = CASES[name]
    flower, local = outcomes[name], train(datasets.get(name, data), cfg, model_name=MODEL)
    assert not isinstance(flower, Exception), flower
    assert len(flower.history) == len(local.history) == cfg.rounds
    for a, b in zip(flower.history, local.history):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(b[key], str | bool | None):  # dp-fedavg-robust's note, released, unset sums
                assert a[key] == b[key], (key, a[key], b[key])
            elif key != "elapsed_s":
                assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-6), (key, a[key], b[key])
    for key in local.params:
        assert np.allclose(flower.params[key].numpy(), local.params[key].numpy(), rtol=0, atol=1e-6)
    assert flower.summary["epsilon"] == local.summary["epsilon"]  # the same accountant, same plan
    assert "engine" in flower.assumptions and "engine" not in local.assumptions


def test_a_run_checkpointed_on_flower_resumes_as_the_uninterrupted_local_run(federation):
    data, outcomes, _, _ = federation
    resumed, local = (
        outcomes["resumed"],
        train(data, dataclasses.replace(RESUMED, rounds=3), model_name=MODEL),
    )
    assert [r["round"] for r in resumed.history] == [1, 2, 3]
    for a, b in zip(resumed.history, local.history):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6) and a["epsilon"] == b["epsilon"]
    for key in local.params:
        assert np.allclose(resumed.params[key].numpy(), local.params[key].numpy(), rtol=0, atol=1e-6)


def test_secure_server_never_sees_the_histogram(federation):
    data, outcomes, spies, _ = federation
    for name in ("uldp-avg-w secure", "uldp-sgd-w secure q=0.5"):
        assert spies[name].server_counts is None
        assert spies[name].protocol is not None
    # Without --secure, -w's server weights in the clear, so it is sent the owners (and says so).
    assert np.array_equal(spies["uldp-avg-w"].server_counts, data.user_silo_counts())
    assert spies["uldp-avg"].server_counts is None  # uniform weights: the server needs no histogram
    assert "owner of every record" in outcomes["uldp-avg-w"].assumptions["aggregation"]
    assert "aggregation" not in outcomes["uldp-avg-w secure"].assumptions


EXPECTED = {
    # The worker process died: Ray's failure under the simulation engine, not the silo's.
    "crash": (EngineError, "Flower's simulation engine (Ray) failed in round 2, at "),
    "stall": (SiloFailed, f"did not answer within {TIMEOUT:g} s"),
    "wrong-shape": (MalformedReply, "silo 2 sent a malformed message in round 1: delta has shape"),
    "wrong-kind": (MalformedReply, "silo 0 sent a malformed message in round 1: a 'user-deltas' message"),
    "non-finite": (MalformedReply, "silo 1 sent a malformed message in round 1: delta holds non-finite"),
    "other-silo": (
        MalformedReply,
        "silo 2 sent a malformed message in round 2: it claims to come from silo 0",
    ),
}


def test_a_silo_silent_in_its_upload_is_a_dropout_not_a_failure(federation):
    """dp-fedavg-robust on Flower: silo 1 does not answer its round-3 upload in time. The round
    goes on without it, calibrated for the survivors, and its epsilon is accounted as such."""
    _, outcomes, _, _ = federation
    result = outcomes["stall-upload"]
    assert not isinstance(result, Exception), result
    last = result.history[-1]
    assert (last["participants"], last["dropped_upload"], last["released"]) == (3, 1, True)
    assert last["alive_weight_sum"] == 2.0 and last["model_multiplier"] == pytest.approx(7.07)
    assert [r["dropped_upload"] for r in result.history[:2]] == [0, 0]


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_a_faulty_silo_stops_the_run_by_name(federation, kind):
    _, outcomes, _, _ = federation
    error = outcomes[kind]
    cls, text = EXPECTED[kind]
    assert isinstance(error, cls), error
    assert text in str(error)
    # The faulty silo is named; on a loaded machine a silo sharing its worker (crash) or one
    # slower than the short timeout (stall) may be named beside it.
    if kind in ("crash", "stall"):
        assert "silo 1" in str(error).split(": ")[0].split(" did not")[0]
    assert "\n" not in str(error)  # one line for the CLI's Error:
