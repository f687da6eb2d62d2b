"""uldp's own ClientApp never draws the same noise twice: a run's setup sent again, a round asked
again (or an earlier one), and a phase of a round asked again are each refused in one line.

Each message's noise comes from round_rngs(entropy, t) or phase_rng(entropy, t, silo, name):
answered twice on two models, the two replies would carry the same noise draw, which their
difference removes. The handlers are called directly (the real ClientApp, one node's state), as
Flower calls them; no engine is started.
"""

from __future__ import annotations

import dataclasses
import json
import secrets

import pytest

pytest.importorskip("flwr", reason="the 'flower' extra is not installed")  # CI installs it

from flwr.app import ConfigRecord, Context, Message, RecordDict  # noqa: E402

from uldp.trainers.algorithms import TrainConfig, make_algorithm  # noqa: E402
from uldp.trainers.algorithms.base import Context as AlgoContext  # noqa: E402
from uldp.trainers.data.own_data import federated_data  # noqa: E402
from uldp.trainers.flower import client_app, records  # noqa: E402
from uldp.trainers.flower.simulation import describe  # noqa: E402
from uldp.trainers.round_rngs import round_rngs  # noqa: E402


def send(content: RecordDict, kind: str, context: Context) -> RecordDict:
    message = Message(content, dst_node_id=context.node_id, message_type=kind)
    message.metadata.__dict__["_message_id"] = secrets.token_hex(8)
    return client_app.app(message, context).content


@pytest.fixture
def server_identity(monkeypatch):
    """What a Flower process has set before it builds messages (restored afterwards: another
    test may have set its own)."""
    from flwr.supercore.task_identity import TaskIdentity

    for name, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, name, value)


@pytest.fixture
def silo(tmp_path, server_identity):
    """Silo 0 of a 2-silo run of uldp-avg, set up: (its context, the setup content, the run)."""
    return set_up(tmp_path, "uldp-avg")


def set_up(tmp_path, algo: str):
    """Silo 0 of a 2-silo run of `algo`, set up: (its context, the setup content, the run, cfg)."""
    import numpy as np

    rng = np.random.default_rng(0)
    data = federated_data(rng.normal(size=(40, 3)), rng.integers(0, 2, 40), np.arange(40) % 8, n_silos=2)
    from uldp.trainers.flower.partitions import write_partitions

    write_partitions(data, tmp_path)
    run = describe(data, partitions=str(tmp_path))
    cfg = TrainConfig(algo=algo, rounds=3, sigma=1.0)
    settings = dataclasses.asdict(cfg)
    settings["noise_seed"] = None
    setup = RecordDict(
        {
            "run": ConfigRecord(
                {
                    "config": json.dumps(settings),
                    "task": run.task,
                    "model": run.model,
                    "loss": run.loss,
                    "feature_shape": json.dumps(list(run.feature_shape)),
                    "n_classes": run.n_classes,
                    "users": run.n_users,
                    "silos": run.n_silos,
                    "federation": run.federation,
                    "partitions": run.partitions,
                    "owners": False,
                    "noise_seed": "",
                    "job": f"job-{algo}-{secrets.token_hex(4)}",  # per-process caches are per job
                }
            )
        }
    )
    context = Context(1, 100, {"partition-id": 0, "num-partitions": 2}, RecordDict(), {})
    reply = send(setup, records.SETUP, context)
    assert "setup" in reply, reply
    return context, setup, run, cfg


def round_content(t: int, run, cfg, context) -> RecordDict:
    """Round t's message to silo 0: another model each round, the round's plan."""
    like = client_app._working_set(context).like
    params = {name: value + t for name, value in like.items()}
    ctx = AlgoContext(None, None, run.n_users, run.n_silos, run.n_params, None)
    plan = make_algorithm(cfg, [], run.task).plan_round(t, ctx, cfg, round_rngs(1, t, run.n_silos)[0])
    return RecordDict(
        {
            "round": ConfigRecord({"round": t, "silo": 0}),
            "params": records.params_record(params),
            "plan": records.plan_record(plan, 0),
        }
    )


def test_a_round_is_answered_once_and_in_order(silo):
    context, _, run, cfg = silo
    assert "reply" in send(round_content(1, run, cfg, context), records.ROUND, context)
    assert "reply" in send(round_content(2, run, cfg, context), records.ROUND, context)
    for t in (2, 1):
        reply = send(round_content(t, run, cfg, context), records.ROUND, context)
        assert reply["error"]["message"] == (
            f"round {t} was already answered; a silo never draws a round's noise twice"
        )


def test_a_runs_setup_sent_again_is_refused(silo):
    context, setup, run, cfg = silo
    assert "reply" in send(round_content(1, run, cfg, context), records.ROUND, context)
    reply = send(setup, records.SETUP, context)
    job = setup["run"]["job"]
    assert (
        reply["error"]["message"] == f"run {job} was already set up on this silo; a silo sets up a run once"
    )
    # Still refused: the round the silo answered stays answered.
    reply = send(round_content(1, run, cfg, context), records.ROUND, context)
    assert "already answered" in reply["error"]["message"]


def test_a_phase_of_a_round_is_answered_once(tmp_path, server_identity):
    """dp-fedavg-robust's phases (Baek et al.): each (round, phase) once."""
    context, _, _, _ = set_up(tmp_path, "dp-fedavg-robust")

    def phase(t: int, name: str) -> RecordDict:
        content = RecordDict(
            {"phase": ConfigRecord({"round": t, "silo": 0, "name": name}), "payload": records.arrays({})}
        )
        return send(content, records.PHASE, context)

    assert "reply" in phase(1, "weight")
    assert "reply" in phase(2, "weight")  # another round's
    reply = phase(1, "weight")
    assert (
        reply["error"]["message"]
        == "phase weight of round 1 was already answered; its noise is never drawn twice"
    )
