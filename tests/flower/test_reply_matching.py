"""How the ServerApp files a round's replies, with Flower's own Message objects and a Grid that
answers as Flower 1.41's SuperLink does, no deployment needed: a reply belongs to the message it
answers (`reply_to_message_id`), whatever its `src_node_id`. The SuperLink answers for a
SuperNode that went offline itself, from its own node id (SUPERLINK_NODE_ID), with
ErrorCode.NODE_UNAVAILABLE (issue 32: that node was reported as "did not answer within 600 s").
"""

from __future__ import annotations

import logging
import uuid

import pytest

pytest.importorskip("flwr", reason="the 'flower' extra is not installed")  # CI installs it

from click.testing import CliRunner  # noqa: E402
from flwr.app import ConfigRecord, Context, Error, Message, RecordDict  # noqa: E402
from flwr.common.constant import SUPERLINK_NODE_ID, ErrorCode  # noqa: E402
from flwr.server.superlink.linkstate.utils import (  # noqa: E402
    create_message_error_unavailable_res_message,
)
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

from uldp.cli import flower_app  # noqa: E402
from uldp.cli.main import cli  # noqa: E402
from uldp.trainers.flower import records  # noqa: E402
from uldp.trainers.flower.records import RunDescription  # noqa: E402
from uldp.trainers.flower.server import FlowerSilos  # noqa: E402

NODES = {0: 4101, 1: 4102, 2: 4103}  # silo -> SuperNode id
DESCRIPTION = RunDescription(
    task="binary",
    model="logistic",
    feature_shape=(3,),
    n_classes=2,
    n_users=4,
    n_silos=len(NODES),
    n_params=4,
    federation="test",
)
UNAVAILABLE = "Node Unavailable"  # Flower's reason: NODE_UNAVAILABLE_ERROR_REASON


@pytest.fixture(autouse=True)
def task_identity(monkeypatch):
    """Flower 1.41 stamps every Message with the running task's ids, which a ServerApp process
    has and a test does not."""
    for name, value in (("_run_id", 17), ("_node_id", SUPERLINK_NODE_ID), ("_task_id", 3)):
        monkeypatch.setattr(TaskIdentity, name, value)


class SuperLinkGrid:
    """A Grid whose SuperNodes answer as `behaviour` says: "ok" (the ClientApp's reply, from the
    node), "offline" (the SuperLink's NODE_UNAVAILABLE reply, from the SuperLink, as
    `linkstate.utils.check_node_availability_for_in_message` makes it) or "raised" (an error
    reply of the node's ClientApp). `stale` replies, to messages of an earlier exchange, come
    first in every pull."""

    def __init__(self, behaviour: dict[int, str], stale: list[Message] | None = None) -> None:
        self.behaviour = behaviour
        self.stale = stale or []
        self.sent: dict[str, Message] = {}

    def get_node_ids(self) -> list[int]:
        return sorted(self.behaviour)

    def push_messages(self, messages) -> list[str]:
        ids = []
        for message in messages:
            message.metadata.__dict__["_message_id"] = str(uuid.uuid4())  # as InMemoryGrid does
            self.sent[message.metadata.message_id] = message
            ids.append(message.metadata.message_id)
        return ids

    def pull_messages(self, message_ids) -> list[Message]:
        replies = list(self.stale)
        for id in message_ids:
            message = self.sent[id]
            kind = self.behaviour[message.metadata.dst_node_id]
            if kind == "offline":
                replies.append(create_message_error_unavailable_res_message(message.metadata, "node_unavail"))
            elif kind == "raised":
                error = Error(ErrorCode.CLIENT_APP_RAISED_EXCEPTION, "<class 'ValueError'>:<'bad data'>")
                replies.append(Message(error, reply_to=message))
            else:
                answer = ConfigRecord({"node": message.metadata.dst_node_id})
                replies.append(Message(RecordDict({"answer": answer}), reply_to=message))
        return replies


def silos_on(grid: SuperLinkGrid) -> FlowerSilos:
    silos = FlowerSilos(grid, DESCRIPTION, timeout=60.0)  # every test here ends long before
    silos.nodes = dict(NODES)
    return silos


