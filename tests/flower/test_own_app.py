"""uldp.flower on a user's own Flower app: examples/flower/own_app_uldp/, Flower's quickstart shape
converted by `UserLevelDP` (the strategy wrapper) and `user_level_mod` (the ClientApp mod).

Its rounds equal `uldp train --engine local`'s (runner.train with the app's own model factory,
the app's records as `uldp train --data task.py:all_records` reads them, the same seeds) to 1e-6,
and each round logs its user-level epsilon. The fast tests carry the app's messages in this
process (`LoopbackGrid`: the real ServerApp main, ClientApp and mod; only the transport is a
function call); the slow ones run it with `flwr run`, on Flower's simulation engine (Ray) and
on a loopback TLS deployment (examples/flower/federation.py).
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("flwr", reason="the 'flower' extra is not installed")  # CI installs it

import torch  # noqa: E402
from flwr.app import Context, Message, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from tests.flower.leftovers import marked_env, new_mark, processes_marked  # noqa: E402
from uldp.errors import InvalidParameter  # noqa: E402
from uldp.flower import UserLevelDP, user_level_mod  # noqa: E402
from uldp.trainers.algorithms import TrainConfig  # noqa: E402
from uldp.trainers.data.own_data import as_federated  # noqa: E402
from uldp.trainers.flower.records import SiloFailed  # noqa: E402
from uldp.trainers.runner import train  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ORIGINAL = ROOT / "examples" / "flower" / "own_app"
CONVERTED = ROOT / "examples" / "flower" / "own_app_uldp"
SILOS = 3
# The converted app's run config (its pyproject.toml), with a noise seed fixed to replay the run.
RUN_CONFIG = {
    "num-server-rounds": 2,
    "fraction-evaluate": 1.0,
    "local-epochs": 1,
    "lr": 0.1,
    "batch-size": 32,
    "seed": 0,
    "users": 40,
    "silos": SILOS,
    "sigma": 1.0,
    "noise-seed": 1,
}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The converted app's modules (package `ownapp`, imported from its folder as Flower does)."""
    sys.path.insert(0, str(CONVERTED))
    try:
        from ownapp import client_app, server_app, task

        yield task, client_app, server_app
    finally:
        sys.path.remove(str(CONVERTED))


class Spy(UserLevelDP):
    """UserLevelDP that keeps every instance, for its history."""

    made: list[UserLevelDP] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        Spy.made.append(self)


class Stopped(Exception):
    """The run a test stopped (LoopbackGrid's `stop_at`)."""


class LoopbackGrid:
    """A Flower Grid whose messages are function calls to `client_app` on SILOS nodes (node
    config partition-id and num-partitions as a SuperNode's), each with its own state.
    `tamper(messages, replies)` may change what comes back (a faulty or hostile transport);
    `timeouts` keeps the timeout of every call; `stop_at` (a round) ends the run with `Stopped`
    when that round's messages are sent, for a test that needs no more."""

    def __init__(
        self,
        client_app: ClientApp,
        run_config: dict,
        *,
        tamper=None,
        partitions=SILOS,
        run_id=1,
        stop_at=None,
    ):
        self.app = client_app
        self.stop_at = stop_at
        self.tamper = tamper or (lambda messages, replies: replies)
        self.timeouts: list[float | None] = []
        self.contexts = {
            100 + s: Context(
                run_id, 100 + s, {"partition-id": s, "num-partitions": partitions}, RecordDict(), run_config
            )
            for s in range(SILOS)
        }

    def get_node_ids(self) -> list[int]:
        return list(self.contexts)

    def send_and_receive(self, messages, *, timeout=None) -> list[Message]:
        messages = list(messages)
        self.timeouts.append(timeout)
        if self.stop_at is not None and round_of(messages) == self.stop_at:
            raise Stopped
        for message in messages:  # what pushing a message does (Flower's InMemoryGrid)
            message.metadata.__dict__["_message_id"] = uuid.uuid4().hex
        return self.tamper(messages, [self.app(m, self.contexts[m.metadata.dst_node_id]) for m in messages])


