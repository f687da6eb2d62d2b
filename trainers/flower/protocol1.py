"""Protocol 1 (ULDP-FL §4.1, the private weighting of ULDP-AVG-w / ULDP-SGD-w) as message rounds
between the ServerApp and the silos' ClientApps.

The parties are crypto/'s own (`AggregationServer`, `Silo`); here their authenticated envelopes
travel as bytes (`crypto.wire`) in Flower records, and a silo's party is kept between messages in
its node's `context.state` (`Silo.export_state`). Setup, once per run, in three message rounds:

1. `start`: the server's parameters and DH public key (the trust anchor; on Flower it arrives over
   the SuperLink's TLS channel) -> each silo creates its party from its own counts n_{s,.} and
   answers its DH key (setup (a)).
2. `keys`: the Paillier public key and the broadcast of all DH keys -> each silo derives its
   pairwise keys (setup (b)); silo 0 answers the seed R sealed for each other silo (setup (c)).
3. `histogram`: each other silo gets its sealed seed, relayed -> every silo answers its blinded
   histogram (setup (d)-(e)); the server computes the blinded inverses (setup (f)).

Each round, the train message carries Enc(B_inv(N_u)) for the sampled users (round (a)); the
silo runs the algorithm's update and answers only its masked, encrypted sum (round (b)-(c)); the
server decrypts the sum of all silos' (the masks cancel only then). The server never sees a
silo's n_{s,u} or a single user's delta.

Under private sampling (`--private-sampling`, `crypto.protocol.sampling`) round (a) goes by
oblivious transfer in two more query rounds before the train message: `sampling-offer` (the OT
offers; each silo answers its OT choices) and `sampling-transfer` (the sealed weights and padded
slot keys; each silo answers its audit request and its digest for every other silo). The train
message then carries the openings of the audited users and the other silos' digests, relayed.

N_max: the encoding is exact for N_u <= N_max (crypto/encoding.py); no party knows N_u, so every
silo checks its own n_{s,u} <= N_max / |S|, which implies it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from flwr.app import ConfigRecord, RecordDict

from uldp.errors import ProtocolError, UldpError

from . import records

if TYPE_CHECKING:
    import torch
    from flwr.app import Context

    from uldp.crypto.channel import Envelope

    from ..algorithms.base import TrainConfig
    from .working_set import WorkingSet

#: One message round with silos (`server.FlowerSilos.exchange`): contents by silo, the message
#: type, the round (0: setup); the replies' contents by silo.
Exchange = Callable[[dict[int, RecordDict], str, int], dict[int, RecordDict]]

PARTY = "uldp_protocol1"  # ConfigRecord in a silo node's context.state: its party, as bytes


@dataclass(frozen=True)
class MaskedShare:
    """A silo's round message under Protocol 1: its masked encrypted sum, still authenticated."""

    silo: int
    envelope: Envelope


def _envelope_bytes(envelope: Envelope) -> bytes:
    from uldp.crypto.wire import dumps

    return dumps(envelope)


def _read_envelope(content: Any, silo: int, round: int, key: str = "envelope") -> Envelope:
    """The envelope `key` of a silo's Protocol 1 reply; `MalformedReply` naming the silo if it is
    missing or does not decode."""
    from uldp.crypto.wire import loads

    try:
        return loads(_bytes(content.get("protocol1") if hasattr(content, "get") else None, key))
    except ProtocolError as error:
        raise records.MalformedReply(silo, round, str(error)) from None


def _bytes(record: Any, key: str) -> bytes:
    """The bytes field `key` of a Protocol 1 record; ProtocolError if it is missing or not bytes."""
    value = record.get(key) if isinstance(record, ConfigRecord) else None
    if not isinstance(value, bytes):
        raise ProtocolError(f"the Protocol 1 message has no {key}")
    return value


def _record(**values: Any) -> RecordDict:
    return RecordDict({"protocol1": ConfigRecord(values)})


