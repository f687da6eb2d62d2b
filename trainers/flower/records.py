"""The messages between the server and a silo, as Flower records, and the server's checks of
what a silo sends.

Before round 1 the server tells every silo the run's settings and its `RunDescription` (the
model, the federation's sizes, where a simulation's partition files lie).

One round (ULDP-FL §3, Algorithm 4) crosses the wire twice (a phased algorithm's round, once per
phase: `PHASE`):

- server -> silo s (`train`): the global model x_t (`ArrayRecord` "params", one array per
  parameter, in the model's order) and the round's plan (`ArrayRecord` "plan": the sampled users
  U_t as 0/1 and, for algorithms whose server plans weights, silo s's row w_{s,.}), plus
  `ConfigRecord` "round" {round, silo}; under Protocol 1 also the encrypted weights envelope.
- silo s -> server: its message as `algorithms.base` defines it: `SiloDelta` (ArrayRecord
  "delta"), `SiloUserDeltas` ("users", "deltas", "noise"), or under Protocol 1 its masked sum
  (ConfigRecord "protocol1" {"envelope": bytes}); `ConfigRecord` "reply" {round, silo, kind}.

The server trusts nothing in a reply: `read_reply` refuses, naming the silo and the round, a
reply of the wrong kind, round or silo, arrays of the wrong shape or type, non-finite values, or
user ids out of range or repeated (`MalformedReply`). Nothing in a reply reaches the accounting:
the epsilon depends only on the server's own settings.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from uldp.errors import ProtocolError

if TYPE_CHECKING:
    import torch
    from flwr.app import ArrayRecord, RecordDict

    from ..algorithms.base import RoundPlan, SiloDelta, SiloUserDeltas

# Message types: Flower routes "<category>.<action>" to the ClientApp function registered for it.
SETUP = "query.uldp_setup"
SILO_STATE = "query.uldp_silo_state"
PROTOCOL1 = "query.uldp_protocol1"
ROUND = "train.uldp_round"
# A phased algorithm's steps (dp-fedavg-robust: weight, keys, shares, upload, calibrate): ConfigRecord
# "phase" {round, silo, name} and ArrayRecord "payload" in, "phase" and ArrayRecord "reply" out.
PHASE = "query.uldp_phase"

KINDS = {"SiloDelta": "delta", "SiloUserDeltas": "user-deltas"}


@dataclasses.dataclass(frozen=True)
class RunDescription:
    """What every silo is told of the run besides the settings (all public)."""

    task: str
    model: str  # a built-in model name or an absolute reference (own_model.ModelSpec.reference)
    feature_shape: tuple[int, ...]
    n_classes: int
    n_users: int
    n_silos: int
    n_params: int  # d, the dimension of every message
    federation: str  # partitions.federation_id of the data: a silo checks its file against it
    partitions: str = ""  # simulation only: the private directory of the silos' partition files
    loss: str = ""  # a built-in loss name or an absolute reference; "": the task's own loss


def claim_silo(nodes: dict[int, int], header: Any, node: int, n_silos: int, who: str) -> int:
    """The silo a SuperNode's setup reply (`header`, its ConfigRecord) says it is, noted in
    `nodes` (silo -> node id); ProtocolError, naming `who`, for a number that is not one of
    `n_silos` or a silo another SuperNode already claimed. Both servers' setups read it."""
    from flwr.app import ConfigRecord

    silo = header.get("silo") if isinstance(header, ConfigRecord) else None
    if isinstance(silo, bool) or not isinstance(silo, int) or not 0 <= silo < n_silos:
        raise ProtocolError(f"{who} answered setup as silo {silo!r}, not a silo of {n_silos}")
    if silo in nodes:
        raise ProtocolError(f"two SuperNodes ({nodes[silo]} and {node}) both claim to be silo {silo}")
    nodes[silo] = node
    return silo


class MalformedReply(ProtocolError):
    """A silo's reply that the server refuses to use: it is never averaged in."""

    def __init__(self, silo: int, round: int, what: str) -> None:
        self.silo, self.round = silo, round
        when = "in setup" if round == 0 else f"in round {round}"
        super().__init__(f"silo {silo} sent a malformed message {when}: {what}; it was not used")


