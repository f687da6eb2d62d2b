"""A silo as a Flower ClientApp: it holds its own records and secrets, and answers the server.

The silo's work is the registered algorithm's `silo_update` (trainers/algorithms), run on the
silo's own copy of the algorithm (built by the same factory, with no other silo's data, and
given by the server only what `silo_state` says it needs); nothing of the algorithm is written
again here. Each message is one function call (`ClientApp`), possibly in another worker process
than the last, so everything the silo must remember between messages lives in the node's own
Flower `context.state` (never sent anywhere): the run's settings, the path of its data, its noise
entropy, its algorithm state and its Protocol 1 party. What is costly to rebuild (the tensors,
the model: its `working_set.WorkingSet`) is cached per process.

Messages (records.py): setup (settings in, record count and, if the algorithm's server reads
them, the record owners out), silo state, Protocol 1 setup steps, rounds, and a phased
algorithm's phases (their keepsakes between phases in the node's state, like Protocol 1's party).

Randomness: silo s draws round t's noise and sampling from round_rngs(entropy, t)[1][s] (the same
stream as in process). The entropy is the run's --noise-seed when the user fixed it (then the
server sends it, and the run is reproducible, not private against whoever knows it), otherwise
128 bits the silo draws from `secrets` and never sends: the server cannot remove a silo's noise.
Nor can it make a silo draw the same noise twice: a silo sets a run (its job) up once, answers
each round once and in order, and each phase of a round once; a message asking again is refused.
"""

from __future__ import annotations

import functools
import json
import secrets
import types
from collections.abc import Callable
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from uldp.errors import ProtocolError, UldpError

from . import records
from .protocol1 import PARTY as _PARTY  # the Protocol 1 party, as bytes
from .replays import check_phase, check_round, set_up_once
from .working_set import WorkingSet

app = ClientApp()

_STATE = "uldp"  # ConfigRecord in context.state: the run as the silo knows it
_SILO_STATE = "uldp_silo_state"  # ArrayRecord: the algorithm's silo state from the server
_PHASE_STORE = "uldp_phase_store"  # ArrayRecord: what a phased algorithm keeps between its phases


# (run, node, job) -> working set. A job is one training run of the server's: a Flower run may
# hold several (a server restarted on the same SuperNodes, or tests), and a worker process that
# served an earlier job must not use its tensors or algorithm state for a later one.
_CACHE: dict[tuple[int, int, str], WorkingSet] = {}


def _cache_key(context: Context) -> tuple[int, int, str]:
    return (context.run_id, context.node_id, str(context.state[_STATE]["job"]))


Handler = Callable[[Message, Context], Message]


def _refusals(handler: Handler) -> Handler:
    """A message this silo cannot use (bad settings, its data unreadable, a protocol check that
    fails) is answered with its refusal in one line, which the server reports by silo and round;
    anything else is a bug, and Flower reports the ClientApp's failure."""

    @functools.wraps(handler)
    def wrapped(message: Message, context: Context) -> Message:
        try:
            return handler(message, context)
        except (UldpError, ValueError, KeyError) as error:
            text = " ".join(str(error).split()) or type(error).__name__
            return Message(RecordDict({"error": ConfigRecord({"message": text})}), reply_to=message)

    return wrapped


def _silo_id(context: Context) -> int:
    value = context.node_config.get("partition-id")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolError(
            f"this SuperNode has no partition-id in its node config (got {value!r}); start it with "
            "--node-config \"partition-id=S data-file='silo-S.npz'\""
        )
    return value


@app.query("uldp_setup")
@_refusals
def setup(message: Message, context: Context) -> Message:
    """Take the run's settings, find this silo's data, draw its entropy, say how many records."""
    run: Any = message.content["run"]
    silo = _silo_id(context)
    if int(run["silos"]) <= silo:
        raise ProtocolError(f"partition-id {silo} is not a silo of {run['silos']}")
    data_file = context.node_config.get("data-file")
    if data_file is None:  # simulation: the run's private partition directory
        from .partitions import partition_name

        if not run.get("partitions"):
            raise ProtocolError("this SuperNode has no data-file in its node config")
        data_file = f"{run['partitions']}/{partition_name(silo)}"
    if run.get("owners") and json.loads(str(run["config"])).get("secure"):
        raise ProtocolError("the server asked for the record owners in a --secure run; refused")
    seed = run.get("noise_seed", "")
    entropy = int(seed) if seed else secrets.randbits(128)
    set_up_once(context, str(run["job"]))
    state = dict(run)
    # answered: the last round this silo answered; phases: the (round, phase) pairs it answered.
    state.update(
        {"silo": silo, "data_file": str(data_file), "entropy": str(entropy), "answered": 0, "phases": []}
    )
    context.state[_STATE] = ConfigRecord(state)
    context.state.pop(_SILO_STATE, None)
    context.state.pop(_PARTY, None)
    context.state.pop(_PHASE_STORE, None)
    working = _working_set(context, cache=False)  # the silo state may still come
    content = RecordDict({"setup": ConfigRecord({"silo": silo, "records": working.data.size})})
    if run.get("owners"):  # the algorithm's server reads them (plaintext -w, uldp-group)
        content["owners"] = records.arrays({"users": working.data.users})
    return Message(content, reply_to=message)


@app.query("uldp_silo_state")
@_refusals
def silo_state(message: Message, context: Context) -> Message:
    """Keep what the server decided for this silo before round 1 (uldp-group's flags)."""
    record = message.content["state"]
    if not isinstance(record, ArrayRecord):
        raise ProtocolError("the silo state is not an array record")
    context.state[_SILO_STATE] = record
    working = _working_set(context, cache=False)  # refuses a state the algorithm does not take
    return Message(RecordDict({"ack": ConfigRecord({"silo": working.data.silo})}), reply_to=message)


