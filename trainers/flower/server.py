"""The server's side of a federation on Flower: `FlowerSilos` sends each round to the silos'
ClientApps through a Flower `Grid` and brings back their messages, for `runner.run`'s round loop.

Before round 1 (`prepare`): wait for one SuperNode per silo, send each the run's settings and
learn which silo it is (its `partition-id`); ask for the record owners only if the algorithm's
server reads them (`AlgorithmSpec.server_reads_owners`: plaintext -w weights, uldp-group's
flags), never under --secure; build the server's algorithm object with the registered factory;
send each silo its `silo_state`; under --secure, run Protocol 1's setup as message rounds
(protocol1.py). Each round (`updates`): the global model and the plan to every silo, their
messages back, each checked (`records.read_reply`).

Faults: a silo that does not answer within `timeout`, or answers with an error (its ClientApp
raised or crashed, or its SuperNode went offline: the SuperLink's NODE_UNAVAILABLE reply), stops
the run with `SiloFailed` naming the silo(s), their SuperNodes, the round and Flower's reason:
every algorithm here calibrates each silo's noise share to |S| silos (and Protocol 1's masks
cancel only when all silos answer), so a round without a silo would release less noise than the
accountant counts. Nothing of the round is kept; the checkpoint holds the previous round, to
resume from. Under the simulation engine an error reply that is Ray's own failure (a worker
that died, out of memory) is the engine's, not the silo's: `EngineError`, with what to try.
Replies are matched to the messages sent by the id they answer, never by their source: the
SuperLink answers for an offline node from its own node id.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import ConfigRecord, Message, RecordDict
from flwr.common.constant import ErrorCode

from uldp.errors import EngineError, ProtocolError

from ..algorithms import get_algorithm, make_algorithm
from . import records
from .ray_session import REMEDIES
from .records import RunDescription

if TYPE_CHECKING:
    import torch
    from flwr.serverapp import Grid

    from ..algorithms.base import Algorithm, Context, RoundPlan, TrainConfig

DEFAULT_TIMEOUT = 600.0  # seconds a silo may take for one round
# Seconds a silo may take for a setup step: the first message starts the silo's worker (Flower's
# simulation starts Ray actors, which import torch) and reads its data; Protocol 1's keys follow.
SETUP_TIMEOUT = 600.0
CONNECT_TIMEOUT = 120.0  # seconds to wait for every silo's SuperNode to connect
PULL_INTERVAL = 0.05  # seconds between two polls for replies


class FlowerSilos:
    """The silos of a run as Flower SuperNodes, seen from the ServerApp (`runner.Silos`)."""

    def __init__(
        self,
        grid: Grid,
        run: RunDescription,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        setup_timeout: float = SETUP_TIMEOUT,
        should_stop: Callable[[], bool] = lambda: False,
        on_stage: Callable[[str], None] | None = None,
        started: float | None = None,
    ) -> None:
        self.grid = grid
        self.run = run
        self.timeout = timeout
        self.setup_timeout = setup_timeout
        self.should_stop = should_stop  # checked while waiting: a stop request ends the run
        self.nodes: dict[int, int] = {}  # silo -> node id
        self.protocol: Any = None  # protocol1.ServerParty under --secure
        self._seeded = False  # the silos were sent the user's --noise-seed
        self.say = on_stage or (lambda text: None)  # the start-up's stages, for a person waiting
        self.started = time.perf_counter() if started is None else started  # the engine's start
        # From `started` to round 1's first message to the silos: the engine, the silos' setup,
        # Protocol 1's keys and the server's own preparation (the round loop's, before round 1).
        self.startup_s: float | None = None

    # --- setup -------------------------------------------------------------------------------
    def prepare(self, cfg: TrainConfig, task: str, noise_fixed: bool) -> tuple[Algorithm, np.ndarray | None]:
        import torch

        from ..algorithms.base import SiloData

        spec = get_algorithm(cfg.algo)
        owners_wanted = spec.server_reads_owners and not cfg.secure
        node_ids = self._wait_for_nodes()
        n = self.run.n_silos
        # Neutral: in simulation this starts their workers; in a deployment they already run.
        self.say(f"setting up {n} silos (their ClientApps, their data)...")
        began = time.perf_counter()
        settings = dataclasses.asdict(cfg)
        settings["noise_seed"] = None  # the server's entropy stays at the server
        run: dict[str, Any] = {
            "config": json.dumps(settings),
            "task": self.run.task,
            "model": self.run.model,
            "loss": self.run.loss,  # "": the task's loss; else a built-in name or a reference
            "feature_shape": json.dumps(list(self.run.feature_shape)),
            "n_classes": self.run.n_classes,
            "users": self.run.n_users,
            "silos": self.run.n_silos,
            "federation": self.run.federation,
            "partitions": self.run.partitions,
            "owners": owners_wanted,
            # Fixed by the user for an experiment: the silos replay the in-process streams.
            "noise_seed": str(cfg.noise_seed) if noise_fixed else "",
            "job": secrets.token_hex(8),  # this training run, among others on the same SuperNodes
        }
        self._seeded = noise_fixed
        content = RecordDict({"run": ConfigRecord(run)})
        replies = self.exchange({node: content for node in node_ids}, records.SETUP, 0, by_node=True)
        self.say(f"{n} silos set up in {time.perf_counter() - began:.1f} s")
        owners: dict[int, np.ndarray] = {}
        for node, reply in replies.items():
            header: Any = reply.get("setup")
            silo = records.claim_silo(self.nodes, header, node, self.run.n_silos, f"node {node}")
            count = header.get("records")
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise records.MalformedReply(silo, 0, f"its record count is {count!r}")
            if owners_wanted:
                owners[silo] = self._owners(reply, silo, count)
        empty = torch.zeros((0, *self.run.feature_shape))
        shells = [
            SiloData(s, empty, torch.zeros(0), owners.get(s, np.zeros(0, dtype=np.int64)), self.run.n_users)
            for s in range(self.run.n_silos)
        ]
        algorithm = make_algorithm(cfg, shells, task)
        counts = (
            np.stack([np.bincount(owners[s], minlength=self.run.n_users) for s in range(self.run.n_silos)])
            if owners_wanted
            else None
        )
        states = {s: algorithm.silo_state(s) for s in range(self.run.n_silos)}
        if any(states.values()):
            messages = {s: RecordDict({"state": records.arrays(states[s])}) for s in states}
            self.exchange(messages, records.SILO_STATE, 0)
        if cfg.secure and not algorithm.phased:  # a phased algorithm runs its own protocol in phases
            from .protocol1 import ServerParty

            self.say("setting up Protocol 1 (keys, pairwise seeds)...")
            began = time.perf_counter()
            self.protocol = ServerParty(
                self.exchange, self.run.n_silos, self.run.n_users, self.run.n_params, cfg
            )
            algorithm.secure = self.protocol.weighted_sum  # type: ignore[attr-defined]
            self.say(f"Protocol 1 set up in {time.perf_counter() - began:.1f} s")
        return algorithm, counts

    def _rounds_begin(self) -> None:
        """Start-up ends with round 1's first message to the silos (or the first resumed round's)."""
        if self.startup_s is None:
            self.startup_s = time.perf_counter() - self.started
            self.say(f"engine start-up: {self.startup_s:.1f} s")

    def _owners(self, reply: RecordDict, silo: int, count: int) -> np.ndarray:
        """The owner of each of silo `silo`'s `count` records, from its setup reply, checked."""
        try:
            users = records.read_arrays(reply.get("owners"), {"users"}, "the owners")["users"]
        except ValueError as error:
            raise records.MalformedReply(silo, 0, str(error)) from None
        if users.shape != (count,) or not np.issubdtype(users.dtype, np.integer):
            raise records.MalformedReply(silo, 0, f"owners of shape {users.shape} for {count} records")
        if len(users) and (users.min() < 0 or users.max() >= self.run.n_users):
            raise records.MalformedReply(silo, 0, f"owner ids must lie in [0, {self.run.n_users})")
        return users.astype(np.int64)

    # --- rounds ------------------------------------------------------------------------------
    def updates(
        self,
        algorithm: Algorithm,
        round: int,
        params: dict[str, torch.Tensor],
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
    ) -> list:
        self._rounds_begin()
        model = records.params_record(params)
        extra = self.protocol.round_records(round, plan.sampled) if self.protocol is not None else {}
        messages = {}
        for s in range(self.run.n_silos):
            content = RecordDict(
                {
                    "round": ConfigRecord({"round": round, "silo": s}),
                    "params": model,
                    "plan": records.plan_record(plan, s, hide_sample=self.protocol is not None),
                    **extra.get(s, {}),
                }
            )
            messages[s] = content
        replies = self.exchange(messages, records.ROUND, round)
        if self.protocol is not None:
            return [self.protocol.read_masked(replies[s], s, round) for s in range(self.run.n_silos)]
        like = next(iter(params.values()))
        expected = algorithm.reply_type(cfg)
        return [
            records.read_reply(
                replies[s],
                silo=s,
                round=round,
                expected=expected,
                n_params=ctx.n_params,
                n_users=ctx.n_users,
                like=like,
            )
            for s in range(self.run.n_silos)
        ]

    def assumptions(self, cfg: TrainConfig) -> dict[str, str]:
        engine = "Flower's simulation engine (Ray backend)" if self.run.partitions else "a Flower deployment"
        out = {
            "engine": (
                f"{self.run.n_silos} silos as separate parties, Flower ClientApps on their own "
                f"SuperNodes in {engine}; each read only its own records; noise drawn by each silo "
                + ("from the shared --noise-seed" if self._seeded else "from its own 128 bits")
            )
        }
        if not cfg.secure and not get_algorithm(cfg.algo).observed:  # those say what the server read
            owners = get_algorithm(cfg.algo).server_reads_owners
            out["aggregation"] = (
                "in the clear at the server: epsilon covers the aggregate and the released model; "
                "the server sees each silo's message"
                + (" and the owner of every record (the histogram n_su)" if owners else "")
                + "; the paper assumes secure aggregation"
            )
        return out

    def phase(
        self,
        algorithm: Algorithm,
        round: int,
        name: str,
        payloads: dict[int, dict[str, np.ndarray]],
        ctx: Context,
        cfg: TrainConfig,
    ) -> dict[int, dict[str, np.ndarray]]:
        """Phase `name` of round `round` at the silos `payloads` names; a silo that does not answer
        within the round's timeout, or whose SuperNode went offline, is left out (to a phased
        algorithm, a dropout); one that fails or refuses stops the run (`SiloFailed`), as in a
        round."""
        self._rounds_begin()
        contents = {
            s: RecordDict(
                {
                    "phase": ConfigRecord({"round": round, "silo": s, "name": name}),
                    "payload": records.arrays(payload),
                }
            )
            for s, payload in payloads.items()
        }
        replies = self.exchange(contents, records.PHASE, round, missing_ok=True) if contents else {}
        out = {}
        for s, content in replies.items():
            header: Any = content.get("phase")
            if not isinstance(header, ConfigRecord) or (
                header.get("round"),
                header.get("silo"),
                header.get("name"),
            ) != (
                round,
                s,
                name,
            ):
                raise records.MalformedReply(
                    s, round, f"its reply does not answer phase {name!r} of this round"
                )
            try:
                out[s] = records.read_arrays(
                    content.get("reply"), set(content["reply"].keys()), f"phase {name}"
                )
            except (ValueError, KeyError) as error:
                raise records.MalformedReply(s, round, str(error)) from None
        return out

    # --- messaging ---
    def _send_and_receive(
        self, messages: list[Message], timeout: float
    ) -> tuple[dict[int, Message], list[int]]:
        """Grid.send_and_receive, but polling every PULL_INTERVAL s (Flower's HTTP grid waits 3 s
        between pulls, which a deployment would pay in every exchange) and stopping, with
        KeyboardInterrupt, when `should_stop` says so (Ctrl-C while a simulation runs).

        Returns the replies by the node each message went to, and the nodes whose message the
        SuperLink did not take."""
        # A reply is filed under the node its question went to, found by the id it answers
        # (`reply_to_message_id`), never by its `src_node_id`: the SuperLink answers for a node
        # that went offline itself (ErrorCode.NODE_UNAVAILABLE), from its own node id, so filing
        # by source lost the node and the reason ("did not answer") of a dead SuperNode.
        destinations = [message.metadata.dst_node_id for message in messages]
        ids = list(self.grid.push_messages(messages))
        # Flower returns one id per message, in order, None where the push failed.
        sent = {id: node for id, node in zip(ids, destinations) if id}
        unsent = [node for id, node in zip(ids, destinations) if not id] + destinations[len(ids) :]
        pending = set(sent)
        deadline = time.monotonic() + timeout
        replies: dict[int, Message] = {}
        while pending and time.monotonic() < deadline:
            if self.should_stop():
                raise KeyboardInterrupt
            for reply in self.grid.pull_messages(pending):
                answered = reply.metadata.reply_to_message_id
                if answered in pending:  # not a stale reply to an earlier exchange
                    replies[sent[answered]] = reply
                    pending.discard(answered)
            if pending:
                time.sleep(PULL_INTERVAL)
        return replies, unsent

    def _wait_for_nodes(self) -> list[int]:
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while True:
            nodes = sorted(self.grid.get_node_ids())
            if len(nodes) >= self.run.n_silos:
                if len(nodes) > self.run.n_silos:
                    raise ProtocolError(
                        f"{len(nodes)} SuperNodes are connected for a federation of {self.run.n_silos} silos"
                    )
                return nodes
            if self.should_stop():
                raise KeyboardInterrupt
            if time.monotonic() > deadline:
                raise ProtocolError(
                    f"only {len(nodes)} of {self.run.n_silos} silos' SuperNodes connected within "
                    f"{CONNECT_TIMEOUT:g} s"
                )
            time.sleep(0.05)

    def exchange(
        self,
        contents: dict[int, RecordDict],
        message_type: str,
        round: int,
        *,
        by_node: bool = False,
        missing_ok: bool = False,
    ) -> dict[int, RecordDict]:
        """Send `contents` (by silo, or by node id when `by_node`) and return every reply's content,
        by the same key; `SiloFailed` naming who did not answer (unless `missing_ok`: then they
        are left out) or answered with an error."""
        targets = contents if by_node else {self.nodes[s]: c for s, c in contents.items()}
        key_of = {node: node for node in targets} if by_node else {self.nodes[s]: s for s in contents}
        # In setup a node has not yet said which silo it is; afterwards both, so that an operator
        # can find the SuperNode (`flwr supernode ls`) of the silo that failed.
        name_of = {
            node: f"SuperNode {node}" if by_node else f"silo {key_of[node]} (SuperNode {node})"
            for node in targets
        }
        group = str(round)
        messages = [
            Message(content, dst_node_id=node, message_type=message_type, group_id=group)
            for node, content in targets.items()
        ]
        timeout = self.setup_timeout if round == 0 else self.timeout
        replies, unsent = self._send_and_receive(messages, timeout)
        if unsent:
            raise records.SiloFailed(
                [name_of[node] for node in unsent],
                round,
                "could not be reached (the SuperLink refused the message)",
            )
        if missing_ok:
            # To a phased (dropout-robust) algorithm a SuperNode that went offline is a dropout,
            # as one that stays silent: the SuperLink's NODE_UNAVAILABLE reply says just that.
            replies = {node: reply for node, reply in replies.items() if not _unavailable(reply)}
        missing = [name_of[node] for node in targets if node not in replies]
        if missing and not missing_ok:
            raise records.SiloFailed(
                missing, round, f"did not answer within {timeout:g} s (crashed, stopped or too slow)"
            )
        out = {}
        failed: dict[str, str] = {}  # every party that failed (a dead worker takes its queue along)
        refused: dict[str, str] = {}
        for node in sorted((n for n in targets if n in replies), key=lambda n: key_of[n]):
            reply, who = replies[node], key_of[node]
            if reply.has_error():  # the ClientApp raised, its worker died, or its node went offline
                failed[name_of[node]] = _flower_error(reply.error)
                continue
            content = reply.content
            error: Any = content.get("error")
            if isinstance(error, ConfigRecord):
                refused[name_of[node]] = str(error.get("message"))
                continue
            out[who] = content
        if self.run.partitions:  # the simulation engine: a Ray worker that died is Ray's failure
            ordered = sorted((n for n in targets if n in replies), key=lambda n: key_of[n])
            broken = [n for n in ordered if _ray_failed(replies[n])]
            if broken:  # every silo whose worker went down (a dead worker takes its queue along)
                when = "setup" if round == 0 else f"round {round}"
                reason = _short(" ".join(str(replies[broken[0]].error.reason).split()))
                raise EngineError(
                    f"Flower's simulation engine (Ray) failed in {when}, at "
                    f"{', '.join(name_of[n] for n in broken)}: {reason}; {REMEDIES}"
                )
        for problems, what in ((failed, "failed"), (refused, "refused")):
            if problems:
                raise records.SiloFailed(list(problems), round, what, next(iter(problems.values())))
        return out