class SiloFailed(ProtocolError):
    """A silo did not answer, or answered with an error, so the round cannot be completed.

    `parties` names them: "silo 2", or in setup, before a node has said which silo it is,
    "SuperNode <Flower's node id>"."""

    def __init__(self, parties: list[str], round: int, what: str, reason: str = "") -> None:
        self.parties, self.round = parties, round
        when = "setup" if round == 0 else f"round {round}"
        super().__init__(f"{', '.join(parties)} {what} in {when}" + (f": {reason}" if reason else ""))


def arrays(values: dict[str, np.ndarray]) -> ArrayRecord:
    """An ArrayRecord of numpy arrays (Flower serialises them with np.save, never pickle)."""
    from flwr.app import Array, ArrayRecord

    return ArrayRecord({name: Array(np.ascontiguousarray(value)) for name, value in values.items()})


def read_arrays(record: Any, names: set[str], who: str) -> dict[str, np.ndarray]:
    """The arrays `names` of an ArrayRecord, exactly those; ValueError naming what is wrong."""
    from flwr.app import ArrayRecord

    if not isinstance(record, ArrayRecord):
        raise ValueError(f"{who} is not an array record")
    if set(record.keys()) != names:
        raise ValueError(f"{who} holds {sorted(record.keys())}, expected {sorted(names)}")
    out = {}
    for name in names:
        try:
            out[name] = record[name].numpy()
        except Exception as error:  # noqa: BLE001 - any failure to decode is a malformed array
            raise ValueError(f"{who}: array {name} cannot be decoded ({type(error).__name__})") from None
    return out


def params_record(params: dict[str, torch.Tensor]) -> ArrayRecord:
    return arrays({name: p.detach().cpu().numpy() for name, p in params.items()})


