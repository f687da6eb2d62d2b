"""User-level DP for a user's own Flower ClientApp: `user_level_mod`, a Flower mod.

Flower adds client-level DP to an existing app with a mod (`ClientApp(mods=[fixedclipping_mod])`)
that clips the update the app's own `train` handler returns. User-level DP (ULDP-FL §3,
Algorithm 3) cannot be added after the fact: each user's delta must be trained on that user's
records alone and clipped before the silo sums them. So this mod answers the train messages
that `user_strategy.UserLevelDP` sends (they carry a ConfigRecord "uldp") itself, with the
registered algorithm's own `silo_update` (trainers/algorithms: per-user training, clipping,
weighting and the silo's noise share), exactly as uldp's own ClientApp (client_app.py) does; every
other message (evaluate, query, a train message of another strategy) goes on to the app's
own handlers.

What the mod needs of the app: its model factory, its loss (None: the task's), and a function
giving this silo's training records with a user id per record, `(x, y, users)`, called with
the keywords it names among `context`, `partition_id`, `num_partitions`, `node_config` and
`run_config`. User ids are integers in [0, users), the same user the same id in every silo.

Its train messages (records kept in `user_strategy`'s words):

- setup: the run's settings and the initial model (every array: the silo keeps its buffers,
  which the rounds never send) in; this silo's number (its node config's `partition-id`) and
  the model's parameter names out, nothing of its records. The silo draws its noise entropy
  here (128 bits from `secrets`, never sent) unless the server sent a fixed noise seed
  (experiments). A run (its `job`) is set up once per node: set up again, it would restart
  at round 1 on the same entropy.
- protocol1 (only with the server's `secure=True`, three before round 1): one setup step of
  Protocol 1 (ULDP-FL §4.1) at this silo, `protocol1.silo_step`: its party from its own counts
  n_{s,.}, kept in the node's state between messages.
- round t: the global model and the round's plan in (records.py's own records), the algorithm's
  message out (under Protocol 1 masked and encrypted, `protocol1.masked_reply`); silo s draws
  from round_rngs(entropy, t)[1][s], the in-process stream. A round
  at or below the last one answered is refused: answering it again would send the same noise
  draw on another model, and the difference of two replies has none.

The records and model are cached per worker process (Flower may call each message in another
process; the node's `context.state` keeps the settings, the entropy, the model's buffers and
the last round answered between messages).
"""

from __future__ import annotations

import copy
import functools
import json
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MessageType, RecordDict

from uldp.errors import DataError, InvalidParameter, ProtocolError, UldpError

from . import records as wire
from .protocol1 import PARTY
from .replays import check_round, set_up_once
from .working_set import WorkingSet

if TYPE_CHECKING:
    from flwr.clientapp.typing import ClientAppCallable, Mod
    from torch import nn

# Records of the train messages between `UserLevelDP` and this mod.
SETTINGS = "uldp"  # ConfigRecord: step ("setup" or "round"), the run's settings, the round
PARAMS = "uldp.params"  # ArrayRecord: the global model's parameters
PLAN = "uldp.plan"  # ArrayRecord: records.plan_record of the round
SETUP = "uldp.setup"  # ConfigRecord reply: silo, parameter names
REFUSED = "uldp.error"  # ConfigRecord reply: why the silo refused the message, one line

_STATE = "uldp.user_mod"  # ConfigRecord in context.state: the run as this silo knows it
_BUFFERS = "uldp.user_mod.buffers"  # ArrayRecord in context.state: the model's arrays the rounds omit

# (run, node, job) -> working set, per worker process.
_CACHE: dict[tuple[int, int, str], WorkingSet] = {}

RecordsFn = Callable[..., Any]