def question(round: int) -> dict[int, RecordDict]:
    return {s: RecordDict({"round": ConfigRecord({"round": round, "silo": s})}) for s in NODES}


def test_the_superlinks_reply_for_an_offline_node_names_that_node_and_flowers_reason():
    grid = SuperLinkGrid({4101: "ok", 4102: "offline", 4103: "ok"})
    with pytest.raises(records.SiloFailed) as failed:
        silos_on(grid).exchange(question(2), records.ROUND, 2)
    message = str(failed.value)
    assert message.startswith(
        "silo 1 (SuperNode 4102) failed in round 2: NODE_UNAVAILABLE (Flower error code 5): " + UNAVAILABLE
    ), message
    assert "did not answer" not in message and "Error:" not in message  # the CLI adds its own
    assert "\n" not in message and failed.value.parties == ["silo 1 (SuperNode 4102)"]


def test_a_clientapps_error_reply_names_its_silo_node_and_code():
    grid = SuperLinkGrid({4101: "raised", 4102: "ok", 4103: "ok"})
    with pytest.raises(records.SiloFailed) as failed:
        silos_on(grid).exchange(question(3), records.ROUND, 3)
    assert str(failed.value) == (
        "silo 0 (SuperNode 4101) failed in round 3: "
        "CLIENT_APP_RAISED_EXCEPTION (Flower error code 2): ValueError: bad data"
    )


def test_replies_are_filed_by_the_message_they_answer_and_stale_ones_are_ignored():
    earlier = SuperLinkGrid({4101: "ok", 4102: "ok", 4103: "ok"})
    old = silos_on(earlier)
    old.exchange(question(1), records.ROUND, 1)
    # The same nodes' answers to round 1, pulled again during round 2: not round 2's answers.
    stale = earlier.pull_messages(list(earlier.sent))
    grid = SuperLinkGrid({4101: "ok", 4102: "ok", 4103: "ok"}, stale=stale)
    out = silos_on(grid).exchange(question(2), records.ROUND, 2)
    assert sorted(out) == [0, 1, 2]
    assert {s: out[s]["answer"]["node"] for s in out} == NODES
    assert {m.metadata.group_id for m in grid.sent.values()} == {"2"}


def test_a_node_offline_in_a_phase_is_a_dropout_of_the_phased_algorithm():
    """dp-fedavg-robust's phases go on with the survivors (missing_ok): an offline SuperNode is
    left out as a silent one is, not a failure."""
    grid = SuperLinkGrid({4101: "ok", 4102: "offline", 4103: "ok"})
    out = silos_on(grid).exchange(question(2), records.PHASE, 2, missing_ok=True)
    assert sorted(out) == [0, 2]


def test_setup_names_the_offline_supernode():
    grid = SuperLinkGrid({4101: "ok", 4102: "ok", 4103: "offline"})
    contents = {node: RecordDict({"q": ConfigRecord({"x": 1})}) for node in NODES.values()}
    with pytest.raises(records.SiloFailed, match=r"^SuperNode 4103 failed in setup: NODE_UNAVAILABLE"):
        silos_on(grid).exchange(contents, records.SETUP, 0, by_node=True)


CODES = sorted(value for name, value in vars(ErrorCode).items() if name.isupper() and isinstance(value, int))


@pytest.mark.parametrize("code", CODES)
@pytest.mark.parametrize("source", ["superlink", "node", "another node"])
def test_every_error_reply_is_filed_under_the_silo_its_question_went_to(code, source):
    """Hostile and odd error replies: any Flower error code, sent from the SuperLink, from the
    node itself or from another silo's node; the failure always names silo 2 (the node asked),
    in one line, and the reason is cut to a line however long it is."""

    class Odd(SuperLinkGrid):
        def pull_messages(self, message_ids) -> list[Message]:
            replies = []
            for reply in super().pull_messages(message_ids):
                if self.sent[reply.metadata.reply_to_message_id].metadata.dst_node_id == 4103:
                    reason = "Error: it broke.\n" + "x" * 5000
                    reply = Message(
                        Error(code, reason), reply_to=self.sent[reply.metadata.reply_to_message_id]
                    )
                    src = {"superlink": SUPERLINK_NODE_ID, "node": 4103, "another node": 4101}[source]
                    reply.metadata.__dict__["_src_node_id"] = src
                replies.append(reply)
            return replies

    with pytest.raises(records.SiloFailed) as failed:
        silos_on(Odd({4101: "ok", 4102: "ok", 4103: "ok"})).exchange(question(4), records.ROUND, 4)
    message = str(failed.value)
    assert failed.value.parties == ["silo 2 (SuperNode 4103)"], message
    assert "failed in round 4: " in message and f"(Flower error code {code}): it broke" in message
    assert "\n" not in message and len(message) < 400