def read_params(record: ArrayRecord, like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The global model as the silo's own model's parameters (names, shapes and dtype checked)."""
    import torch

    values = read_arrays(record, set(like), "the global model")
    out = {}
    for name, p in like.items():
        value = values[name]
        if value.shape != tuple(p.shape):
            raise ValueError(f"parameter {name} has shape {value.shape}, expected {tuple(p.shape)}")
        out[name] = torch.as_tensor(value, dtype=p.dtype, device=p.device)
    return out


def plan_record(plan: RoundPlan, silo: int, *, hide_sample: bool = False) -> ArrayRecord:
    """What silo s needs of the plan: U_t, its own weights row (never another silo's) and, where
    silos are sampled (rpdp, unidp), whether it takes part. `hide_sample` (Protocol 1, whose
    Enc(B_inv(N_u)) is Enc(0) for a user not sampled so that the silos cannot tell, ULDP-FL §4.1
    step 2(a)): every user marked sampled, the silo training all of its own users."""
    sampled = np.ones_like(plan.sampled) if hide_sample else plan.sampled
    values = {"sampled": sampled.astype(np.uint8)}
    if plan.weights is not None:
        values["weights"] = np.asarray(plan.weights[silo], dtype=np.float64)
    if plan.silos is not None:
        values["taking_part"] = np.asarray([plan.silos[silo]], dtype=np.uint8)
    return arrays(values)


def read_plan(record: ArrayRecord, round: int, silo: int, n_silos: int, n_users: int) -> RoundPlan:
    """The silo's view of the round's plan: the weights of other silos are left at zero."""
    from ..algorithms.base import RoundPlan

    names = set(record.keys())
    if "sampled" not in names or not names <= {"sampled", "weights", "taking_part"}:
        raise ValueError(f"the plan holds {sorted(names)}, expected sampled (and weights, taking_part)")
    values = read_arrays(record, names, "the plan")
    sampled = values["sampled"]
    if sampled.shape != (n_users,):
        raise ValueError(f"the plan samples {sampled.shape} users, expected ({n_users},)")
    weights = None
    if "weights" in values:
        if values["weights"].shape != (n_users,):
            raise ValueError(
                f"the plan's weights have shape {values['weights'].shape}, expected ({n_users},)"
            )
        weights = np.zeros((n_silos, n_users))
        weights[silo] = values["weights"]
    silos = None
    if "taking_part" in values:
        if values["taking_part"].shape != (1,):
            raise ValueError(f"the plan's taking_part has shape {values['taking_part'].shape}, expected (1,)")
        # The silo learns only whether it takes part; the others are left out (False).
        silos = np.zeros(n_silos, dtype=bool)
        silos[silo] = bool(values["taking_part"][0])
    return RoundPlan(round, sampled.astype(bool), weights, silos)


def reply_record(message: Any, round: int) -> RecordDict:
    """A silo's message for the server (`algorithms.base` defines the two kinds)."""
    from flwr.app import ConfigRecord, RecordDict

    kind = KINDS[type(message).__name__]
    if kind == "delta":
        values = {"delta": message.delta.detach().cpu().numpy()}
    else:
        values = {
            "users": np.asarray(message.users, dtype=np.int64),
            "deltas": message.deltas.detach().cpu().numpy(),
            "noise": message.noise.detach().cpu().numpy(),
        }
    return RecordDict(
        {
            "reply": ConfigRecord({"round": round, "silo": message.silo, "kind": kind}),
            "message": arrays(values),
        }
    )


def reply_header(content: RecordDict, silo: int, round: int, kind: str) -> None:
    """Check the reply's header names this silo, this round and the kind the algorithm sends."""
    from flwr.app import ConfigRecord

    header = content.get("reply") if hasattr(content, "get") else None
    if not isinstance(header, ConfigRecord):
        raise MalformedReply(silo, round, "no reply header")
    if header.get("silo") != silo:
        raise MalformedReply(silo, round, f"it claims to come from silo {header.get('silo')!r}")
    if header.get("round") != round:
        raise MalformedReply(silo, round, f"it answers round {header.get('round')!r}")
    if header.get("kind") != kind:
        raise MalformedReply(silo, round, f"a {header.get('kind')!r} message where {kind!r} was expected")


def read_reply(
    content: RecordDict,
    *,
    silo: int,
    round: int,
    expected: type,
    n_params: int,
    n_users: int,
    like: torch.Tensor,
) -> SiloDelta | SiloUserDeltas:
    """The silo's message, refused (`MalformedReply`) unless it is exactly what the algorithm's
    silos send: the expected kind, float arrays of the model's dimension, finite values, and
    distinct user ids in [0, |U|)."""
    import torch

    from ..algorithms.base import SiloDelta, SiloUserDeltas

    kind = KINDS[expected.__name__]
    reply_header(content, silo, round, kind)
    names = {"delta"} if kind == "delta" else {"users", "deltas", "noise"}
    try:
        values = read_arrays(content.get("message"), names, "the message")
    except ValueError as error:
        raise MalformedReply(silo, round, str(error)) from None
    for name, value in values.items():
        floating = name != "users"
        if floating and not np.issubdtype(value.dtype, np.floating):
            raise MalformedReply(silo, round, f"{name} holds {value.dtype}, not floating-point numbers")
        if floating and not np.isfinite(value).all():
            raise MalformedReply(silo, round, f"{name} holds non-finite values")

    def tensor(value: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(value, dtype=like.dtype, device=like.device)

    if kind == "delta":
        delta = values["delta"]
        if delta.shape != (n_params,):
            raise MalformedReply(silo, round, f"delta has shape {delta.shape}, expected ({n_params},)")
        return SiloDelta(silo, tensor(delta))
    users, deltas, noise = values["users"], values["deltas"], values["noise"]
    if users.ndim != 1 or not np.issubdtype(users.dtype, np.integer):
        raise MalformedReply(
            silo, round, f"users must be a vector of user ids, got {users.dtype} {users.shape}"
        )
    if len(users) and (users.min() < 0 or users.max() >= n_users):
        raise MalformedReply(silo, round, f"user ids must lie in [0, {n_users})")
    if len(np.unique(users)) != len(users):
        raise MalformedReply(silo, round, "a user id appears twice")
    if deltas.shape != (len(users), n_params):
        raise MalformedReply(
            silo, round, f"deltas has shape {deltas.shape}, expected ({len(users)}, {n_params})"
        )
    if noise.shape != (n_params,):
        raise MalformedReply(silo, round, f"noise has shape {noise.shape}, expected ({n_params},)")
    return SiloUserDeltas(silo, users.astype(np.int64), tensor(deltas), tensor(noise))