class ServerParty:
    """The aggregation server A of Protocol 1, its setup run over the message rounds `exchange`
    holds with `silos` silos of `users` users, on messages of `dimension` numbers (uldp's own
    ServerApp, server.py, and a user's app wrapped by `user_strategy.UserLevelDP`)."""

    def __init__(self, exchange: Exchange, silos: int, users: int, dimension: int, cfg: TrainConfig) -> None:
        from uldp.crypto.protocol import AggregationServer, session_params

        n = silos
        self.exchange = exchange
        self.params, keypair = session_params(
            n,
            users,
            dimension,
            key_bits=cfg.key_bits,
            test_keys=cfg.test_keys,
            sampling=cfg.sampling_params() if cfg.private_sampling else None,
        )
        self.server = AggregationServer(self.params, keypair)
        encoding = self.params.encoding
        start = {
            "step": "start",
            "anchor": str(self.server.dh_public),
            "encoding": json.dumps([encoding.precision, encoding.n_max, encoding.value_bound]),
        }
        replies = exchange({s: _record(**start) for s in range(n)}, records.PROTOCOL1, 0)
        for s in range(n):
            self._receive(self.server.receive_dh_key, _read_envelope(replies[s], s, 0), s)
        keys = self.server.paillier_key()
        broadcast = self.server.broadcast_dh_keys()
        contents = {
            s: _record(step="keys", paillier=_envelope_bytes(keys[s]), dh_keys=_envelope_bytes(broadcast[s]))
            for s in range(n)
        }
        replies = exchange(contents, records.PROTOCOL1, 0)
        relayed: dict[int, bytes] = {}
        for peer in range(1, n):  # silo 0's seed R, sealed for each other silo
            sealed = _read_envelope(replies[0], 0, 0, key=f"sealed-{peer}")
            if sealed.receiver != f"silo {peer}":
                raise records.MalformedReply(
                    0, 0, f"the seed sealed for silo {peer} is addressed to {sealed.receiver}"
                )
            relayed[peer] = _envelope_bytes(self._receive(self.server.relay, sealed, 0))
        contents = {
            s: _record(step="histogram", **({"sealed": relayed[s]} if s in relayed else {})) for s in range(n)
        }
        replies = exchange(contents, records.PROTOCOL1, 0)
        for s in range(n):
            self._receive(self.server.receive_histogram, _read_envelope(replies[s], s, 0), s)
        self.server.compute_inverses()

    @staticmethod
    def _receive(step: Any, envelope: Envelope, silo: int, round: int = 0) -> Any:
        """The server's party takes `envelope`; a refusal names the silo it came from."""
        try:
            return step(envelope)
        except UldpError as error:
            raise records.MalformedReply(silo, round, str(error)) from None

    def round_records(self, round: int, sampled: np.ndarray) -> dict[int, dict[str, ConfigRecord]]:
        """Round (a): each silo's copy of Enc(B_inv(N_u)) (Enc(0) for users not sampled); under
        private sampling, the openings of the audit after two message rounds of oblivious
        transfer (`private_sampling`), which replace it."""
        if self.params.sampling is not None:
            return self.private_sampling(round)
        envelopes = self.server.encrypted_weights(round, sampled)
        return {
            s: {"protocol1": ConfigRecord({"envelope": _envelope_bytes(e)})} for s, e in enumerate(envelopes)
        }

    def private_sampling(self, round: int) -> dict[int, dict[str, ConfigRecord]]:
        """Sampling (1)-(5) of `crypto.protocol.sampling` as two query rounds before the round's
        train message: offers -> OT choices; transfers -> audit requests and the silos' digests
        for each other (relayed). The train message then carries the openings and the digests."""
        server, n = self.server, self.params.silos
        offers = server.sampling_offer(round)
        contents = {s: _record(step="sampling-offer", envelope=_envelope_bytes(offers[s])) for s in range(n)}
        replies = self.exchange(contents, records.PROTOCOL1, round)
        for s in range(n):
            self._receive(server.receive_sampling_choice, _read_envelope(replies[s], s, round), s, round)
        transfers = server.sampling_transfer(round)
        contents = {
            s: _record(step="sampling-transfer", envelope=_envelope_bytes(transfers[s])) for s in range(n)
        }
        replies = self.exchange(contents, records.PROTOCOL1, round)
        digests: dict[int, dict[str, bytes]] = {s: {} for s in range(n)}
        for s in range(n):
            self._receive(server.receive_sampling_audit, _read_envelope(replies[s], s, round), s, round)
            for peer in range(n):
                if peer != s:
                    note = _read_envelope(replies[s], s, round, key=f"digest-{peer}")
                    if note.receiver != f"silo {peer}":
                        raise records.MalformedReply(
                            s, round, f"the digest for silo {peer} is addressed elsewhere"
                        )
                    digests[peer][f"digest-{s}"] = _envelope_bytes(
                        self._receive(server.relay, note, s, round)
                    )
        openings = server.sampling_openings(round)
        return {
            s: {"protocol1": ConfigRecord({"envelope": _envelope_bytes(openings[s]), **digests[s]})}
            for s in range(n)
        }

    def read_masked(self, content: RecordDict, silo: int, round: int) -> MaskedShare:
        records.reply_header(content, silo, round, "masked")
        return MaskedShare(silo, _read_envelope(content, silo, round))

    def weighted_sum(
        self, messages: list[MaskedShare], sampled: np.ndarray | None, round_index: int | None = None
    ) -> torch.Tensor:
        """sum_s sum_u sampled_u n_su / N_u Delta_su + sum_s z_s, decrypted from the silos' shares
        (`sampled` None under private sampling; the round is the one the shares name)."""
        import torch

        round = messages[0].envelope.round
        for m in messages:
            self._receive(self.server.receive_masked_sum, m.envelope, m.silo, round)
        total = self.server.aggregate(round)
        return torch.as_tensor(np.asarray(total, dtype=float), dtype=torch.get_default_dtype())