@pytest.fixture
def server_identity(monkeypatch):
    """What a Flower process has set before it builds messages (restored afterwards: another
    test may have set its own)."""
    for name, value in (("_run_id", 1), ("_node_id", 0), ("_task_id", 1)):
        monkeypatch.setattr(TaskIdentity, name, value)


def run_main(server_app, grid, run_config: dict, monkeypatch) -> tuple[UserLevelDP, dict]:
    """The converted ServerApp's main on `grid`; its strategy and its saved final model."""
    Spy.made = []
    monkeypatch.setattr(server_app, "UserLevelDP", Spy)
    server_app.main(grid, Context(1, 0, {}, RecordDict(), run_config))
    return Spy.made[-1], torch.load(run_config["final-model"])


def local_run(task, **settings):
    """The same run by `uldp train --engine local`: the app's model and records, the same seeds."""
    cfg = TrainConfig(**{"algo": "uldp-avg", "rounds": 2, "seed": 0, "noise_seed": 1, **settings})
    return train(as_federated(task.all_records(SILOS)), cfg, model=task.Net)


def assert_same_run(history: list[dict], params: dict, local) -> None:
    assert [row["round"] for row in history] == [row["round"] for row in local.history]
    for mine, theirs in zip(history, local.history):
        for key in ("epsilon", "server_epsilon", "delta", "sampled_users"):
            assert mine.get(key) == pytest.approx(theirs.get(key), rel=1e-12), key
    assert list(params) == list(local.params)
    for name, value in local.params.items():
        assert torch.as_tensor(params[name]) == pytest.approx(value, abs=1e-6, rel=1e-6), name


def test_the_converted_app_equals_the_local_engine_and_logs_each_rounds_epsilon(
    app, server_identity, monkeypatch, tmp_path
):
    task, client_app, server_app = app
    run_config = {**RUN_CONFIG, "final-model": str(tmp_path / "final.pt")}
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("flwr").addHandler(handler)
    try:
        strategy, final = run_main(
            server_app, LoopbackGrid(client_app.app, run_config), run_config, monkeypatch
        )
    finally:
        logging.getLogger("flwr").removeHandler(handler)
    local = local_run(task, sigma=1.0, lr=0.1)
    assert_same_run(strategy.history, final, local)
    initial = task.Net()  # the run moved the model
    assert any(not torch.equal(final[n], p) for n, p in initial.state_dict().items())
    logged = [r.getMessage() for r in records if r.getMessage().startswith("uldp: round")]
    assert len(logged) == 2
    for line, row in zip(logged, local.history):
        assert f"round {row['round']}: user-level epsilon {row['epsilon']:.4g} at delta 1e-05" in line
        assert line.endswith("(fixed noise seed: not private)")
    warned = [r.getMessage() for r in records if r.levelno == logging.WARNING and "uldp" in r.getMessage()]
    assert warned == [
        "uldp: fixed noise seed 1: the noise is reproducible and NOT private against anyone who knows "
        "the seed (experiments only)"
    ]
    said = [r.getMessage() for r in records if r.getMessage().startswith("uldp: assumes ")]
    assert [line.split(":")[1] for line in said] == [" assumes noise", " assumes aggregation"]
    assert "evaluate replies are not noised" in said[1]


def test_uldp_sgd_with_user_sampling_equals_the_local_engine_in_both_views(app, server_identity):
    """uldp-sgd with q = 0.5: the same users sampled as in process, the released model's and the
    server's epsilon."""
    task, client_app, _ = app
    settings = dict(algo="uldp-sgd", sigma=2.0, clip=0.5, lr=0.2, user_q=0.5, local_epochs=2)
    strategy = UserLevelDP(FedAvg(fraction_evaluate=0.0), users=40, silos=SILOS, noise_seed=1, **settings)
    torch.manual_seed(0)
    from flwr.app import ArrayRecord

    result = strategy.start(
        LoopbackGrid(client_app.app, RUN_CONFIG), ArrayRecord(task.Net().state_dict()), num_rounds=2
    )
    local = local_run(task, **settings)
    assert all("server_epsilon" in row for row in strategy.history)
    assert_same_run(strategy.history, result.arrays.to_torch_state_dict(), local)
    assert result.train_metrics_clientapp[2]["server-epsilon"] == pytest.approx(
        local.history[-1]["server_epsilon"]
    )


