"""A participant i of one secure-aggregation round: Algorithm 3 of Baek et al. (2021), user side.

    advertise()            lines 13-14  fresh key pairs (c_i, s_i) and seed b_i; send c_i^PK, s_i^PK,
                                        the Ed25519 key of its signatures and c(b_i) (`authentication`)
    share_keys(broadcast)  lines 19-21  Shamir (k, n) shares of b_i and s_i^SK, e_{i,j} under c_{i,j}
    masked_input(x, inbox) lines 27, 32 open the e_{j,i}; y_i = enc(x) + H(b_i) + sum_{j>i} H(s_{i,j})
                                        - sum_{j<i} H(s_{i,j}) mod 2^64, j over the peers whose
                                        shares arrived (Bonawitz et al.'s U_2); signed
    unmask(request)        line 33      shares of b_j for the survivors, of s_j^SK for the dropped; signed

What a participant receives is public keys, ciphertexts addressed to it, and lists of ids: with
one share of each peer's secrets (k >= 2) it can rebuild none of them, and it never sees another
participant's masked input. It reveals, once per round, either the b-share or the s^SK-share of
each peer and never both (both would let the server strip every mask off that peer's y), and
nothing at all when fewer than k survivors are listed.

Each step is one-shot, in order: a second `masked_input` under the same masks would hand the
server the difference of two inputs, a second `unmask` could ask for the other kind of share. On
Flower the object does not outlive a message: `export_state` writes what the next step needs as
bytes (private keys, seed and shares: the node's own secret state, never to be sent) and
`from_state` rebuilds it. The node must store the state of each step before it sends that step's
message and never restore an older one, or the one-shot checks above can be replayed around.
Secrets a later step does not need are dropped from the state as soon as they are used.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import numpy as np

from uldp.crypto.channel import encode
from uldp.crypto.secagg.authentication import (
    SIGNING_KEY_BYTES,
    SigningKeyPair,
    generate_signing_keypair,
    seed_commitment,
    sign,
    signing_public_key_of,
)
from uldp.crypto.secagg.keys import (
    KEY_BYTES,
    X25519KeyPair,
    agree,
    generate_keypair,
    load_private_key,
    mask_seed,
    public_key_of,
    share_key,
)
from uldp.crypto.secagg.masks import SEED_BYTES, MaskGenerator
from uldp.crypto.secagg.messages import (
    SESSION_BYTES,
    AdvertiseKeys,
    KeyBroadcast,
    MaskedInput,
    SecAggMessage,
    ShareInbox,
    ShareKeys,
    UnmaskRequest,
    UnmaskResponse,
)
from uldp.crypto.secagg.params import MAX_ID, SecAggParams, check_id
from uldp.crypto.secagg.sealed_shares import open_shares, seal_shares
from uldp.crypto.secagg.shamir import PRIME, share_secret
from uldp.errors import InvalidParameter, ProtocolError

STATE_VERSION = "uldp/secagg/participant-state/v2"
"""v2 (issue 32): the Ed25519 signing key joined the state."""


@dataclass(frozen=True)
class HeldShares:
    """The shares of `owner`'s b and s^SK at this participant's point."""

    owner: int
    seed_share: int = field(repr=False)
    key_share: int = field(repr=False)


@dataclass(frozen=True)
class ParticipantState:
    """A participant between two steps, as `export_state` writes it (secret: stays on its node).

    Each secret is kept only while a later step needs it: c_i^SK until `share_keys` (which derives
    the keys to open the peers' shares, `open_keys`, kept until `masked_input`), s_i^SK and b_i
    until `masked_input`, the held shares and the signing key until `unmask`; anything no longer
    needed is empty.
    """

    version: str
    participant: int
    round: int
    threshold: int
    dimension: int
    bound: str
    """float.hex of the bound: the wire format has no floats, and the hex form is exact."""
    frac_bits: int
    phase: str
    session: bytes
    c_private: bytes = field(repr=False)
    s_private: bytes = field(repr=False)
    sign_private: bytes = field(repr=False)
    seed: bytes = field(repr=False)
    open_keys: tuple[tuple[int, bytes], ...] = field(repr=False)
    peers: tuple[AdvertiseKeys, ...]
    held: tuple[HeldShares, ...] = field(repr=False)
    masked_with: tuple[int, ...]


class SecAggParticipant:
    """Participant `participant` (an id in [0, 2^63); its Shamir point is id + 1) in round `round`."""

    def __init__(self, participant: int, params: SecAggParams, *, round: int) -> None:
        self.id = check_id(participant, "participant")
        self.round = check_id(round, "round")
        self.params = params
        self.phase = "keys"
        self.session = b""
        self._c: X25519KeyPair | None = generate_keypair()
        self._s: X25519KeyPair | None = generate_keypair()
        self._sign: SigningKeyPair | None = generate_signing_keypair()
        self._seed: bytes | None = secrets.token_bytes(SEED_BYTES)
        self._open_keys: dict[int, bytes] = {}
        self._peers: dict[int, AdvertiseKeys] = {}
        self._held: dict[int, tuple[int, int]] = {}
        self._masked_with: tuple[int, ...] = ()

    def __repr__(self) -> str:
        return f"SecAggParticipant(id={self.id}, round={self.round}, phase={self.phase!r})"

    # -- the steps -------------------------------------------------------------------------------

    def advertise(self) -> AdvertiseKeys:
        """(c_i^PK, s_i^PK), line 14, with the key that verifies this participant's signatures and c(b_i)."""
        self._expect("advertise", "keys")
        return self._advertisement()

    def _advertisement(self) -> AdvertiseKeys:
        c, s, signing, seed = self._c, self._s, self._sign, self._seed
        assert c is not None and s is not None and signing is not None and seed is not None
        commitment = seed_commitment(seed, round_number=self.round, participant=self.id)
        return AdvertiseKeys(self.id, self.round, c.public, s.public, signing.public, commitment)

    def share_keys(self, broadcast: KeyBroadcast) -> ShareKeys:
        """Shares of b_i and s_i^SK for every participant of `broadcast`, encrypted for each (lines 19-21)."""
        self._expect("share_keys", "keys")
        c, s, seed = self._c, self._s, self._seed
        assert c is not None and s is not None and seed is not None
        self._check_round(broadcast)
        keys = broadcast.by_participant()
        mine = keys.get(self.id)
        if mine is None or mine != self._advertisement():
            raise ProtocolError(
                f"participant {self.id}: the key broadcast of round {self.round} omits or misstates "
                f"its own keys"
            )
        publics = [k.c_public for k in keys.values()] + [k.s_public for k in keys.values()]
        if len(set(publics)) != len(publics):
            raise ProtocolError(
                f"participant {self.id}: the key broadcast of round {self.round} repeats a key"
            )
        if len(keys) < self.params.threshold:
            raise ProtocolError(
                f"participant {self.id}: only {len(keys)} participants advertised keys in round "
                f"{self.round}, below the threshold k = {self.params.threshold}"
            )
        self.params.fixed_point.check_capacity(len(keys))
        points = {pid: pid + 1 for pid in keys}  # ids < 2^63 < p: always points of the field
        seed_shares = share_secret(seed, self.params.threshold, points.values())
        key_shares = share_secret(s.private, self.params.threshold, points.values())
        own = load_private_key(c.private)
        session, sealed, open_keys = broadcast.session, [], {}
        for pid in sorted(keys):
            if pid == self.id:
                continue
            # One X25519 per peer gives both directions' keys: i -> j to seal now, j -> i to open later.
            secret = agree(own, keys[pid].c_public, peer=pid)
            seal_key = share_key(
                secret, session=session, round_number=self.round, sender=self.id, receiver=pid
            )
            open_keys[pid] = share_key(
                secret, session=session, round_number=self.round, sender=pid, receiver=self.id
            )
            sealed.append(
                seal_shares(
                    seal_key,
                    session=session,
                    round_number=self.round,
                    sender=self.id,
                    receiver=pid,
                    seed_share=seed_shares[points[pid]],
                    key_share=key_shares[points[pid]],
                )
            )
        x = points[self.id]
        self._held = {self.id: (seed_shares[x], key_shares[x])}
        self._c, self._open_keys = None, open_keys  # c_i^SK has served
        self._peers, self.session, self.phase = keys, session, "shared"
        return ShareKeys(self.id, self.round, session, tuple(sealed))

    def masked_input(self, vector: np.ndarray, inbox: ShareInbox) -> MaskedInput:
        """y_i (line 27), after opening the shares of `inbox` (line 32, done here so that a forgery
        stops the round before any input is sent)."""
        self._expect("masked_input", "shared")
        s, seed = self._s, self._seed
        assert s is not None and seed is not None
        self._check_round(inbox)
        if inbox.receiver != self.id:
            raise ProtocolError(
                f"participant {self.id} received the share inbox of participant {inbox.receiver} "
                f"(round {self.round}): misdelivered"
            )
        codes = self._encode(vector)
        held = dict(self._held)
        for share in inbox.shares:
            who = (
                f"share from participant {share.sender} to participant {share.receiver} (round {self.round})"
            )
            if share.receiver != self.id:
                raise ProtocolError(f"{who} was delivered to participant {self.id}: re-addressed, not used")
            key = self._open_keys.get(share.sender)
            if key is None:
                raise ProtocolError(f"{who}: its sender is not another participant of the key broadcast")
            if share.sender in held:
                raise ProtocolError(f"{who} arrived twice")
            held[share.sender] = open_shares(key, share, session=self.session, round_number=self.round)
        peers = tuple(sorted(set(held) - {self.id}))
        if len(peers) + 1 < self.params.threshold:
            raise ProtocolError(
                f"participant {self.id}: shares from only {len(peers)} others in round {self.round}; "
                f"with itself below the threshold k = {self.params.threshold}, it sends no input"
            )
        own_s = load_private_key(s.private)
        plus, minus = [seed], list[bytes]()
        for j in peers:  # the peers whose shares arrived: U_2, as the server forwarded it
            secret = agree(own_s, self._peers[j].s_public, peer=j)
            (plus if self.id < j else minus).append(
                mask_seed(secret, session=self.session, round_number=self.round, i=self.id, j=j)
            )
        MaskGenerator(self.params.dimension).apply(codes, plus, minus)
        # b_i, s_i^SK and the opening keys have served: only the held shares are needed from here on.
        self._s = self._seed = None
        self._open_keys = {}
        self._held, self._masked_with, self.phase = held, peers, "masked"
        masked = codes.astype("<u8", copy=False).tobytes()
        return MaskedInput(
            self.id, self.round, self.session, masked, self._signature(MaskedInput.KIND, masked)
        )

    def unmask(self, request: UnmaskRequest) -> UnmaskResponse:
        """b-shares of the survivors and s^SK-shares of the dropped (line 33): once, never both for a peer."""
        if self.phase == "done":
            raise ProtocolError(
                f"participant {self.id} already answered an unmask request in round {self.round}; "
                f"a second one could ask for the other share of the same peer: refused"
            )
        self._expect("unmask", "masked")
        self._check_round(request)
        survivors, dropped = set(request.survivors), set(request.dropped)
        if len(survivors) != len(request.survivors) or len(dropped) != len(request.dropped):
            raise ProtocolError(
                f"participant {self.id}: the unmask request of round {self.round} repeats an id"
            )
        both = sorted(survivors & dropped)
        if both:
            raise ProtocolError(
                f"participant {self.id}: the unmask request of round {self.round} asks for both the "
                f"mask-seed and the key share of participant(s) {both}, which together unmask an "
                f"individual input; refused, nothing revealed"
            )
        if self.id not in survivors:
            raise ProtocolError(
                f"participant {self.id} sent its masked input in round {self.round} but the unmask request "
                f"does not list it among the survivors; refused, nothing revealed"
            )
        unknown = sorted((survivors | dropped) - set(self._held))
        if unknown:
            raise ProtocolError(
                f"participant {self.id}: the unmask request of round {self.round} names participant(s) "
                f"{unknown} whose shares it never received; refused, nothing revealed"
            )
        if len(survivors) < self.params.threshold:
            raise ProtocolError(
                f"participant {self.id}: only {len(survivors)} survivors in round {self.round}, below the "
                f"threshold k = {self.params.threshold}; refused, nothing revealed"
            )
        seed_shares = tuple((owner, self._held[owner][0]) for owner in sorted(survivors))
        key_shares = tuple((owner, self._held[owner][1]) for owner in sorted(dropped))
        content = encode((seed_shares, key_shares))  # UnmaskResponse.signed_content
        signature = self._signature(UnmaskResponse.KIND, content)
        response = UnmaskResponse(self.id, self.round, self.session, seed_shares, key_shares, signature)
        self._held, self._sign, self.phase = {}, None, "done"
        return response

    def _signature(self, kind: str, content: bytes) -> bytes:
        assert self._sign is not None
        return sign(
            self._sign.private,
            kind,
            session=self.session,
            round_number=self.round,
            sender=self.id,
            content=content,
        )

    # -- state between two messages ----------------------------------------------------------------

    def export_state(self) -> bytes:
        """Everything the next step needs, as bytes for the node's own state (secret: never send it)."""
        params = self.params
        state = ParticipantState(
            version=STATE_VERSION,
            participant=self.id,
            round=self.round,
            threshold=params.threshold,
            dimension=params.dimension,
            bound=float(params.bound).hex(),
            frac_bits=params.frac_bits,
            phase=self.phase,
            session=self.session,
            c_private=self._c.private if self._c else b"",
            s_private=self._s.private if self._s else b"",
            sign_private=self._sign.private if self._sign else b"",
            seed=self._seed or b"",
            open_keys=tuple(sorted(self._open_keys.items())),
            peers=tuple(self._peers[pid] for pid in sorted(self._peers)),
            held=tuple(HeldShares(owner, *self._held[owner]) for owner in sorted(self._held)),
            masked_with=self._masked_with,
        )
        return encode(state)

    @classmethod
    def from_state(cls, data: bytes) -> SecAggParticipant:
        """The participant `export_state` wrote as `data`; ProtocolError unless it is a consistent state."""
        from uldp.crypto.wire import decode  # see messages.SecAggMessage.from_bytes

        state = decode(data, ParticipantState, what="secure-aggregation participant state")
        problem = _state_problem(state)
        if problem:
            raise ProtocolError(f"secure-aggregation participant state: {problem}")
        try:
            params = SecAggParams(
                state.threshold, state.dimension, float.fromhex(state.bound), state.frac_bits
            )
        except (InvalidParameter, ValueError) as error:
            raise ProtocolError(f"secure-aggregation participant state: bad parameters ({error})") from None
        participant = cls.__new__(cls)
        participant.id, participant.round, participant.params = state.participant, state.round, params
        participant.phase, participant.session = state.phase, state.session
        participant._c = _keypair(state.c_private)
        participant._s = _keypair(state.s_private)
        participant._sign = (
            SigningKeyPair(state.sign_private, signing_public_key_of(state.sign_private))
            if state.sign_private
            else None
        )
        participant._seed = state.seed or None
        participant._open_keys = dict(state.open_keys)
        participant._peers = {k.participant: k for k in state.peers}
        participant._held = {h.owner: (h.seed_share, h.key_share) for h in state.held}
        participant._masked_with = state.masked_with
        return participant

    # -- checks --------------------------------------------------------------------------------------

    def _expect(self, step: str, phase: str) -> None:
        if self.phase != phase:
            raise ProtocolError(
                f"participant {self.id}: {step} is not the next step in round {self.round} "
                f"(it is past {self.phase!r}); each step runs once, in order"
            )

    def _check_round(self, message: SecAggMessage) -> None:
        got = getattr(message, "round", None)
        if got != self.round:
            raise ProtocolError(
                f"participant {self.id} in round {self.round} received a {message.KIND} message "
                f"of round {got}"
            )
        session = getattr(message, "session", b"")
        if self.session and session != self.session:
            raise ProtocolError(
                f"participant {self.id} received a {message.KIND} message of another session "
                f"(round {self.round})"
            )

    def _encode(self, vector: np.ndarray) -> np.ndarray:
        x = np.asarray(vector)
        if x.shape != (self.params.dimension,):
            raise InvalidParameter(
                f"participant {self.id}'s input has shape {x.shape}; "
                f"dimension = {self.params.dimension} expected"
            )
        if not np.issubdtype(x.dtype, np.floating) and not np.issubdtype(x.dtype, np.integer):
            raise InvalidParameter(f"participant {self.id}'s input must be numeric, got {x.dtype}")
        return self.params.fixed_point.encode(x)


def _keypair(private: bytes) -> X25519KeyPair | None:
    return X25519KeyPair(private, public_key_of(private)) if private else None


NEEDS = {
    # The phases, in order (before share_keys, after it, after masked_input, after unmask), and what
    # each keeps: (c_i^SK, s_i^SK and b_i, the keys to open the peers' shares, session and broadcast,
    # the signing key).
    "keys": (True, True, False, False, True),
    "shared": (False, True, True, True, True),
    "masked": (False, False, False, True, True),
    "done": (False, False, False, True, False),
}


def _state_problem(state: ParticipantState) -> str | None:
    """What makes `state` inconsistent, or None."""
    if state.version != STATE_VERSION:
        return f"version {state.version!r}, expected {STATE_VERSION!r}"
    if state.phase not in NEEDS:
        return f"unknown phase {state.phase!r}"
    if not (0 <= state.participant <= MAX_ID and 0 <= state.round <= MAX_ID):
        return "participant id or round outside [0, 2^63 - 1]"
    c_key, s_key_and_seed, open_keys, session, signing_key = NEEDS[state.phase]
    phase = f"phase {state.phase!r}"
    if len(state.c_private) != (KEY_BYTES if c_key else 0):
        return f"c_i^SK does not fit {phase}"
    if len(state.sign_private) != (SIGNING_KEY_BYTES if signing_key else 0):
        return f"the signing key does not fit {phase}"
    if {len(state.s_private), len(state.seed)} != ({KEY_BYTES} if s_key_and_seed else {0}):
        return f"s_i^SK or b_i does not fit {phase}"
    if bool(state.open_keys) != open_keys or any(len(key) != KEY_BYTES for _, key in state.open_keys):
        return f"the keys to open the peers' shares do not fit {phase}"
    if len(state.session) != (SESSION_BYTES if session else 0) or bool(state.peers) != session:
        return f"session id or key broadcast does not fit {phase}"
    peer_ids = {k.participant for k in state.peers}
    if session and state.participant not in peer_ids:
        return "the key broadcast does not list the participant itself"
    if any(pid == state.participant or pid not in peer_ids for pid, _ in state.open_keys):
        return "a key to open the shares of a participant outside the key broadcast"
    owners = [h.owner for h in state.held]
    if not set(owners) <= peer_ids:
        return "held shares of a participant outside the key broadcast"
    values = [v for h in state.held for v in (h.seed_share, h.key_share)]
    if len(set(owners)) != len(owners) or any(not 0 <= v < PRIME for v in values):
        return "held shares repeat an owner or leave the field"
    if state.phase == "masked" and not set(state.masked_with) <= set(owners):
        return "masked with a participant whose shares it does not hold"
    return None