def user_level_mod(model: Any, records: RecordsFn, *, loss: Any = None, task: str | None = None) -> Mod:
    """A Flower mod that trains `UserLevelDP`'s rounds with per-user clipping (ULDP-AVG, -SGD;
    their -w variants through Protocol 1).

    `model`: the app's model as a factory (its class, or a function; called with the keywords it
    names among `feature_shape` and `task`), an `nn.Module` (deep-copied) or a reference
    `FILE.py:NAME` / `package.module:NAME`. `records`: this silo's training records,
    `(x, y, users)` (arrays or tensors), called with the keywords it names among `context`,
    `partition_id`, `num_partitions`, `node_config`, `run_config`. `loss`: None (the task's
    loss), a name ("cross_entropy", "binary_cross_entropy", "cox", "mse"), a reference, a
    2-argument mean loss such as `nn.CrossEntropyLoss()` or a 3-argument masked loss (as
    `uldp train --loss` takes it). `task`: "multiclass", "binary" or "survival"; None reads it
    from the labels (integers: multiclass, or binary for a model of one output; (time, event)
    pairs: survival).

    Use: `app = ClientApp(mods=[user_level_mod(Net, load_records)])`. Flower applies mods to
    the handlers an app registers, so the app keeps its `@app.train()` (and `@app.evaluate()`)
    handler: the mod answers `UserLevelDP`'s train messages in its place.
    """
    if task is not None and task not in ("multiclass", "binary", "survival"):
        raise InvalidParameter(f"task must be multiclass, binary or survival, got {task!r}")
    if not callable(records):
        raise InvalidParameter(
            f"records must be a function giving (x, y, users), got {type(records).__name__}"
        )
    make = functools.partial(_working_set, model=model, records_fn=records, loss=loss, task=task)

    def mod(message: Message, context: Context, call_next: ClientAppCallable) -> Message:
        category = message.metadata.message_type.split(".")[0]
        if category != MessageType.TRAIN or SETTINGS not in message.content.config_records:
            return call_next(message, context)
        try:
            header: Any = message.content[SETTINGS]
            step = header.get("step")
            if step == "setup":
                return _setup(message, context, make)
            if step == "protocol1":
                return _protocol1(message, context, make)
            return _round(message, context, make)
        except (UldpError, ValueError, KeyError) as error:
            text = " ".join(str(error).split()) or type(error).__name__
            return Message(RecordDict({REFUSED: ConfigRecord({"message": text})}), reply_to=message)

    return mod


def _silo_of(context: Context, n_silos: int) -> int:
    """This SuperNode's silo: its partition-id, refused unless it is one of the server's `silos`
    and its num-partitions (when set) is theirs."""
    value = context.node_config.get("partition-id")
    partitions = context.node_config.get("num-partitions", n_silos)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not 0 <= value < n_silos
        or partitions != n_silos
    ):
        raise ProtocolError(
            f"this SuperNode's partition-id is {value!r} of num-partitions {partitions!r}, but the "
            f"server's UserLevelDP has silos={n_silos}: start one SuperNode per silo with "
            f'--node-config "partition-id=S num-partitions={n_silos}" (S in 0..{n_silos - 1}; in '
            "simulation, num-supernodes), or give UserLevelDP silos= the number of partitions"
        )
    return value


def _setup(message: Message, context: Context, make: Callable[..., WorkingSet]) -> Message:
    """Keep the run's settings, this silo's entropy and the model's buffers; say which silo this
    is, how many records it holds and the model's parameter names."""
    run: Any = message.content[SETTINGS]
    silo = _silo_of(context, int(run["silos"]))
    initial: Any = message.content.get(PARAMS)
    if not isinstance(initial, ArrayRecord):
        raise ProtocolError("the setup message carries no initial model")
    seed = str(run.get("noise_seed", ""))
    entropy = int(seed) if seed else secrets.randbits(128)
    job = str(run["job"])
    set_up_once(context, job)
    for key in [k for k in _CACHE if k[0] != context.run_id or k[1] == context.node_id]:
        del _CACHE[key]  # another run's, or this node's earlier runs', records and model
    context.state[_STATE] = ConfigRecord(
        {
            "config": str(run["config"]),
            "users": int(run["users"]),
            "silos": int(run["silos"]),
            "job": str(run["job"]),
            "silo": silo,
            "entropy": str(entropy),  # 128 bits: beyond a ConfigRecord's int64
            "answered": 0,  # the last round this silo answered
        }
    )
    context.state[_BUFFERS] = initial
    context.state.pop(PARTY, None)  # an earlier run's Protocol 1 party
    working = make(context)
    # Only the buffers are kept: the rounds send the parameters.
    context.state[_BUFFERS] = ArrayRecord({k: initial[k] for k in initial.keys() if k not in working.like})
    # Which silo this is and the model's parameter names: nothing of its records (not even their
    # count, which the server does not need).
    content = RecordDict({SETUP: ConfigRecord({"silo": silo, "params": list(working.like)})})
    return Message(content, reply_to=message)