@app.query("uldp_protocol1")
@_refusals
def protocol1(message: Message, context: Context) -> Message:
    """One setup step of Protocol 1 at this silo (protocol1.py runs the steps)."""
    from .protocol1 import silo_step

    return Message(silo_step(message.content, context, _working_set(context)), reply_to=message)


@app.train("uldp_round")
@_refusals
def train_round(message: Message, context: Context) -> Message:
    """Round t: the algorithm's silo update on this silo's records, as the server's algorithm
    expects it (in the clear, or masked and encrypted under Protocol 1)."""
    from ..round_rngs import round_rngs

    working = _working_set(context)
    content_in: Any = message.content
    header = content_in["round"]
    t = int(header["round"])
    state: Any = context.state[_STATE]
    check_round(state, t)
    n_silos, silo = working.ctx.n_silos, working.data.silo
    params = records.read_params(content_in["params"], working.like)
    plan = records.read_plan(content_in["plan"], t, silo, n_silos, working.ctx.n_users)
    _, rngs = round_rngs(working.entropy, t, n_silos)
    update = working.algorithm.silo_update(working.data, params, plan, working.ctx, working.cfg, rngs[silo])
    state["answered"] = t  # before the reply leaves: this round's noise is spent
    if working.cfg.secure:
        from .protocol1 import masked_reply

        content = masked_reply(content_in, context, working, update, t)
    else:
        content = records.reply_record(update, t)
    return Message(content, reply_to=message)


@app.query("uldp_phase")
@_refusals
def phase(message: Message, context: Context) -> Message:
    """One phase of a phased algorithm's round (dp-fedavg-robust's upload, calibration and secure
    aggregation steps): the algorithm's `silo_phase`, its keepsakes in this node's state."""
    from ..round_rngs import phase_rng

    working = _working_set(context)
    content_in: Any = message.content
    header = content_in["phase"]
    t, name, silo = int(header["round"]), str(header["name"]), working.data.silo
    if int(header["silo"]) != silo:
        raise ProtocolError(f"a phase message for silo {header['silo']} reached silo {silo}")
    state: Any = context.state[_STATE]
    done = check_phase(state, t, name)
    payload = records.read_arrays(content_in["payload"], set(content_in["payload"].keys()), "the phase")
    stored: Any = context.state.get(_PHASE_STORE)
    store = {} if stored is None else {key: stored[key].numpy() for key in stored.keys()}
    rng = phase_rng(working.entropy, t, silo, name)
    reply = working.algorithm.silo_phase(working.data, name, t, payload, store, working.ctx, working.cfg, rng)
    state["phases"] = [*done, f"{t}:{name}"]
    context.state[_PHASE_STORE] = records.arrays(store)
    content = RecordDict(
        {"phase": ConfigRecord({"round": t, "silo": silo, "name": name}), "reply": records.arrays(reply)}
    )
    return Message(content, reply_to=message)


def _working_set(context: Context, *, cache: bool = True) -> WorkingSet:
    """This silo's settings, records, model and algorithm for the run, from context.state.

    Cached per worker process only once setup is over (rounds and Protocol 1 steps come after
    the silo state, so a cached set never misses it)."""
    if _STATE not in context.state:
        raise ProtocolError("a round arrived before the setup message")
    key = _cache_key(context)
    if key in _CACHE:
        return _CACHE[key]
    import torch

    from ..algorithms import TrainConfig, make_algorithm
    from ..algorithms.base import Context as AlgoContext
    from ..algorithms.base import SiloData
    from ..models import parameter_count
    from ..own_model import resolve_model
    from .partitions import read_partition

    state: Any = context.state[_STATE]
    cfg = TrainConfig(**json.loads(str(state["config"])))
    task, silo, n_users = str(state["task"]), int(state["silo"]), int(state["users"])
    values = read_partition(str(state["data_file"]), silo, n_users, task, str(state["federation"]))
    label = torch.float32 if task == "survival" else torch.long
    data = SiloData(
        silo=silo,
        x=torch.as_tensor(values["x"], dtype=torch.float32),
        y=torch.as_tensor(values["y"], dtype=label),
        users=np.asarray(values["users"], dtype=np.int64),
        n_users=n_users,
        q=None if "q" not in values else np.asarray(values["q"], dtype=np.float64),
    )
    # The model and loss from their references (a built-in name, or the user's FILE.py:NAME or
    # module:NAME, trainers/own_model.py), under the run's seed: a factory that draws a constant
    # buffer draws the server's.
    described = types.SimpleNamespace(
        name="",
        task=task,
        feature_shape=tuple(int(v) for v in json.loads(str(state["feature_shape"]))),
        n_classes=int(state["n_classes"]),
    )
    spec = resolve_model(str(state["model"]), data=described, loss=str(state.get("loss", "")) or None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = spec.factory()
    ctx = AlgoContext(model, spec.loss, n_users, int(state["silos"]), parameter_count(model), None)
    algorithm = make_algorithm(cfg, [], task)
    if _SILO_STATE in context.state:
        stored: Any = context.state[_SILO_STATE]
        algorithm.load_silo_state(silo, {name: stored[name].numpy() for name in stored.keys()})
    like = {k: v.detach() for k, v in model.named_parameters()}
    working = WorkingSet(cfg, data, ctx, algorithm, like, int(state["entropy"]))
    if cache:
        _CACHE[key] = working
    return working