def test_a_message_the_superlink_refused_is_named_at_once():
    """Flower's grid returns None for a message it could not push (in order): that node is
    named at once, not waited for."""

    class Refusing(SuperLinkGrid):
        def push_messages(self, messages) -> list[str]:
            ids = super().push_messages(messages)
            return [None if self.sent[id].metadata.dst_node_id == 4103 else id for id in ids]

    with pytest.raises(records.SiloFailed, match=r"^silo 2 \(SuperNode 4103\) could not be reached"):
        silos_on(Refusing({4101: "ok", 4102: "ok", 4103: "ok"})).exchange(question(2), records.ROUND, 2)


# --- what the user sees ----------------------------------------------------------------------

FAILED = records.SiloFailed(
    ["silo 1 (SuperNode 4102)"], 2, "failed", "NODE_UNAVAILABLE (Flower error code 5): Node Unavailable"
)
TRAIN = ["train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "2"]


def _fail_in_round_2(*args, **kwargs):
    raise FAILED


def test_uldp_train_prints_a_failed_silo_in_one_line_with_status_2_and_no_usage(monkeypatch):
    import uldp.trainers.runner as runner

    monkeypatch.setattr(runner, "train", _fail_in_round_2)
    result = CliRunner().invoke(cli, TRAIN)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"Error: {FAILED}"]


def test_a_failed_party_is_not_a_usage_error():
    """Exit status 2 and one line like bad input, but not Click's UsageError, whose `show()` (the
    ServerApp's way of printing it before) adds the usage lines."""
    import click

    from uldp.cli.errors import library_errors

    with pytest.raises(click.ClickException) as raised, library_errors():
        raise FAILED
    assert not isinstance(raised.value, click.UsageError)
    assert raised.value.exit_code == 2 and raised.value.format_message() == str(FAILED)


def test_the_deployed_serverapp_prints_one_error_line_and_no_usage_or_traceback(monkeypatch, capsys):
    """uldp.cli.flower_app, as Flower runs it: one `Error:` line (no Click usage text), the run
    fails with RunFailed, and Flower's log of it carries no traceback."""
    import uldp.trainers.runner as runner

    monkeypatch.setattr(runner, "train", _fail_in_round_2)
    context = Context(
        run_id=17,
        node_id=SUPERLINK_NODE_ID,
        node_config={},
        state=RecordDict(),
        run_config={"train-args": " ".join(TRAIN[1:])},
    )
    with pytest.raises(flower_app.RunFailed) as stopped:
        flower_app.main(object(), context)
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"Error: {FAILED}"]
    # What flwr.superlink.runtime.run_serverapp logs for a ServerApp that raised.
    logger = logging.getLogger("flwr")
    record = logger.makeRecord(
        "flwr", logging.ERROR, __file__, 1, "%s raised an exception", ("ServerApp",), None
    )
    record.exc_info = (type(stopped.value), stopped.value, stopped.value.__traceback__)
    assert all(f.filter(record) for f in logger.filters)
    assert "Traceback" not in logging.Formatter().format(record)
    # Any other exception keeps its traceback: that would be a bug to report.
    try:
        raise KeyError("bug")
    except KeyError as bug:
        other = logger.makeRecord(
            "flwr", logging.ERROR, __file__, 1, "x", (), (KeyError, bug, bug.__traceback__)
        )
    assert all(f.filter(other) for f in logger.filters)
    assert "Traceback" in logging.Formatter().format(other)