def test_a_silo_whose_records_break_the_user_ids_is_named_and_the_run_stops(app, server_identity):
    task, _, _ = app

    def records(partition_id: int):
        x, y, users = task.load_records(partition_id, SILOS)
        return x, y, users + (40 if partition_id == 2 else 0)

    client = ClientApp(mods=[user_level_mod(task.Net, records)])

    @client.train()  # Flower applies mods to registered handlers only; the mod answers for it
    def never(message: Message, context: Context) -> Message:
        raise AssertionError("the app's own train handler ran on uldp's message")

    strategy = UserLevelDP(FedAvg(), users=40, silos=SILOS)
    from flwr.app import ArrayRecord

    with pytest.raises(SiloFailed, match=r"silo 2|SuperNode 102") as caught:
        strategy.start(LoopbackGrid(client, RUN_CONFIG), ArrayRecord(task.Net().state_dict()), num_rounds=1)
    assert "refused in setup" in str(caught.value) and "user ids must lie in [0, 40)" in str(caught.value)


def mod_app(model, records, **kwargs) -> ClientApp:
    """A ClientApp of the mod alone over `model` and `records` (its own train handler never runs)."""
    client = ClientApp(mods=[user_level_mod(model, records, **kwargs)])

    @client.train()
    def never(message: Message, context: Context) -> Message:
        raise AssertionError("the app's own train handler ran on uldp's message")

    return client


def start_run(grid, net, rounds=1, strategy=None, **kwargs):
    """`UserLevelDP(FedAvg)` (noise seed 1) started on `grid` from `net`'s arrays."""
    from flwr.app import ArrayRecord

    strategy = strategy or UserLevelDP(
        FedAvg(fraction_evaluate=0.0), users=40, silos=SILOS, noise_seed=1, sigma=1.0, lr=0.1
    )
    return strategy, strategy.start(grid, ArrayRecord(net.state_dict()), num_rounds=rounds, **kwargs)


def round_of(messages) -> int | None:
    header = messages[0].content.config_records.get("uldp") if messages else None
    return int(header["round"]) if header is not None and header["step"] == "round" else None


def test_a_silo_asked_for_a_round_again_refuses_it_and_never_redraws_its_noise(app, server_identity):
    task, client_app, _ = app
    kept: dict = {}

    def keep(messages, replies):
        if round_of(messages) == 1:
            kept["message"], kept["context"] = messages[0], None
        return replies

    grid = LoopbackGrid(client_app.app, RUN_CONFIG, tamper=keep)
    torch.manual_seed(0)
    start_run(grid, task.Net(), rounds=1)
    # The server (or anyone on the wire) asks silo 0 for round 1 again, or for an earlier round.
    for t in (1, 0):
        again = Message(kept["message"].content, dst_node_id=100, message_type="train")
        again.content["uldp"]["round"] = t
        again.metadata.__dict__["_message_id"] = f"again-{t}"
        reply = client_app.app(again, grid.contexts[100])
        assert "message" not in reply.content
        assert reply.content["uldp.error"]["message"] == (
            f"round {t} was already answered; a silo never draws a round's noise twice"
        )


