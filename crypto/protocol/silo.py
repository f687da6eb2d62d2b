"""A silo s of Protocol 1 (ULDP-FL §4.1).

A silo knows its own counts n_{s,u}, its users' clipped deltas and its noise share. From the
protocol it learns the other silos' DH public keys, the shared seed R (hence every r_u), and
Paillier ciphertexts Enc(B_inv(N_u)) it cannot decrypt: nothing about another silo's n_{s',u}
(Theorem 5, Appendix D.5).

A silo is created with the server's DH public key, obtained out of band (the trust anchor); it
keys its channel with the server from it at once, and its channel with every other silo from
their DH keys (setup (b)). Every message it receives is checked (`crypto.channel.Channels.unwrap`)
before it is used.

On Flower a silo's ClientApp is a fresh function call per message (in simulation, messages of one
node may even run in different worker processes), so the silo cannot live in memory from one
message to the next: `export_state` writes every secret and counter it needs to continue as bytes
for the node's own `context.state`, and `Silo.restore` rebuilds it before the next message. The
state never leaves the silo's node: it holds the DH private key, the channel keys, the seed R.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import gmpy2
import numpy as np

# The module, not its names: crypto.wire imports crypto.protocol.messages, whose package imports us.
from uldp.crypto import ot, wire
from uldp.crypto.channel import (
    KEY_BYTES,
    SERVER,
    SETUP_ROUND,
    Channels,
    ChannelsState,
    Envelope,
    encode,
    silo_name,
)
from uldp.crypto.dh import (
    MODP_3072_ORDER,
    MODP_3072_PRIME,
    DhKeyPair,
    generate_dh_keypair,
    keys_from_secret,
    shared_secret,
    validate_public_key,
)
from uldp.crypto.masking import add_masks, blind, pairwise_masks
from uldp.crypto.paillier import PublicKey, check_modulus
from uldp.crypto.prg import unit_elements
from uldp.crypto.protocol import sampling
from uldp.crypto.protocol.messages import (
    BlindedHistogramMessage,
    DhKeyMessage,
    DhKeysBroadcast,
    EncryptedWeightsMessage,
    MaskedSumMessage,
    Message,
    PaillierKeyMessage,
    SamplingAuditMessage,
    SamplingChoiceMessage,
    SamplingDigestMessage,
    SamplingOfferMessage,
    SamplingOpeningMessage,
    SamplingTransferMessage,
    SealedSeedMessage,
    SlotBoxes,
)
from uldp.crypto.protocol.params import ProtocolParams
from uldp.crypto.sealing import open_sealed, seal
from uldp.crypto.weighting import encrypted_weighted_sum, user_factors
from uldp.errors import ProtocolError, UldpError

SEED_OWNER = 0
"""The silo that draws R (setup (c))."""

SEED_BYTES = 32

M = TypeVar("M", bound=Message)

STATE_VERSION = 2
"""The layout of `SiloState`; a state of another version is refused, not misread (2: private sampling)."""


@dataclass(frozen=True)
class SiloSampling:
    """A silo's private-sampling round in progress (`crypto.protocol.sampling`), kept between messages.

    After the offer (`stage` "chosen"): the offers A_u, commitments, the silo's OT secrets b_u and
    choices B_u. After the transfer ("retrieved"): the secrets are gone; `weights` holds the
    ciphertext each user's slot opened (1, an encryption of 0, for the audited users, who sit the
    round out), and the audited users' slots and boxes are kept for the check of the openings;
    `agreed` lists the silos whose digest of the offer and boxes matched this silo's.
    """

    round: int
    stage: str
    offers: tuple[int, ...]
    commitments: tuple[bytes, ...]
    secrets: tuple[int, ...]
    choices: tuple[int, ...]
    weights: tuple[int, ...]
    audited: tuple[int, ...]
    audit_slots: tuple[bytes, ...]
    audit_boxes: tuple[SlotBoxes, ...]
    digest: bytes
    agreed: tuple[int, ...]


@dataclass(frozen=True)
class SiloState:
    """Everything a silo needs to continue Protocol 1 after its process ends (`Silo.export_state`).

    Ints, bytes, str and tuples only (`crypto.wire`). A value not known yet is an empty tuple: the
    Paillier modulus before setup (a), the seed R before setup (c). `silos`, `users`, `dimension`
    and the digest of every protocol parameter (`params_digest`) let `Silo.restore` refuse a state
    restored under other parameters; the parameters themselves are the caller's.
    """

    version: int
    silo: int
    silos: int
    users: int
    dimension: int
    params_digest: bytes
    counts: tuple[int, ...]
    dh_private: int
    dh_public: int
    channels: ChannelsState
    paillier_n: tuple[int, ...]
    mask_seeds: tuple[tuple[int, bytes], ...]
    seal_keys: tuple[tuple[int, bytes], ...]
    seed: tuple[bytes, ...]
    rounds_used: tuple[int, ...]
    sampling: tuple[SiloSampling, ...]
    last_offered: int


def params_digest(params: ProtocolParams) -> bytes:
    """SHA-256 of every field of `params` (floats as exact hex), to match a state with its params."""
    encoding = params.encoding
    fields = (
        "uldp/protocol1/params/v1",
        params.silos,
        params.users,
        params.dimension,
        params.key_bits,
        int(params.test_keys),
        float(encoding.precision).hex(),
        encoding.n_max,
        float(encoding.value_bound).hex(),
        *(
            ()
            if params.sampling is None
            else (
                "sampling",
                params.sampling.slots,
                params.sampling.real,
                float(params.sampling.audit_rate).hex(),
            )
        ),
    )
    return hashlib.sha256(encode(fields)).digest()


class Silo:
    """The party s: DH keys, the shared seed, blinded histograms and the encrypted weighting."""

    def __init__(
        self, silo_id: int, counts: Sequence[int] | np.ndarray, params: ProtocolParams, *, server_key: int
    ) -> None:
        """`server_key` is the server's DH public key, as distributed out of band (the trust anchor)."""
        if not 0 <= silo_id < params.silos:
            raise ProtocolError(f"silo id {silo_id} is not in [0, {params.silos})")
        counts = np.asarray(counts)
        if counts.shape != (params.users,):
            raise ProtocolError(
                f"silo {silo_id}: counts must have shape ({params.users},), got {counts.shape}"
            )
        if not np.issubdtype(counts.dtype, np.integer):
            raise ProtocolError(f"silo {silo_id}: counts n_su must be integers")
        for u, n_su in enumerate(counts.tolist()):
            params.encoding.check_count(int(n_su), f"n_(s={silo_id},u={u})")
        self.id = silo_id
        self.params = params
        self.inbox: list[object] = []
        self._counts = [int(c) for c in counts.tolist()]
        self._dh: DhKeyPair = generate_dh_keypair()
        self.channels = Channels(silo_name(silo_id))
        self.channels.connect_dh(self._dh, SERVER, validate_public_key(server_key))
        self._public_key: PublicKey | None = None
        self._mask_seeds: dict[int, bytes] = {}
        self._seal_keys: dict[int, bytes] = {}
        self._seed: bytes | None = secrets.token_bytes(SEED_BYTES) if silo_id == SEED_OWNER else None
        self._blinds: list[gmpy2.mpz] | None = None
        self._rounds_used: set[int] = set()
        self._sampling: SiloSampling | None = None
        self._last_offered = -1  # private sampling: each round is offered once, in increasing order
        self.audit_seconds = 0.0  # the last round's check of the openings (benchmarks)
        # Users whose slot opened no usable box in the last transfer: weight Enc(0), told to no one.
        self.unopened: tuple[int, ...] = ()

    def export_state(self) -> bytes:
        """This silo's secrets and counters as bytes (`SiloState` in the `crypto.wire` format).

        For the node's own Flower `context.state`, between two messages: Flower runs a ClientApp
        per message. The bytes hold the DH private key, the channel keys and the seed R, so they
        must never leave the silo's node. What is not kept: the inbox (what this call received)
        and the blinds r_u, which are derived from R again when needed.
        """
        state = SiloState(
            version=STATE_VERSION,
            silo=self.id,
            silos=self.params.silos,
            users=self.params.users,
            dimension=self.params.dimension,
            params_digest=params_digest(self.params),
            counts=tuple(self._counts),
            dh_private=self._dh.private,
            dh_public=self._dh.public,
            channels=self.channels.export_state(),
            paillier_n=() if self._public_key is None else (int(self._public_key.n),),
            mask_seeds=tuple(sorted(self._mask_seeds.items())),
            seal_keys=tuple(sorted(self._seal_keys.items())),
            seed=() if self._seed is None else (self._seed,),
            rounds_used=tuple(sorted(self._rounds_used)),
            sampling=() if self._sampling is None else (self._sampling,),
            last_offered=self._last_offered,
        )
        return encode(state)

    @classmethod
    def restore(cls, data: bytes, params: ProtocolParams) -> Silo:
        """The silo that `export_state` wrote as `data`, to continue the protocol under `params`.

        It refuses a replayed message and a used round index exactly as the silo that exported
        it would. ProtocolError if `data` is not a well-formed state, or is one for other params.
        """
        state = wire.decode(data, SiloState, what="silo state")
        _check_state(state, params)
        silo = cls.__new__(cls)  # not __init__: that draws fresh DH keys and a fresh seed
        silo.id = state.silo
        silo.params = params
        silo.inbox = []
        silo._counts = list(state.counts)
        silo._dh = DhKeyPair(state.dh_private, state.dh_public)
        silo.channels = Channels.restore(state.channels)
        silo._public_key = PublicKey(gmpy2.mpz(state.paillier_n[0])) if state.paillier_n else None
        silo._mask_seeds = dict(state.mask_seeds)
        silo._seal_keys = dict(state.seal_keys)
        silo._seed = state.seed[0] if state.seed else None
        silo._blinds = None
        silo._rounds_used = set(state.rounds_used)
        silo._sampling = state.sampling[0] if state.sampling else None
        silo._last_offered = state.last_offered
        silo.audit_seconds = 0.0
        silo.unopened = ()
        return silo

    # Setup (a).
    def dh_key(self) -> Envelope:
        """pk_s to the server, tagged under the key of the channel s -> A (key confirmation)."""
        return self.channels.wrap(
            SERVER, DhKeyMessage.KIND, SETUP_ROUND, DhKeyMessage(self.id, self._dh.public)
        )

    def receive_paillier_key(self, envelope: Envelope) -> None:
        """Accept A's PK only if it is authentic, has the agreed size λ, passes `check_modulus` and
        holds every possible aggregate."""
        self.inbox.append(envelope)
        message = self._receive(envelope, PaillierKeyMessage)
        check_modulus(message.n, self.params.key_bits, test_keys=self.params.test_keys)
        self.params.encoding.check_capacity(message.n, self.params.users, self.params.silos)
        self._public_key = PublicKey(gmpy2.mpz(message.n))

    # Setup (b): pairwise keys sk_{s,s'}, one per purpose, and the channel s <-> s'.
    def receive_dh_keys(self, envelope: Envelope) -> None:
        self.inbox.append(envelope)
        message = self._receive(envelope, DhKeysBroadcast)
        publics = dict(message.publics)
        if set(publics) != set(range(self.params.silos)) or publics[self.id] != self._dh.public:
            raise ProtocolError(f"silo {self.id}: the DH key broadcast is incomplete or altered")
        for peer, public in publics.items():
            if peer == self.id:
                continue
            secret = shared_secret(self._dh, public)
            keys = keys_from_secret(secret, self.id, peer, ("masks", "seed"))
            self._mask_seeds[peer], self._seal_keys[peer] = keys["masks"], keys["seed"]
            self.channels.connect(silo_name(peer), secret)

    # Setup (c): silo 0 seals R for each other silo; the server only relays.
    def sealed_seeds(self) -> list[Envelope]:
        if self.id != SEED_OWNER or self._seed is None:
            raise ProtocolError(f"silo {self.id}: only silo {SEED_OWNER} draws the shared seed R")
        return [
            self.channels.wrap(
                silo_name(peer),
                SealedSeedMessage.KIND,
                SETUP_ROUND,
                SealedSeedMessage(self.id, peer, seal(key, self._seed, _seed_context(peer))),
            )
            for peer, key in sorted(self._seal_keys.items())
        ]

    def receive_sealed_seed(self, envelope: Envelope) -> None:
        self.inbox.append(envelope)
        message = self._receive(envelope, SealedSeedMessage)
        if message.recipient != self.id or message.sender != SEED_OWNER:
            raise ProtocolError(
                f"silo {self.id}: sealed seed addressed to {message.recipient} from {message.sender}"
            )
        key = self._seal_keys.get(SEED_OWNER)
        if key is None:  # setup (b) never keyed this pair: nothing to open the seed with
            raise ProtocolError(f"silo {self.id}: a sealed seed before the DH key broadcast (setup (b))")
        self._seed = open_sealed(key, message.box, _seed_context(self.id))

    # Setup (d)-(e).
    def blinded_histogram(self) -> Envelope:
        """B'(n_{s,u}) = r_u n_{s,u} + sum_{s'>s} r^u_{s,s'} - sum_{s'<s} r^u_{s,s'} (mod n)."""
        n = self._modulus()
        blinded = blind(self._counts, self._multiplicative_blinds(), n)
        masks = pairwise_masks(self.id, self._mask_seeds, "histogram", self.params.users, n)
        message = BlindedHistogramMessage(self.id, tuple(int(v) for v in add_masks(blinded, masks, n)))
        return self.channels.wrap(SERVER, message.KIND, SETUP_ROUND, message)

    # Round (b)-(c).
    def masked_sum(
        self,
        envelope: Envelope,
        deltas: np.ndarray,
        noise: np.ndarray,
        *,
        method: str = "fast",
        workers: int | None = None,
    ) -> Envelope:
        """Enc(sum_u E(delta_{s,u}) n_{s,u} r_u C_LCM B_inv(N_u) + E(z_s) C_LCM + masks).

        `deltas` is (|U|, d): the clipped per-user deltas of this silo (rows of users without
        records here are ignored, their n_{s,u} being 0); `noise` is this silo's (d,) share.
        `method` is "fast" or "straightforward" (`crypto.weighting`).
        """
        inputs = self.weighting_inputs(envelope, deltas, noise)
        ciphertexts = encrypted_weighted_sum(self._public(), *inputs, method=method, workers=workers)
        message = MaskedSumMessage(self.id, envelope.round, tuple(int(c) for c in ciphertexts))
        return self.channels.wrap(SERVER, message.KIND, envelope.round, message)

    def weighting_inputs(
        self, envelope: Envelope, deltas: np.ndarray, noise: np.ndarray
    ) -> tuple[list, list, list, list]:
        """(Enc(B_inv(N_u)), k_u, E_{u,j}, offset_j) of round (b): what `crypto.weighting` needs.

        k_u = n_{s,u} r_u C_LCM mod n; E_{u,j} the signed fixed-point deltas; offset_j the
        encoded noise share times C_LCM plus this round's pairwise mask (round (c)).

        A round index already used is refused: its pairwise masks would be reused, and the
        difference of two masked sums under the same masks is the difference of the plaintexts.
        The envelope is checked after the caller's own inputs (shapes, value bound), so a call
        refused for bad deltas or noise can be repeated with the same envelope; once checked, it
        is used up (its sequence number), as a message on a real channel would be.
        """
        self.inbox.append(envelope)
        p = self.params
        deltas = np.asarray(deltas, dtype=float)
        noise = np.asarray(noise, dtype=float)
        if deltas.shape != (p.users, p.dimension):
            raise ProtocolError(
                f"silo {self.id}: deltas must have shape ({p.users}, {p.dimension}), got {deltas.shape}"
            )
        if noise.shape != (p.dimension,):
            raise ProtocolError(f"silo {self.id}: noise must have shape ({p.dimension},), got {noise.shape}")
        pk = self._public()
        encoding = p.encoding
        present = np.asarray(self._counts)[:, None] > 0
        fixed_flat = encoding.fixed_point(np.where(present, deltas, 0.0))
        fixed = [fixed_flat[u * p.dimension : (u + 1) * p.dimension] for u in range(p.users)]
        c_lcm = gmpy2.mpz(encoding.c_lcm)
        noise_terms = [gmpy2.mpz(z) * c_lcm for z in encoding.fixed_point(noise)]
        round_index, ciphertexts = self._round_weights(envelope)
        if len(ciphertexts) != p.users:
            raise ProtocolError(f"silo {self.id}: {len(ciphertexts)} encrypted weights for {p.users} users")
        if round_index in self._rounds_used:
            raise ProtocolError(
                f"silo {self.id}: round {round_index} was already used; a round "
                f"index must be fresh, or its pairwise masks would be reused"
            )
        masks = pairwise_masks(self.id, self._mask_seeds, f"round/{round_index}", p.dimension, pk.n)
        self._rounds_used.add(round_index)
        self._sampling = None
        offsets = add_masks(noise_terms, masks, pk.n)
        factors = user_factors(self._counts, self._multiplicative_blinds(), encoding.c_lcm, pk.n)
        weights = [gmpy2.mpz(c) for c in ciphertexts]
        return weights, factors, fixed, offsets

    def _round_weights(self, envelope: Envelope) -> tuple[int, tuple[int, ...]]:
        """(round, Enc(weight) per user): round (a)'s message, or under private sampling the
        ciphertexts the silo's OT opened, once the audit of the openings passed."""
        if self.params.sampling is not None:
            message = self._receive(envelope, SamplingOpeningMessage)
            return message.round, self.audited_weights(envelope.round, message)
        plain = self._receive(envelope, EncryptedWeightsMessage)
        if plain.round != envelope.round:
            raise ProtocolError(
                f"silo {self.id}: encrypted weights for round {plain.round} sent as {envelope.round}"
            )
        return plain.round, plain.ciphertexts

    # Private sampling (ULDP-FL §4.1; crypto/protocol/sampling.py).
    def sampling_choice(self, envelope: Envelope) -> Envelope:
        """Sampling (2): c_u from R for every user, and the OT choice B_u that hides it."""
        self.inbox.append(envelope)
        params = self._sampling_params()
        message = self._receive(envelope, SamplingOfferMessage)
        round_index = self._fresh_round(message.round, envelope.round)
        if round_index <= self._last_offered:
            # Offered again, the round would draw the same c_u and audit set from R, which the
            # server has seen by then: it could put the real key in every slot of the others.
            raise ProtocolError(
                f"silo {self.id}: round {round_index} was offered before (rounds are offered once, "
                f"in increasing order; the last was {self._last_offered})"
            )
        self._last_offered = round_index
        users = self.params.users
        if len(message.offers) != users or len(message.commitments) != users:
            raise ProtocolError(f"silo {self.id}: the sampling offer is not one per user of {users}")
        choices = sampling.slot_choices(self._shared_seed(), round_index, users, params.slots)
        drawn = [ot.choose(offer, c, params.slots) for offer, c in zip(message.offers, choices)]
        self._sampling = SiloSampling(
            round=round_index,
            stage="chosen",
            offers=message.offers,
            commitments=message.commitments,
            secrets=tuple(b for b, _ in drawn),
            choices=tuple(big_b for _, big_b in drawn),
            weights=(),
            audited=(),
            audit_slots=(),
            audit_boxes=(),
            digest=b"",
            agreed=(),
        )
        reply = SamplingChoiceMessage(self.id, round_index, self._sampling.choices)
        return self.channels.wrap(SERVER, reply.KIND, round_index, reply)

    def sampling_audit(self, envelope: Envelope) -> list[Envelope]:
        """Sampling (4): open this silo's slot of every user not audited; ask for the audit, and
        send every other silo the digest of the offer and boxes (through the server)."""
        self.inbox.append(envelope)
        params = self._sampling_params()
        pending = self._pending("chosen", envelope.round)
        message = self._receive(envelope, SamplingTransferMessage)
        if message.round != pending.round:
            raise ProtocolError(
                f"silo {self.id}: a transfer for round {message.round} in round {pending.round}"
            )
        users = self.params.users
        sampling.check_transfer_shape(message, users, params.slots)
        seed = self._shared_seed()
        audited = sampling.audited_users(seed, pending.round, users, params.audit_rate)
        skip = set(audited)
        choices = sampling.slot_choices(seed, pending.round, users, params.slots)
        nsquare = self._public().nsquare
        retrieved = [
            None
            if u in skip
            else sampling.retrieve(
                pending.round,
                u,
                pending.offers[u],
                pending.choices[u],
                pending.secrets[u],
                choices[u],
                message.slots[u],
                message.boxes[u],
                nsquare,
            )
            for u in range(users)
        ]
        # A slot that opened nothing usable counts as Enc(0), silently (`sampling.retrieve`).
        self.unopened = tuple(u for u, w in enumerate(retrieved) if w is None and u not in skip)
        weights = tuple(1 if w is None else w for w in retrieved)
        offer = SamplingOfferMessage(pending.round, pending.offers, pending.commitments)
        digest = sampling.offer_digest(offer, message.boxes)
        self._sampling = SiloSampling(
            round=pending.round,
            stage="retrieved",
            offers=pending.offers,
            commitments=pending.commitments,
            secrets=(),
            choices=pending.choices,
            weights=weights,
            audited=audited,
            audit_slots=tuple(message.slots[u] for u in audited),
            audit_boxes=tuple(message.boxes[u] for u in audited),
            digest=digest,
            agreed=(),
        )
        request = SamplingAuditMessage(self.id, pending.round, audited)
        out = [self.channels.wrap(SERVER, request.KIND, pending.round, request)]
        for peer in range(self.params.silos):
            if peer != self.id:
                note = SamplingDigestMessage(self.id, peer, pending.round, digest)
                out.append(self.channels.wrap(silo_name(peer), note.KIND, pending.round, note))
        return out

    def receive_sampling_digest(self, envelope: Envelope) -> None:
        """Another silo's digest of the offer and boxes, relayed: it must equal this silo's."""
        self.inbox.append(envelope)
        pending = self._pending("retrieved", envelope.round)
        message = self._receive(envelope, SamplingDigestMessage)
        if (
            envelope.sender != silo_name(message.sender)
            or message.recipient != self.id
            or message.round != pending.round
        ):
            raise ProtocolError(f"silo {self.id}: a sampling digest addressed elsewhere or for another round")
        if message.sender in pending.agreed:
            raise ProtocolError(f"silo {self.id}: a second sampling digest from silo {message.sender}")
        if message.digest != pending.digest:
            raise sampling.SamplingCheat(
                f"round {pending.round}: silo {message.sender} received another sampling offer or other "
                f"boxes than silo {self.id}: the server sent the silos different slots"
            )
        self._sampling = replace(pending, agreed=tuple(sorted((*pending.agreed, message.sender))))

    def audited_weights(self, round_index: int, message: SamplingOpeningMessage) -> tuple[int, ...]:
        """Check the openings of the audited users (`sampling.check_opening`) and every other
        silo's digest; the weights the OT gave, if all passed (`masked_sum` calls it on the
        envelope it verified; `audit_seconds` times the openings' check)."""
        params = self._sampling_params()
        pending = self._pending("retrieved", round_index)
        if message.round != pending.round:
            raise ProtocolError(
                f"silo {self.id}: openings for round {message.round} in round {pending.round}"
            )
        peers = set(range(self.params.silos)) - {self.id}
        if set(pending.agreed) != peers:
            raise ProtocolError(
                f"silo {self.id}: round {pending.round}: no sampling digest from silo(s) "
                f"{sorted(peers - set(pending.agreed))}; the silos cannot tell they got the same slots"
            )
        opened = {o.user: o for o in message.openings}
        if len(opened) != len(message.openings) or sorted(opened) != list(pending.audited):
            raise sampling.SamplingCheat(
                f"round {pending.round}: the server opened users {sorted(opened)}, not the audited "
                f"{list(pending.audited)}"
            )
        n = self._modulus()
        start = time.perf_counter()
        for position, u in enumerate(pending.audited):
            sampling.check_opening(
                pending.round,
                params,
                opened[u],
                pending.offers[u],
                pending.commitments[u],
                pending.choices[u],
                pending.audit_slots[position],
                pending.audit_boxes[position],
                n,
            )
        self.audit_seconds = time.perf_counter() - start
        return pending.weights

    def sampling_draws(self, round_index: int) -> tuple[list[int], tuple[int, ...]]:
        """(c_u per user, the audited users) of a round, from R: this silo's half of the realised
        sample (the other half, S_u, is the server's); for tests and benchmarks."""
        params = self._sampling_params()
        seed = self._shared_seed()
        return (
            sampling.slot_choices(seed, round_index, self.params.users, params.slots),
            sampling.audited_users(seed, round_index, self.params.users, params.audit_rate),
        )

    def _fresh_round(self, round_index: int, envelope_round: int) -> int:
        if round_index != envelope_round:
            raise ProtocolError(f"silo {self.id}: a message for round {round_index} sent as {envelope_round}")
        if round_index in self._rounds_used or round_index < 0:
            raise ProtocolError(f"silo {self.id}: round {round_index} was already used")
        return round_index

    def _pending(self, stage: str, round_index: int) -> SiloSampling:
        pending = self._sampling
        if pending is None or pending.stage != stage or pending.round != round_index:
            where = "none" if pending is None else f"round {pending.round} at stage {pending.stage!r}"
            raise ProtocolError(
                f"silo {self.id}: a private-sampling message of round {round_index} out of order "
                f"(this silo expected stage {stage!r}; it holds {where})"
            )
        return pending

    def _sampling_params(self) -> sampling.SamplingParams:
        if self.params.sampling is None:
            raise ProtocolError(
                f"silo {self.id}: private sampling was not agreed in the protocol's parameters"
            )
        return self.params.sampling

    def _shared_seed(self) -> bytes:
        if self._seed is None:
            raise ProtocolError(f"silo {self.id}: setup (c) has not run: no shared seed R")
        return self._seed

    def _multiplicative_blinds(self) -> list[gmpy2.mpz]:
        """r_u for every user, expanded from R: the same at every silo, unknown to the server."""
        if self._blinds is None:
            if self._seed is None:
                raise ProtocolError(f"silo {self.id}: setup (c) has not run: no shared seed R")
            self._blinds = unit_elements(
                self._seed, "multiplicative-blinds", self.params.users, self._modulus()
            )
        return self._blinds

    def _receive(self, envelope: Envelope, message_type: type[M]) -> M:
        """The verified payload of `envelope`, checked to be a `message_type`."""
        message = self.channels.unwrap(envelope, message_type.KIND)
        if not isinstance(message, message_type):
            raise ProtocolError(f"silo {self.id}: {envelope.sender} sent a malformed {envelope.kind} message")
        return message

    def _public(self) -> PublicKey:
        if self._public_key is None:
            raise ProtocolError(f"silo {self.id}: setup (a) has not run: no Paillier key")
        return self._public_key

    def _modulus(self) -> gmpy2.mpz:
        return self._public().n