def _run_state(content: Any, context: Context, what: str) -> Any:
    """The run as this silo knows it, refused for a message of another run (`what` names it)."""
    if _STATE not in context.state:
        raise ProtocolError(f"{what} arrived before the setup message")
    state: Any = context.state[_STATE]
    if str(content[SETTINGS].get("job", "")) != str(state["job"]):
        raise ProtocolError(f"{what} of another run arrived (its job differs from the setup's)")
    return state


def _protocol1(message: Message, context: Context, make: Callable[..., WorkingSet]) -> Message:
    """One setup step of Protocol 1 at this silo (protocol1.silo_step: its party from this silo's
    own counts n_su, kept in the node's state between messages)."""
    from .protocol1 import silo_step

    _run_state(message.content, context, "a Protocol 1 step")
    working = make(context)
    if not working.cfg.secure:
        raise ProtocolError("a Protocol 1 step arrived in a run without secure=True")
    return Message(silo_step(message.content, context, working), reply_to=message)


def _round(message: Message, context: Context, make: Callable[..., WorkingSet]) -> Message:
    """Round t: the algorithm's silo update on this silo's records (in the clear, or masked and
    encrypted under Protocol 1)."""
    from ..round_rngs import round_rngs

    content: Any = message.content
    state = _run_state(content, context, "a round")
    t = int(content[SETTINGS]["round"])
    check_round(state, t)
    working = make(context)
    n_silos, silo = working.ctx.n_silos, working.data.silo
    params = wire.read_params(content[PARAMS], working.like)
    plan = wire.read_plan(content[PLAN], t, silo, n_silos, working.ctx.n_users)
    _, rngs = round_rngs(working.entropy, t, n_silos)
    update = working.algorithm.silo_update(working.data, params, plan, working.ctx, working.cfg, rngs[silo])
    state["answered"] = t  # before the reply leaves: this round's noise is spent
    if working.cfg.secure:
        from .protocol1 import masked_reply

        return Message(masked_reply(content, context, working, update, t), reply_to=message)
    return Message(wire.reply_record(update, t), reply_to=message)


def _working_set(
    context: Context, *, model: Any, records_fn: RecordsFn, loss: Any, task: str | None
) -> WorkingSet:
    """This silo's settings, records, model and algorithm for the run (cached per process)."""
    state: Any = context.state[_STATE]
    key = (context.run_id, context.node_id, str(state["job"]))
    if key in _CACHE:
        return _CACHE[key]

    from ..algorithms import TrainConfig, make_algorithm
    from ..algorithms.base import Context as AlgoContext
    from ..algorithms.base import SiloData
    from ..models import parameter_count
    from ..module_check import check_module
    from ..own_model import resolve_loss

    cfg = TrainConfig(**json.loads(str(state["config"])))
    silo, n_users, n_silos = int(state["silo"]), int(state["users"]), int(state["silos"])
    x, y, users = _records(records_fn, context, n_users, task)
    net = _model(model, tuple(x.shape[1:]), task)
    _load_buffers(net, context.state[_BUFFERS])
    check_module(net, x[:2], "model")
    task = task or _task(net, x, y)
    _check_labels(net, x, y, task)
    loss_fn, _ = resolve_loss(loss, task)
    data = SiloData(silo=silo, x=x, y=y, users=users, n_users=n_users)
    ctx = AlgoContext(net, loss_fn, n_users, n_silos, parameter_count(net), None)
    like = {name: p.detach() for name, p in net.named_parameters()}
    working = WorkingSet(cfg, data, ctx, make_algorithm(cfg, [], task), like, int(state["entropy"]))
    _CACHE[key] = working
    return working