# --- the silo's side ------------------------------------------------------------------------
def _params(cfg: TrainConfig, working: WorkingSet, encoding: list) -> Any:
    from uldp.crypto.encoding import Encoding
    from uldp.crypto.protocol import ProtocolParams

    precision, n_max, value_bound = encoding
    return ProtocolParams(
        silos=working.ctx.n_silos,
        users=working.ctx.n_users,
        dimension=working.ctx.n_params,
        key_bits=cfg.key_bits,
        encoding=Encoding(precision=float(precision), n_max=int(n_max), value_bound=float(value_bound)),
        test_keys=cfg.test_keys,
        sampling=cfg.sampling_params() if cfg.private_sampling else None,
    )


def _load_party(context: Context, working: WorkingSet) -> Any:
    from uldp.crypto.protocol import Silo

    if PARTY not in context.state:
        raise ProtocolError("a Protocol 1 message arrived before the protocol's start")
    stored = context.state[PARTY]
    params = _params(working.cfg, working, json.loads(str(stored["encoding"])))
    return Silo.restore(_bytes(stored, "party"), params)


def _save_party(context: Context, party: Any, encoding: str) -> None:
    context.state[PARTY] = ConfigRecord({"party": party.export_state(), "encoding": encoding})


def silo_step(content: RecordDict, context: Context, working: WorkingSet) -> RecordDict:
    """One setup step at silo s: `start`, `keys` or `histogram` (see the module's docstring)."""
    from uldp.crypto.protocol import Silo
    from uldp.crypto.wire import loads

    record = content["protocol1"]
    step = record["step"]
    silo = working.data.silo
    if step == "start":
        encoding = str(record["encoding"])
        params = _params(working.cfg, working, json.loads(encoding))
        counts = np.bincount(working.data.users, minlength=working.ctx.n_users)
        limit = params.encoding.n_max // params.silos
        if counts.max(initial=0) > limit:
            # The refusal reaches the server: it says the bound, never the silo's own n_su.
            raise ProtocolError(
                f"silo {silo}: a user holds more than {limit} records here; Protocol 1 is exact for "
                f"N_u <= N_max = {params.encoding.n_max} and, as no party knows N_u, each of the "
                f"{params.silos} silos keeps n_su <= {limit}"
            )
        party = Silo(silo, counts, params, server_key=int(str(record["anchor"])))
        reply = _record(envelope=_envelope_bytes(party.dh_key()))
        _save_party(context, party, encoding)
        return reply
    party = _load_party(context, working)
    encoding = str(context.state[PARTY]["encoding"])
    if step == "keys":
        party.receive_paillier_key(loads(_bytes(record, "paillier")))
        party.receive_dh_keys(loads(_bytes(record, "dh_keys")))
        values: dict[str, Any] = {}
        if silo == 0:
            for envelope in party.sealed_seeds():
                values[f"sealed-{envelope.receiver.split()[-1]}"] = _envelope_bytes(envelope)
        else:
            values["ack"] = True
        _save_party(context, party, encoding)
        return _record(**values)
    if step == "histogram":
        if "sealed" in record:
            party.receive_sealed_seed(loads(_bytes(record, "sealed")))
        reply = _record(envelope=_envelope_bytes(party.blinded_histogram()))
        _save_party(context, party, encoding)
        return reply
    if step == "sampling-offer":
        reply = _record(envelope=_envelope_bytes(party.sampling_choice(loads(_bytes(record, "envelope")))))
        _save_party(context, party, encoding)
        return reply
    if step == "sampling-transfer":
        request, *notes = party.sampling_audit(loads(_bytes(record, "envelope")))
        values = {"envelope": _envelope_bytes(request)}
        values.update({f"digest-{note.receiver.split()[-1]}": _envelope_bytes(note) for note in notes})
        _save_party(context, party, encoding)
        return _record(**values)
    raise ProtocolError(f"unknown Protocol 1 step {step!r}")


def masked_reply(
    content: RecordDict, context: Context, working: WorkingSet, update: Any, round: int
) -> RecordDict:
    """Round (b)-(c) at silo s: its update, weighted under encryption and masked."""
    from uldp.crypto.wire import loads

    from ..algorithms.weighting import protocol_inputs

    party = _load_party(context, working)
    record = content["protocol1"]
    envelope = loads(_bytes(record, "envelope"))
    for key in sorted(k for k in record.keys() if k.startswith("digest-")):  # private sampling
        party.receive_sampling_digest(loads(_bytes(record, key)))
    rows, noise = protocol_inputs(update, working.ctx.n_users)
    masked = party.masked_sum(envelope, rows, noise)
    _save_party(context, party, str(context.state[PARTY]["encoding"]))
    return RecordDict(
        {
            "reply": ConfigRecord({"round": round, "silo": working.data.silo, "kind": "masked"}),
            "protocol1": ConfigRecord({"envelope": _envelope_bytes(masked)}),
        }
    )
