"""`uldp train --engine flower --private-sampling` (issue 36): uldp's own ServerApp (FlowerSilos)
and ClientApp, each message a function call (test_own_app's LoopbackGrid), run the two oblivious
transfer query rounds and carry the openings and the silos' digests in the round's message."""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("flwr", reason="the 'flower' extra is not installed")  # CI installs it

import torch  # noqa: E402

from tests.flower.test_own_app import LoopbackGrid  # noqa: E402
from tests.flower.test_own_app import server_identity as server_identity  # noqa: E402 (a fixture)
from tests.trainers.synthetic import make_data  # noqa: E402
from tests.trainers.test_private_sampling_training import (  # noqa: E402
    MODEL,
    _config,
    _recorded_samples,
    fixed_draws,
)
from uldp.trainers.flower import client_app  # noqa: E402
from uldp.trainers.flower.partitions import write_partitions  # noqa: E402
from uldp.trainers.flower.server import FlowerSilos  # noqa: E402
from uldp.trainers.flower.simulation import describe  # noqa: E402
from uldp.trainers.runner import run, train  # noqa: E402


class PushPullGrid(LoopbackGrid):
    """LoopbackGrid with the push and pull calls uldp's own server polls with."""

    steps: list[str] = []

    def push_messages(self, messages) -> list[str]:
        self.pushed = {}
        for message in messages:
            if "protocol1" in message.content.config_records:
                self.steps.append(str(message.content.config_records["protocol1"].get("step", "round")))
            message.metadata.__dict__["_message_id"] = uuid.uuid4().hex
            self.pushed[message.metadata.message_id] = message
        return list(self.pushed)

    def pull_messages(self, message_ids) -> list:
        return [
            self.app(self.pushed[i], self.contexts[self.pushed[i].metadata.dst_node_id]) for i in message_ids
        ]


@pytest.mark.usefixtures("server_identity")
def test_the_flower_messages_give_the_local_engines_run(monkeypatch, tmp_path):
    """uldp's own server (FlowerSilos) and ClientApp, each message a function call: the two OT
    query rounds, the openings and the digests in the round's message, as under `--engine flower`."""
    data = make_data("binary", n=160, users=10, silos=3)
    cfg = _config(rounds=2)
    fixed_draws(monkeypatch)
    samples = _recorded_samples(monkeypatch)
    local = train(data, cfg, model_name=MODEL)
    fixed_draws(monkeypatch)  # the same seeds again
    write_partitions(data, tmp_path)
    grid = PushPullGrid(client_app.app, {})
    flower = run(data, FlowerSilos(grid, describe(data, MODEL, str(tmp_path))), cfg, model_name=MODEL)
    for name, value in local.params.items():
        assert torch.allclose(flower.params[name], value, rtol=0, atol=1e-6), name
    assert any(not s.all() for s in samples) and any(s.any() for s in samples)  # a real sample
    # Per round: the offer and the transfer to each of the 3 silos, then the round's message.
    assert grid.steps[-9:] == ["sampling-offer"] * 3 + ["sampling-transfer"] * 3 + ["round"] * 3
    assert [r["epsilon"] for r in flower.history] == [r["epsilon"] for r in local.history]