class Shifted(torch.nn.Module):
    """The app's Net after a normaliser: a buffer the server sets and the rounds never send."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("shift", torch.zeros(8))
        from ownapp.task import Net

        self.net = Net()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x - self.shift)


def test_the_models_buffers_reach_the_silos_and_the_run_equals_the_local_engine(app, server_identity):
    task, _, _ = app
    torch.manual_seed(0)
    net = Shifted()
    net.shift.fill_(0.5)  # the server's value; a silo's factory builds 0
    strategy, result = start_run(LoopbackGrid(mod_app(Shifted, task.load_records), RUN_CONFIG), net, 1)
    cfg = TrainConfig(algo="uldp-avg", rounds=1, seed=0, noise_seed=1, sigma=1.0, lr=0.1)
    local = train(as_federated(task.all_records(SILOS)), cfg, model=net)
    final = result.arrays.to_torch_state_dict()
    assert final.pop("shift").tolist() == [0.5] * 8  # kept as the server set it
    assert_same_run(strategy.history, final, local)


def test_a_silo_whose_model_lacks_the_servers_buffer_refuses_in_one_line(app, server_identity):
    task, _, _ = app

    class Unshifted(Shifted):  # the same parameters, no buffer
        def __init__(self) -> None:
            torch.nn.Module.__init__(self)
            self.net = task.Net()

    with pytest.raises(SiloFailed, match="refused in setup") as caught:
        start_run(LoopbackGrid(mod_app(Unshifted, task.load_records), RUN_CONFIG), Shifted())
    assert "the server's model and this silo's differ: the server's has ['shift'] other arrays" in str(
        caught.value
    )
    assert "\n" not in str(caught.value)


def spoilt(what: str):
    """The app's records with one bad value in partition 0."""

    def records(partition_id: int, num_partitions: int):
        x, y, users = (v.copy() for v in load_records(partition_id, num_partitions))
        if partition_id == 0 and what == "nan":
            x[3, 1] = float("nan")
        if partition_id == 0 and what == "label":
            y[3] = 7
        return x, y, users

    from ownapp.task import load_records

    return records


@pytest.mark.parametrize(
    "what, said",
    [
        ("nan", "records: x: record 3 has a NaN or infinite feature (as float32); fill or drop it first"),
        (
            "label",
            "records: y: record 3 has label 7, but a multiclass task on a model of 3 output(s) has "
            "labels 0..2",
        ),
    ],
)
def test_bad_records_are_refused_at_setup_in_one_records_line(app, server_identity, what, said):
    task, _, _ = app
    with pytest.raises(SiloFailed) as caught:
        start_run(LoopbackGrid(mod_app(task.Net, spoilt(what)), RUN_CONFIG), task.Net())
    assert str(caught.value).endswith(f"SuperNode 100 refused in setup: {said}")


def test_a_duplicate_reply_and_a_setup_reply_to_no_message_are_refused(app, server_identity):
    from uldp.errors import ProtocolError

    task, client_app, _ = app

    def twice(messages, replies):
        return replies + replies[:1] if round_of(messages) == 1 else replies

    with pytest.raises(ProtocolError, match=r"^silo 0 \(SuperNode 100\) answered round 1 twice$"):
        start_run(LoopbackGrid(client_app.app, RUN_CONFIG, tamper=twice), task.Net())

    def foreign(messages, replies):
        if messages and messages[0].content["uldp"]["step"] == "setup":
            replies[1].metadata.__dict__["_reply_to_message_id"] = "not-sent"
        return replies

    with pytest.raises(ProtocolError, match=r"^a setup reply from SuperNode \d+ answers no message sent$"):
        start_run(LoopbackGrid(client_app.app, RUN_CONFIG, tamper=foreign), task.Net())


def test_the_wrappers_timeout_bounds_every_round_and_what_it_replaces_is_warned(app, server_identity, caplog):
    from flwr.app import ConfigRecord

    task, client_app, _ = app

    class Proximal(FedAvg):
        def aggregate_train(self, server_round, replies):
            raise AssertionError("UserLevelDP aggregates the training rounds itself")

    grid = LoopbackGrid(client_app.app, RUN_CONFIG, stop_at=1)
    strategy = UserLevelDP(Proximal(fraction_evaluate=0.0), users=40, silos=SILOS, noise_seed=1, timeout=7.5)
    with caplog.at_level(logging.WARNING, logger="flwr"), pytest.raises(Stopped):
        start_run(grid, task.Net(), rounds=2, strategy=strategy, train_config=ConfigRecord({"lr": 0.3}))
    assert grid.timeouts == [7.5, 7.5]  # the setup and round 1 (Flower's default would be 3600)
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith("uldp: ")]
    assert "uldp: train_config {'lr': 0.3} is not sent: the silos train with UserLevelDP's settings" in warned
    assert any(line.startswith("uldp: Proximal's aggregate_train is not used") for line in warned)


