"""A silo that misbehaves on purpose, for the fault tests: uldp's own ClientApp, except in the
runs whose --sigma is one of `FAULTS` (a marker no other test uses), where the silo named there
crashes (its worker process exits), stalls past the server's timeout (in a round, or in
dp-fedavg-robust's upload phase), or answers a malformed message in the round named there.
Ray's workers import it by name (tests.flower.faulty_app)."""

from __future__ import annotations

import json
import os
import time

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.clientapp import ClientApp

from uldp.trainers.flower import client_app as real
from uldp.trainers.flower import records

# sigma -> (silo, round, fault)
FAULTS = {  # in the order the tests run them: a crashed worker is not restarted, so it comes last
    7.02: (2, 1, "wrong-shape"),
    7.03: (0, 1, "wrong-kind"),
    7.04: (1, 1, "non-finite"),
    7.05: (2, 2, "other-silo"),
    7.06: (1, 1, "stall"),
    7.07: (1, 3, "stall-upload"),  # dp-fedavg-robust: a silo silent in its upload phase drops out
    7.01: (1, 2, "crash"),
}

# How long the stalling silo sleeps: twice the server's timeout in the fault test (5 s), but
# not a minute: the simulation's shutdown waits for the sleeping worker (it was 55 s of the
# fixture's 90 s when the silo slept 60 s).
STALL_S = 10.0

app = ClientApp()


def _fault(context) -> tuple[int, int, str] | None:
    state = context.state.get("uldp")
    if state is None:
        return None
    sigma = json.loads(str(state["config"]))["sigma"]
    return FAULTS.get(sigma)


@app.query("uldp_setup")
def setup(message, context):
    return real.setup(message, context)


@app.query("uldp_silo_state")
def silo_state(message, context):
    return real.silo_state(message, context)


@app.query("uldp_protocol1")
def protocol1(message, context):
    return real.protocol1(message, context)


@app.query("uldp_phase")
def phase(message, context):
    fault = _fault(context)
    if fault is not None and fault[2] == "stall-upload":
        silo, round, _ = fault
        header = message.content["phase"]
        if (int(context.state["uldp"]["silo"]), int(header["round"]), str(header["name"])) == (
            silo,
            round,
            "upload",
        ):
            time.sleep(STALL_S)
    return real.phase(message, context)


@app.train("uldp_round")
def train_round(message, context):
    reply = real.train_round(message, context)
    fault = _fault(context)
    if fault is None:
        return reply
    silo, round, kind = fault
    if int(context.state["uldp"]["silo"]) != silo or int(message.content["round"]["round"]) != round:
        return reply
    if kind == "crash":
        os._exit(1)
    if kind == "stall":
        time.sleep(STALL_S)
        return reply
    delta = reply.content["message"]["delta"].numpy()
    header = dict(reply.content["reply"])
    if kind == "wrong-shape":
        values = {"delta": delta[:-1]}
    elif kind == "non-finite":
        delta[0] = float("nan")
        values = {"delta": delta}
    else:
        values = {"delta": delta}
    if kind == "wrong-kind":
        header["kind"] = "user-deltas"
    if kind == "other-silo":
        header["silo"] = (silo + 1) % 3
    return Message(
        RecordDict({"reply": ConfigRecord(header), "message": records.arrays(values)}), reply_to=message
    )