def _unavailable(reply: Message) -> bool:
    """The SuperLink's answer for a node that stopped sending heartbeats (Flower 1.41:
    `linkstate.utils.create_message_error_unavailable_res_message`, from the SuperLink's own
    node id)."""
    return reply.has_error() and reply.error.code == ErrorCode.NODE_UNAVAILABLE


def _ray_failed(reply: Message) -> bool:
    """An error reply the simulation engine made of Ray's own failure (a worker that died, out of
    memory: Flower 1.41's `vce_api.worker` replies with the exception's class, ErrorCode.UNKNOWN),
    not of the ClientApp's exception (CLIENT_APP_RAISED_EXCEPTION, which names the silo's fault)."""
    if not reply.has_error():
        return False
    error = reply.error
    own = (ErrorCode.CLIENT_APP_RAISED_EXCEPTION, ErrorCode.LOAD_CLIENT_APP_EXCEPTION)
    return error.code not in own and str(error.reason or "").startswith("<class 'ray.")


def _flower_error(error: Any) -> str:
    """A Flower error reply as one line: its code by name and number, then its reason, cut short."""
    names = {value: name for name, value in vars(ErrorCode).items() if isinstance(value, int)}
    reason = " ".join(str(error.reason or "").split())
    reason = reason.removeprefix("Error: ")  # the SuperLink's reasons begin so; ours is `Error:` already
    code = f"{names.get(error.code, 'error')} (Flower error code {error.code})"
    return f"{code}: {_short(reason)}" if reason else code


def _short(reason: str, limit: int = 200) -> str:
    """Flower's error reason, cut to its first sentence (a worker's death carries a page of Ray's
    diagnostics; the worker's own log keeps them)."""
    # Flower writes "<class 'ray.exceptions.ActorDiedError'>:<'The actor died ...'>".
    match = re.match(r"<class '(?:[\w.]*\.)?(\w+)'>:<'(.*)", reason)
    if match:
        reason = match.group(1) + ": " + match.group(2).rstrip("'>")
    first = reason.split(". ")[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."