def test_supernodes_of_another_partition_count_are_refused_naming_both_fixes(app, server_identity):
    task, client_app, _ = app
    with pytest.raises(SiloFailed) as caught:
        start_run(LoopbackGrid(client_app.app, RUN_CONFIG, partitions=4), task.Net())
    said = str(caught.value)
    assert "partition-id is 0 of num-partitions 4, but the server's UserLevelDP has silos=3" in said
    assert '--node-config "partition-id=S num-partitions=3"' in said
    assert "or give UserLevelDP silos= the number of partitions" in said


def test_a_new_runs_setup_evicts_the_silo_cache_of_other_runs(app, server_identity):
    from uldp.trainers.flower import user_mod

    task, client_app, _ = app
    with pytest.raises(Stopped):  # the setups fill the cache; no round is needed
        start_run(LoopbackGrid(client_app.app, RUN_CONFIG, run_id=7, stop_at=1), task.Net())
    assert {key[0] for key in user_mod._CACHE} >= {7}
    with pytest.raises(Stopped):
        start_run(LoopbackGrid(client_app.app, RUN_CONFIG, run_id=8, stop_at=1), task.Net())
    assert {key[0] for key in user_mod._CACHE} == {8}
    assert len(user_mod._CACHE) == SILOS


@pytest.mark.parametrize(
    "settings, said",
    [
        ({"secure": True}, "secure: Protocol 1 computes the weights n_su / N_u of uldp-avg-w and"),
        ({"algo": "uldp-avg-w"}, "algo: uldp-avg-w weights each user by n_su / N_u, which a Flower app"),
        ({"algo": "uldp-sgd-w", "secure": False}, "computes only by Protocol 1: give secure=True"),
        ({"algo": "uldp-avg-w", "secure": True, "key_bits": 1024}, "key_bits 1024 < 2048 is insecure"),
        ({"algo": "uldp-naive"}, "algo must be one of uldp-avg, uldp-sgd, uldp-avg-w, uldp-sgd-w"),
        (
            {"algo": "uldp-avg-w", "secure": True, "key_bits": 512, "test_keys": "false"},
            "test_keys must be True",
        ),
        ({"secure": 1}, "secure must be True or False, got 1"),
        ({"batched": "false"}, "batched must be True or False, got 'false'"),
        ({"timeout": 0}, "timeout must be a number of seconds > 0"),
        ({"users": 0}, "users must be an integer >= 1"),
        ({"sigma": -1.0}, "sigma must be > 0"),
    ],
)
def test_settings_it_cannot_run_are_refused_in_one_line(settings, said):
    given = {"users": 40, "silos": SILOS, **settings}
    with pytest.raises(InvalidParameter, match=re.escape(said)) as caught:
        UserLevelDP(FedAvg(), **given)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "settings",
    [
        dict(algo="uldp-avg-w", sigma=1.0, lr=0.1),
        dict(algo="uldp-sgd-w", sigma=2.0, clip=0.5, lr=0.2, user_q=0.5, local_epochs=2),
    ],
    ids=["uldp-avg-w", "uldp-sgd-w-sampled"],
)
def test_the_w_algorithms_run_protocol_1_and_equal_the_local_engine(app, server_identity, settings, caplog):
    """ULDP-AVG-w / -SGD-w through the app: Protocol 1's setup and rounds as train messages the
    mod answers, the weighted sum equal to the in-process protocol's (`uldp train --secure`)."""
    from flwr.app import ArrayRecord

    task, client_app, _ = app
    seen: list[tuple[list, list]] = []

    def watch(messages, replies):
        seen.append((messages, replies))
        return replies

    secure = dict(secure=True, test_keys=True, key_bits=512)
    strategy = UserLevelDP(
        FedAvg(fraction_evaluate=0.0), users=40, silos=SILOS, noise_seed=1, **settings, **secure
    )
    torch.manual_seed(0)
    with caplog.at_level(logging.INFO, logger="flwr"):
        result = strategy.start(
            LoopbackGrid(client_app.app, RUN_CONFIG, tamper=watch), ArrayRecord(task.Net().state_dict()), 2
        )
    local = local_run(task, **settings, **secure)
    assert_same_run(strategy.history, result.arrays.to_torch_state_dict(), local)
    steps = [m[0].content["uldp"]["step"] for m, _ in seen if m]
    assert steps == ["setup", "protocol1", "protocol1", "protocol1", "round", "round"]
    # The server reads nothing of a silo's records in the clear: the setup reply says which silo
    # and the parameter names, each round's reply is one masked, encrypted envelope.
    for messages, replies in seen:
        for reply in replies:
            kinds = set(reply.content.keys())
            assert kinds <= {"uldp.setup", "protocol1", "reply"}, kinds
            assert not reply.content.array_records
            if "uldp.setup" in kinds:
                assert set(reply.content["uldp.setup"].keys()) == {"silo", "params"}
        # Nor are the silos told who is sampled (Protocol 1 step 2(a)): every user is marked.
        for message in messages:
            if message.content["uldp"]["step"] == "round":
                assert message.content["uldp.plan"]["sampled"].numpy().all()
    if settings.get("user_q", 1.0) < 1:
        assert all(0 < row["sampled_users"] < 40 for row in strategy.history)  # the server did sample
    said = caplog.text
    assert "uldp: assumes weights: w = n_su / N_u (Eq. 3) through Protocol 1" in said
    assert "Protocol 1 (ULDP-FL §4.1): the server decrypts only the sum over silos" in said
    assert "test_keys: Protocol 1 runs on small test keys, which are NOT secure" in said