def _check_state(state: SiloState, params: ProtocolParams) -> None:
    """ProtocolError unless `state` is a consistent silo state made under `params`."""
    where = f"silo state (silo {state.silo})"
    if state.version != STATE_VERSION:
        raise ProtocolError(f"{where}: version {state.version}, this code reads version {STATE_VERSION}")
    if len(state.sampling) > 1 or any(x.stage not in ("chosen", "retrieved") for x in state.sampling):
        raise ProtocolError(f"{where}: at most one private-sampling round in progress, at a known stage")
    if state.sampling and params.sampling is None:
        raise ProtocolError(f"{where}: a private-sampling round in progress, but private sampling is off")
    made = (state.silos, state.users, state.dimension)
    given = (params.silos, params.users, params.dimension)
    if made != given or state.params_digest != params_digest(params):
        raise ProtocolError(
            f"{where} was made under other protocol parameters: silos, users, d = {made}, "
            f"now {given}" + ("" if made != given else " (and another key size or encoding)")
        )
    if not 0 <= state.silo < params.silos:
        raise ProtocolError(f"{where}: the silo id is not in [0, {params.silos})")
    if len(state.counts) != params.users:
        raise ProtocolError(f"{where}: {len(state.counts)} counts for {params.users} users")
    try:
        for u, n_su in enumerate(state.counts):
            params.encoding.check_count(n_su, f"n_(s={state.silo},u={u})")
    except UldpError as error:
        raise ProtocolError(f"{where}: {error}") from None
    if not (2 <= state.dh_private < MODP_3072_ORDER and 1 < state.dh_public < MODP_3072_PRIME - 1):
        raise ProtocolError(f"{where}: the DH key pair is out of range")
    if state.channels.name != silo_name(state.silo):
        raise ProtocolError(f"{where}: the channels are those of {state.channels.name}")
    others = set(range(params.silos)) - {state.silo}
    for name, keys in (("mask seeds", state.mask_seeds), ("sealing keys", state.seal_keys)):
        peers = [peer for peer, _ in keys]
        if len(set(peers)) != len(peers) or not set(peers) <= others:
            raise ProtocolError(f"{where}: {name} for silos {peers}, not other silos of {params.silos}")
        if any(len(key) != KEY_BYTES for _, key in keys):
            raise ProtocolError(f"{where}: {name} must be {KEY_BYTES} bytes each")
    if len(state.paillier_n) > 1 or len(state.seed) > 1 or any(len(r) != SEED_BYTES for r in state.seed):
        raise ProtocolError(f"{where}: at most one Paillier modulus and one {SEED_BYTES}-byte seed R")
    try:
        for n in state.paillier_n:
            check_modulus(n, params.key_bits, test_keys=params.test_keys)
    except UldpError as error:
        raise ProtocolError(f"{where}: {error}") from None
    if state.last_offered < -1 or any(x.round > state.last_offered for x in state.sampling):
        raise ProtocolError(f"{where}: a private-sampling round in progress that was never offered")
    if any(t < 0 for t in state.rounds_used):
        raise ProtocolError(f"{where}: a negative round index among the rounds used")


def _seed_context(recipient: int) -> bytes:
    return f"uldp/protocol1/seed-R/{SEED_OWNER}->{recipient}".encode()