def _records(
    records_fn: RecordsFn, context: Context, n_users: int, task: str | None
) -> tuple[Any, Any, np.ndarray]:
    """This silo's (x, y, users) from the app's function, as the trainers hold them: features
    finite, labels class ids >= 0 or (time, event) pairs (own_arrays' checks, `uldp train
    --data`'s), user ids in [0, n_users); every refusal one `records:` line."""
    import torch

    from ..data.own_arrays import feature_array, label_array, nth_record
    from ..references import call_with

    available = {
        "context": context,
        "partition_id": context.node_config.get("partition-id"),
        "num_partitions": context.node_config.get("num-partitions"),
        "node_config": context.node_config,
        "run_config": context.run_config,
    }
    found = call_with(records_fn, "records", available)
    if not isinstance(found, (tuple, list)) or len(found) != 3:
        raise DataError(f"records: expected (x, y, users), got a {type(found).__name__}")
    x, y, users = (v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v) for v in found)
    if not (len(x) == len(y) == len(users)):
        raise DataError(f"records: x, y and users differ in length ({len(x)}, {len(y)}, {len(users)})")
    x = feature_array(x, "records: x", nth_record)
    if y.dtype.kind in "iub" or task is not None or (y.ndim == 2 and y.shape[1] == 2):
        _, y = label_array(y, task, "records: y", nth_record)
    if users.ndim != 1 or not np.issubdtype(users.dtype, np.integer):
        raise DataError(f"records: user ids must be integers in [0, {n_users}), got {users.dtype}")
    if len(users) and (users.min() < 0 or users.max() >= n_users):
        raise DataError(
            f"records: user ids must lie in [0, {n_users}) (the server's users), "
            f"got {users.min()}..{users.max()}"
        )
    label = torch.long if np.issubdtype(y.dtype, np.integer) else torch.float32  # survival: float32
    return (
        torch.as_tensor(x, dtype=torch.float32),
        torch.as_tensor(y, dtype=label),
        users.astype(np.int64),
    )


def _model(model: Any, feature_shape: tuple[int, ...], task: str | None) -> nn.Module:
    """A fresh copy of the app's model (its parameters are the server's each round)."""
    from torch import nn

    from ..references import call_with, load_reference

    if isinstance(model, str):
        model = load_reference(model, "model")
    if isinstance(model, nn.Module):
        return copy.deepcopy(model)
    if not callable(model):
        raise InvalidParameter(
            f"model must be a factory, an nn.Module or a reference, got {type(model).__name__}"
        )
    available: dict[str, Any] = {"feature_shape": feature_shape}
    if task is not None:
        available["task"] = task
    built = call_with(model, "model", available)
    if not isinstance(built, nn.Module):
        raise InvalidParameter(f"model returned a {type(built).__name__}, not a torch.nn.Module")
    return built


def _load_buffers(net: nn.Module, given: Any) -> None:
    """The server's values of the model's buffers (a normaliser it set...) loaded into the silo's
    model; the arrays the server holds must be the model's, by name and shape."""
    import torch

    own = net.state_dict()
    params = {name for name, _ in net.named_parameters()}
    unknown = sorted(set(given.keys()) - set(own))
    lacking = sorted(set(own) - params - set(given.keys()))
    if unknown or lacking:
        raise ProtocolError(
            f"the server's model and this silo's differ: the server's has {unknown or 'no'} other "
            f"arrays, the silo's buffers {lacking or 'none'} that the server's lacks"
        )
    values = {}
    for name in set(own) - params:
        value = torch.as_tensor(np.array(given[name].numpy()))
        if tuple(value.shape) != tuple(own[name].shape):
            raise ProtocolError(
                f"the server's buffer {name!r} has shape {tuple(value.shape)}, "
                f"this silo's model's {tuple(own[name].shape)}"
            )
        values[name] = value.to(own[name].dtype)
    net.load_state_dict(values, strict=False)


def _check_labels(net: nn.Module, x: Any, y: Any, task: str) -> None:
    """Class labels the model's outputs can score: below its output count (multiclass), 0 or 1
    (binary)."""
    import torch

    if task == "survival" or len(y) == 0:
        return
    with torch.no_grad():
        width = net(x[:1]).reshape(1, -1).shape[1]
    top = 1 if task == "binary" else width - 1
    bad = (y < 0) | (y > top)
    if bool(bad.any()):
        first = int(torch.nonzero(bad)[0, 0])
        raise DataError(
            f"records: y: record {first} has label {int(y[first])}, but a {task} task on a model of "
            f"{width} output(s) has labels 0..{top}"
        )


def _task(net: nn.Module, x: Any, y: Any) -> str:
    """The task the labels say: (time, event) pairs are survival; integer labels multiclass, or
    binary for a model of one output."""
    import torch

    if y.dtype.is_floating_point:
        if y.ndim == 2 and y.shape[1] == 2:
            return "survival"
        raise DataError(
            "records: labels must be integer classes or (time, event) pairs; give task= otherwise"
        )
    with torch.no_grad():
        outputs = net(x[:1])
    return "binary" if outputs.reshape(1, -1).shape[1] == 1 else "multiclass"