def after_one_round(app) -> tuple[ClientApp, LoopbackGrid, Message]:
    """The converted app's ClientApp and grid after a one-round run, and that run's setup message."""
    task, client_app, _ = app
    kept: dict = {}

    def keep(messages, replies):
        if messages:
            kept.setdefault("setup", messages[0])
        return replies

    grid = LoopbackGrid(client_app.app, RUN_CONFIG, tamper=keep)
    torch.manual_seed(0)
    start_run(grid, task.Net(), rounds=1)
    return client_app, grid, kept["setup"]


def test_a_protocol_1_step_in_a_run_without_it_is_refused(app, server_identity):
    client_app, grid, setup = after_one_round(app)
    step = Message(setup.content, dst_node_id=100, message_type="train")
    step.content["uldp"]["step"] = "protocol1"
    step.metadata.__dict__["_message_id"] = "step"
    reply = client_app.app(step, grid.contexts[100])
    assert reply.content["uldp.error"]["message"] == "a Protocol 1 step arrived in a run without secure=True"


def test_a_runs_setup_sent_again_is_refused_and_never_replays_its_noise(app, server_identity):
    """A server (or anyone on the wire) that sends a run's setup again after round 1 would, were
    it taken, restart the run on the silo's cached entropy: round 1's noise again on another
    model. The silo sets a run up once."""
    client_app, grid, setup = after_one_round(app)
    again = Message(setup.content, dst_node_id=100, message_type="train")
    again.metadata.__dict__["_message_id"] = "again"
    reply = client_app.app(again, grid.contexts[100])
    job = setup.content["uldp"]["job"]
    assert reply.content["uldp.error"]["message"] == (
        f"run {job} was already set up on this silo; a silo sets up a run once"
    )


def test_each_start_draws_the_servers_entropy_afresh(app, server_identity):
    task, client_app, _ = app
    strategy = UserLevelDP(FedAvg(fraction_evaluate=0.0), users=40, silos=SILOS, sigma=1.0, user_q=0.5)
    drawn = []
    for _ in range(2):
        start_run(LoopbackGrid(client_app.app, RUN_CONFIG), task.Net(), strategy=strategy)
        drawn.append(strategy.cfg.noise_seed)
    assert drawn[0] != drawn[1] and not strategy.noise_fixed


def test_from_run_config_refuses_a_value_of_the_wrong_type_naming_the_key():
    from uldp.trainers.flower.user_strategy import _RUN_CONFIG_TYPES, RUN_CONFIG_KEYS

    assert set(_RUN_CONFIG_TYPES) == set(RUN_CONFIG_KEYS)
    base = {"users": 40, "silos": 3}
    for key, value, said in [
        ("test-keys", "false", "run config test-keys: expected true or false, got 'false'"),
        ("sigma", "1.0", "run config sigma: expected a number, got '1.0'"),
        ("users", 40.0, "run config users: expected an integer, got 40.0"),
        ("local-epochs", True, "run config local-epochs: expected an integer, got True"),
        ("noise-seed", 1.5, 'run config noise-seed: expected an integer, or "" for fresh noise, got 1.5'),
    ]:
        with pytest.raises(InvalidParameter) as refused:
            UserLevelDP.from_run_config(FedAvg(), {**base, key: value})
        assert str(refused.value) == said
    assert (
        UserLevelDP.from_run_config(FedAvg(), {**base, "local-batch-size": ""}).cfg.local_batch_size is None
    )
    assert UserLevelDP.from_run_config(FedAvg(), {**base, "local-batch-size": 4}).cfg.local_batch_size == 4


def test_from_run_config_reads_flowers_keys_and_keywords_win():
    run_config = {
        "users": 40,
        "silos": 3,
        "sigma": 2.0,
        "user-q": 0.5,
        "lr": 0.2,
        "local-epochs": 2,
        "algo": "uldp-sgd",
        "noise-seed": "",
        "batch-size": 32,
        "num-server-rounds": 3,
    }
    strategy = UserLevelDP.from_run_config(FedAvg(), run_config, clip=0.5)
    cfg = strategy.cfg
    assert (cfg.algo, cfg.sigma, cfg.user_q, cfg.lr, cfg.local_epochs, cfg.clip) == (
        "uldp-sgd",
        2.0,
        0.5,
        0.2,
        2,
        0.5,
    )
    assert (strategy.n_users, strategy.n_silos, strategy.noise_fixed) == (40, 3, False)
    assert cfg.local_batch_size is None  # the app's batch-size is its own loaders'
    assert UserLevelDP.from_run_config(FedAvg(), run_config, sigma=3.0).cfg.sigma == 3.0
    secure = UserLevelDP.from_run_config(
        FedAvg(), {**run_config, "algo": "uldp-avg-w", "secure": True, "key-bits": 2048}
    )
    assert (secure.cfg.algo, secure.cfg.secure, secure.cfg.key_bits) == ("uldp-avg-w", True, 2048)
    with pytest.raises(InvalidParameter, match=r"^silos: the run config has no 'silos'; add `silos = N`"):
        UserLevelDP.from_run_config(FedAvg(), {"users": 40})


def test_importing_uldp_and_uldp_flower_loads_no_flower():
    code = "import sys, uldp, uldp.flower; print(sorted(m for m in ('flwr', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def app_diff() -> str:
    """The unified diff (3 lines of context) from the original app to the converted one."""
    out = []
    for path in sorted(p for p in ORIGINAL.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        relative = path.relative_to(ORIGINAL)
        before = path.read_text().splitlines(keepends=True)
        after = (CONVERTED / relative).read_text().splitlines(keepends=True)
        out += difflib.unified_diff(before, after, f"own_app/{relative}", f"own_app_uldp/{relative}")
    return "".join(out)


def test_docs_show_the_apps_real_diff_and_it_stays_small():
    converted = {p.relative_to(CONVERTED) for p in CONVERTED.rglob("*") if "__pycache__" not in p.parts}
    original = {p.relative_to(ORIGINAL) for p in ORIGINAL.rglob("*") if "__pycache__" not in p.parts}
    assert converted == original  # the same files; only some lines differ
    diff = app_diff()
    doc = (ROOT / "docs" / "flower.md").read_text()
    shown = re.search(r"## Your own Flower app.*?```diff\n(.*?)```", doc, re.S)
    assert shown is not None and shown.group(1) == diff
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert len(changed) <= 22


# ------------------------------------------------------------------------ slow: real engines


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_marked(mark: str) -> None:
    """End the processes this test started (the detached local SuperLink, its SuperExec, the
    simulation's Ray processes): all carry `mark` in their environment."""
    for attempt in (signal.SIGTERM, signal.SIGKILL):
        for line in processes_marked(mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split(":")[0]), attempt)
        deadline = time.monotonic() + 15
        while processes_marked(mark) and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.mark.slow
def test_flwr_run_in_simulation_gives_the_local_engines_run(app, tmp_path):
    """`flwr run examples/flower/own_app_uldp local` with ULDP-AVG-w under Protocol 1: Flower's
    managed local SuperLink runs the app on its simulation engine (Ray), one simulated SuperNode
    per partition."""
    task = app[0]
    mark = new_mark()
    bin_dir = Path(sys.executable).parent
    env = {
        **marked_env(mark),
        "FLWR_HOME": str(tmp_path / "flwr-home"),  # Flower's config and its local SuperLink's files
        "FLWR_TELEMETRY_ENABLED": "0",
        "FLWR_DISABLE_UPDATE_CHECK": "1",
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(free_port()),
        "FLWR_LOCAL_CONTROL_API_PORT": str(free_port()),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",  # this interpreter's Flower
    }
    # ULDP-AVG-w through Protocol 1 (test-sized keys), chosen in the app's run config as a user
    # would: Flower accepts --run-config overrides only for keys the app declares, so the copy
    # declares them. The TLS deployment below runs the example as it is (ULDP-AVG).
    copy = tmp_path / "own_app_uldp"
    shutil.copytree(CONVERTED, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "pyproject.toml", "a") as config:
        config.write('algo = "uldp-avg-w"\nsecure = true\ntest-keys = true\nkey-bits = 512\n')
    final = tmp_path / "final.pt"
    command = [str(bin_dir / "flwr"), "run", str(copy), "local", "--stream"]
    command += ["--federation-config", f"num-supernodes={SILOS}"]
    # One round, no evaluation: what `flwr run` adds is shown by one; two rounds' equality is the
    # fast tests'.
    command += [
        "--run-config",
        f"noise-seed=1 num-server-rounds=1 fraction-evaluate=0.0 final-model='{final}'",
    ]
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=500)
    finally:
        stop_marked(mark)
    assert proc.returncode == 0 and final.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "uldp: Protocol 1 set up in" in proc.stdout
    secure = dict(algo="uldp-avg-w", secure=True, test_keys=True, key_bits=512)
    local = local_run(task, sigma=1.0, lr=0.1, rounds=1, **secure)
    for row in local.history:
        assert f"uldp: round {row['round']}: user-level epsilon {row['epsilon']:.4g}" in proc.stdout
    params = torch.load(final)
    for name, value in local.params.items():
        assert params[name] == pytest.approx(value, abs=1e-6, rel=1e-6), name
    assert processes_marked(mark) == []


@pytest.mark.slow
def test_in_a_loopback_tls_deployment_flwr_run_gives_the_local_engines_run(tmp_path):
    """`flwr run examples/flower/own_app_uldp` on a SuperLink with TLS and SuperNode
    authentication, one SuperNode per partition (examples/flower/federation.py)."""
    from tests.flower.test_deployment_harness import HARNESS, assert_all_gone, harness_env, write_silos

    env, tag = harness_env(tmp_path)
    final = tmp_path / "final.pt"
    command = [sys.executable, str(HARNESS), "--app", str(CONVERTED)]
    command += write_silos(tmp_path, *["unused: the app makes its own records\n"] * SILOS)
    # One round and no evaluation: a deployment starts a process per message (about 5 s each on
    # 2 cores), and one round shows the same as two (the rounds' equality: the fast tests).
    command += ["--run-config", "noise-seed=1", "--run-config", "num-server-rounds=1"]
    command += ["--run-config", "fraction-evaluate=0.0", "--run-config", f"final-model='{final}'"]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sys.path.insert(0, str(CONVERTED))
    try:
        from ownapp import task
    finally:
        sys.path.remove(str(CONVERTED))
    local = local_run(task, sigma=1.0, lr=0.1, rounds=1)
    for row in local.history:
        assert f"uldp: round {row['round']}: user-level epsilon {row['epsilon']:.4g}" in proc.stdout
    params = torch.load(final)
    for name, value in local.params.items():
        assert params[name] == pytest.approx(value, abs=1e-6, rel=1e-6), name
    assert_all_gone(tag, tmp_path)
