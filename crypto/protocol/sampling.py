"""Private user-level sub-sampling for Protocol 1 (ULDP-FL §4.1, "Private user-level sub-sampling").

Under plain sampling the server draws who takes part in round t and sets B_inv(N_u) = 0 for the
others (Protocol 1 step 2(a)): it knows the sample, so its own view is not amplified. §4.1 hides
the sample with a 1-out-of-P oblivious transfer; here, per round t and user u:

- the server picks the user's real slots S_u, m of the P slots (its secret), a fresh OT offer
  A_u = g^(a_u), a commitment H(t, u, S_u, nonce_u), fresh ciphertexts E1 = Enc(B_inv(N_u)) and
  E0 = Enc(0; r_u), and two one-time keys K1, K0; it seals E1 under K1 and E0 under K0 and sends
  the two boxes in random order. Slot i carries K1 if i is in S_u and K0 otherwise;
- every silo derives the same choice c_u, uniform on [0, P), from the silos' seed R, which the
  server does not have, and fetches slot c_u by a 1-out-of-P OT (`crypto.ot`, Chou-Orlandi): the
  server learns nothing of c_u, the silo learns one key only, opens one box and holds a
  ciphertext of B_inv(N_u) or of 0 without knowing which (Paillier is semantically secure);
- user u takes part iff c_u is in S_u: with probability m / P exactly, since c_u is uniform and
  independent of S_u, whoever of the two chose theirs first. Neither party knows the sample.

Only two Paillier ciphertexts are made per user, not the P of §4.1's description (the real one
among P - 1 encryptions of 0): the OT transfers a 32-byte key, and the silo sees a single box's
contents, so the slots need not hold distinct ciphertexts.

The audit (what the silos check; docs/protocol.md, "Private sampling"): a server that put K1 in
more than m slots would raise q unnoticed. After the transfer, each user is audited with
probability `audit_rate`, drawn from R (so the server could not foresee it); the server opens an
audited user's secrets (a_u, S_u and its nonce, r_u), and each silo recomputes every slot key,
checks the commitment, that exactly the m slots of S_u carry one key and the others the other,
and that the K0 box holds r_u^n = Enc(0; r_u). An audited user is left out of the round (its
ciphertexts are discarded), so the opening reveals nothing about the training. The silos also
compare digests of the offer and the boxes through their own authenticated channels, so the
server cannot show silos different commitments. A server cheating on k users of a round escapes
with probability (1 - audit_rate)^k.

Leaving audited users out lowers each user's rate to (1 - audit_rate) m / P: accounting at
m / P, as uldp does, is an upper bound (the sub-sampled Gaussian's RDP grows with q).
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import gmpy2

from uldp.crypto import ot
from uldp.crypto.channel import encode
from uldp.crypto.paillier import PrivateKey
from uldp.crypto.prg import field_element
from uldp.crypto.protocol.messages import (
    SamplingOfferMessage,
    SamplingTransferMessage,
    SlotBoxes,
    SlotOpening,
)
from uldp.crypto.sealing import open_sealed, seal
from uldp.errors import InvalidParameter, ProtocolError

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_AUDIT_RATE = 0.05
"""Each user is audited with this probability each round: a server cheating on 60 users of a
round is caught with probability 95%, one cheating on one user every round of 100 with 99.4%."""

NONCE_BYTES = 32
_AUDIT_RESOLUTION = 2**64


class SamplingCheat(ProtocolError):
    """An audit found the server's slots not as committed: it raised the sampling rate (or tried)."""


@dataclass(frozen=True)
class SamplingParams:
    """P slots, m of them real (q = m / P), and the audit rate a: what all parties agree on."""

    slots: int
    real: int
    audit_rate: float = DEFAULT_AUDIT_RATE

    def __post_init__(self) -> None:
        if isinstance(self.slots, bool) or not isinstance(self.slots, int) or self.slots < 2:
            raise InvalidParameter(f"private sampling needs P >= 2 slots, got {self.slots!r}")
        if isinstance(self.real, bool) or not isinstance(self.real, int) or not 1 <= self.real < self.slots:
            raise InvalidParameter(
                f"private sampling needs 1 <= m < P real slots (q = m / P in (0, 1)), got m = {self.real!r} "
                f"of P = {self.slots}"
            )
        if not 0 <= self.audit_rate < 1:
            raise InvalidParameter(f"the audit rate must be in [0, 1), got {self.audit_rate!r}")

    @property
    def q(self) -> float:
        return self.real / self.slots


def slot_choices(seed: bytes, round_index: int, users: int, slots: int) -> list[int]:
    """c_u for every user: uniform on [0, P), the same at every silo (from R), unknown to the server."""
    return [int(field_element(seed, f"sampling/choice/{round_index}", u, slots)) for u in range(users)]


def audited_users(seed: bytes, round_index: int, users: int, rate: float) -> tuple[int, ...]:
    """The users the silos audit in this round: each with probability `rate`, drawn from R."""
    threshold = int(rate * _AUDIT_RESOLUTION)
    label = f"sampling/audit/{round_index}"
    return tuple(u for u in range(users) if field_element(seed, label, u, _AUDIT_RESOLUTION) < threshold)


def ot_context(round_index: int, user: int) -> bytes:
    """What every OT key of (round, user) is bound to, so keys never repeat across transfers."""
    return f"uldp/protocol1/sampling/{round_index}/{user}".encode()


def commitment(round_index: int, user: int, subset: Sequence[int], nonce: bytes) -> bytes:
    """H(round, user, S_u, nonce): hiding (the 256-bit nonce) and binding (SHA-256)."""
    data = encode(("uldp/protocol1/sampling/subset", round_index, user, tuple(subset), nonce))
    return hashlib.sha256(data).digest()


def offer_digest(offer: SamplingOfferMessage, boxes: Sequence[SlotBoxes]) -> bytes:
    """What the silos compare: the offer and the boxes, which the server sends every silo alike."""
    return hashlib.sha256(encode(("uldp/protocol1/sampling/digest", offer, tuple(boxes)))).digest()


def _box_context(round_index: int, user: int) -> bytes:
    return f"uldp/protocol1/sampling/box/{round_index}/{user}".encode()


@dataclass
class ServerRound:
    """The server's secrets of one round's private sampling, and what it received so far."""

    offers: list[ot.Offer]
    subsets: list[tuple[int, ...]]
    nonces: list[bytes]
    keys: list[tuple[bytes, bytes]]  # (K0, K1) per user
    zero_randomness: list[gmpy2.mpz] = field(default_factory=list)
    offer: SamplingOfferMessage | None = None
    boxes: tuple[SlotBoxes, ...] = ()
    choices: dict[int, tuple[int, ...]] = field(default_factory=dict)
    audits: dict[int, tuple[int, ...]] = field(default_factory=dict)
    audited: tuple[int, ...] | None = None
    # Per user, (A_u^(a_u))^(-1) (`ot.sender_step`): the same for every silo's transfer.
    _steps: dict[int, gmpy2.mpz] = field(init=False, default_factory=dict, repr=False, compare=False)


def server_round(
    round_index: int, users: int, params: SamplingParams
) -> tuple[ServerRound, list[int], list[bytes]]:
    """Fresh secrets for a round: S_u uniform among the m-subsets of [P], a_u, nonces, keys.

    Returns them with the public parts: the offers A_u and the commitments to S_u.
    """
    rng = secrets.SystemRandom()
    exponents = [ot.random_exponent() for _ in range(users)]  # ot.offer(), g^a on every core
    offers = [ot.Offer(a, big_a) for a, big_a in zip(exponents, _map_in_threads(ot.public_of, exponents))]
    subsets = [tuple(sorted(rng.sample(range(params.slots), params.real))) for _ in range(users)]
    nonces = [secrets.token_bytes(NONCE_BYTES) for _ in range(users)]
    keys = [(secrets.token_bytes(ot.KEY_BYTES), secrets.token_bytes(ot.KEY_BYTES)) for _ in range(users)]
    commitments = [commitment(round_index, u, subsets[u], nonces[u]) for u in range(users)]
    return ServerRound(offers, subsets, nonces, keys), [o.public for o in offers], commitments


def seal_weights(
    state: ServerRound, round_index: int, weights: Sequence[gmpy2.mpz], private_key: PrivateKey
) -> None:
    """E1 = Enc(B_inv(N_u)) under K1 and E0 = Enc(0; r_u) under K0, in random order, per user.

    The 2 |U| Paillier exponentiations (`PrivateKey.obfuscator_of`, by the factorisation) run on
    one thread per core (`_map_in_threads`); the ciphertexts are those `private_key.encrypt` and
    `private_key.obfuscator_of` give for the same randomness.
    """
    public = private_key.public_key
    width = (int(public.nsquare).bit_length() + 7) // 8
    users = len(weights)
    zero_units = [public.random_unit() for _ in range(users)]  # r_u, revealed if u is audited
    real_units = [public.random_unit() for _ in range(users)]  # r'_u of Enc(B_inv(N_u)), never
    state.zero_randomness.extend(zero_units)
    # The 2 |U| exponentiations r^n mod n^2 are almost all of the work: spread over the cores.
    powers = _map_in_threads(private_key.obfuscator_of, zero_units + real_units)
    boxes = []
    for u, weight in enumerate(weights):
        zero_key, real_key = state.keys[u]
        # private_key.encrypt(weight) with r'_u: (1 + n m) r'_u^n = Enc(0; r'_u) (+) m.
        real = int(public.add_plain(powers[users + u], weight)).to_bytes(width, "big")
        zero = int(powers[u]).to_bytes(width, "big")
        context = _box_context(round_index, u)
        pair = [seal(real_key, real, context), seal(zero_key, zero, context)]
        if secrets.randbelow(2):
            pair.reverse()
        boxes.append(SlotBoxes(pair[0], pair[1]))
    state.boxes = tuple(boxes)


#: Values per task of `_map_in_threads`: small, so that an interrupted run stops soon.
_THREAD_CHUNK = 16


def _map_in_threads(function: Callable[[T], R], values: list[T]) -> list[R]:
    """[function(v) for v in values], on one thread per available core.

    gmpy2 releases the GIL in its arithmetic under `allow_release_gil` (a per-thread context
    setting), so big exponentiations run in parallel threads: no processes to fork, nothing to
    pickle. In this thread when there is one core or too little work.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    if cores < 2 or len(values) < 2 * _THREAD_CHUNK:
        return [function(v) for v in values]

    def run(chunk: list[T]) -> list[R]:
        with gmpy2.context(allow_release_gil=True):
            return [function(v) for v in chunk]

    chunks = [values[i : i + _THREAD_CHUNK] for i in range(0, len(values), _THREAD_CHUNK)]
    pool = ThreadPoolExecutor(cores)
    try:
        return [v for part in pool.map(run, chunks) for v in part]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def slot_pads(state: ServerRound, round_index: int, choices: Sequence[int], slots: int) -> tuple[bytes, ...]:
    """Per user, the P slot keys (K1 in S_u, K0 elsewhere) each padded under the OT key k_i."""
    out = []
    width = slots * ot.KEY_BYTES
    users = range(len(choices))
    # The exponentiations first, on every core: B_u^(a_u), and the step (A_u^(a_u))^(-1) that
    # every silo's transfer of user u shares (made by the first).
    fresh = [u for u in users if u not in state._steps]
    steps = _map_in_threads(lambda u: ot.sender_step(state.offers[u]), fresh)
    state._steps.update(zip(fresh, steps))
    shared = _map_in_threads(lambda u: ot.sender_shared(state.offers[u], choices[u]), list(users))
    for u, receiver in enumerate(choices):
        zero_key, real_key = state.keys[u]
        real = set(state.subsets[u])
        keys = ot.sender_keys_with_step(
            ot_context(round_index, u), state.offers[u], receiver, slots, state._steps[u], shared[u]
        )
        # ot.pad slot by slot (each slot key XOR its K), as one XOR of the P concatenated keys.
        carried = b"".join(real_key if i in real else zero_key for i in range(slots))
        padded = int.from_bytes(b"".join(keys), "big") ^ int.from_bytes(carried, "big")
        out.append(padded.to_bytes(width, "big"))
    return tuple(out)


def opening(state: ServerRound, user: int) -> SlotOpening:
    """An audited user's secrets, for the silos to check its slots."""
    return SlotOpening(
        user,
        state.offers[user].secret,
        state.subsets[user],
        state.nonces[user],
        int(state.zero_randomness[user]),
    )


def check_transfer_shape(message: SamplingTransferMessage, users: int, slots: int) -> None:
    if len(message.boxes) != users or len(message.slots) != users:
        raise ProtocolError(
            f"the sampling transfer holds {len(message.slots)} users' slots, expected {users}"
        )
    if any(len(s) != slots * ot.KEY_BYTES for s in message.slots):
        raise ProtocolError(f"the sampling transfer's slots must be {slots} keys of {ot.KEY_BYTES} bytes")


def retrieve(
    round_index: int,
    user: int,
    offer: int,
    choice: int,
    secret: int,
    slot_choice: int,
    padded: bytes,
    boxes: SlotBoxes,
    nsquare: gmpy2.mpz,
) -> int | None:
    """The silo's end of one transfer: k_c, the slot's key, the one box it opens: E_u; None if
    the key opens no box, both, or a box that holds no Paillier ciphertext.

    Never an error: whether the silo's slot is a real one decides which box it opens, so a
    refusal, or anything else the server could see, that followed from a malformed box would
    tell the server whether u was sampled (a selective-failure attack). The caller gives such a
    user the weight Enc(0) and keeps the fact to itself; the audit catches a malformed real box
    at the audit rate (`check_opening`).
    """
    context = ot_context(round_index, user)
    k = ot.receiver_key(context, offer, choice, secret, slot_choice)
    start = slot_choice * ot.KEY_BYTES
    key = ot.pad(k, padded[start : start + ot.KEY_BYTES])
    opened = _open_boxes(key, boxes, _box_context(round_index, user))
    if len(opened) != 1:
        return None
    ciphertext = int.from_bytes(opened[0][1], "big")
    return ciphertext if _is_ciphertext(ciphertext, nsquare) else None


def _is_ciphertext(value: int, nsquare: gmpy2.mpz) -> bool:
    """A unit of Z_{n^2}: what a Paillier ciphertext is."""
    return 0 < value < nsquare and gmpy2.gcd(value, nsquare) == 1


def _open_boxes(key: bytes, boxes: SlotBoxes, context: bytes) -> list[tuple[int, bytes]]:
    """(position, plaintext) of each of the two boxes that `key` opens."""
    opened = []
    for position, box in enumerate((boxes.first, boxes.second)):
        try:
            opened.append((position, open_sealed(key, box, context)))
        except ProtocolError:
            continue
    return opened


def check_opening(
    round_index: int,
    params: SamplingParams,
    opened: SlotOpening,
    offer: int,
    committed: bytes,
    choice: int,
    padded: bytes,
    boxes: SlotBoxes,
    n: gmpy2.mpz,
) -> None:
    """The silo's audit of one user: SamplingCheat unless the slots are exactly as committed.

    Checks: A_u = g^(a_u); the commitment opens to S_u, a set of exactly m slots in [0, P); every
    slot key recomputed from a_u and this silo's own B_u; the slots of S_u all carry one key K1,
    the others all another key K0; K0 opens one box, holding r_u^n mod n^2 = Enc(0; r_u) for the
    revealed r_u; K1 opens the other box.
    """
    u = opened.user
    where = f"round {round_index}, user {u}"
    subset = opened.subset
    if ot.public_of(opened.secret) != offer:
        raise SamplingCheat(f"{where}: the opened OT secret does not match the offer A_u")
    if commitment(round_index, u, subset, opened.nonce) != committed:
        raise SamplingCheat(f"{where}: the opened real slots do not match the server's commitment")
    if len(set(subset)) != len(subset) or not all(0 <= i < params.slots for i in subset):
        raise SamplingCheat(
            f"{where}: the committed real slots are not distinct slots of [0, {params.slots})"
        )
    if len(subset) != params.real:
        raise SamplingCheat(
            f"{where}: the server committed {len(subset)} real slots of {params.slots}, not the agreed "
            f"m = {params.real} (it would sample at q = {len(subset) / params.slots:g}, not {params.q:g})"
        )
    keys = ot.sender_keys(ot_context(round_index, u), ot.Offer(opened.secret, offer), choice, params.slots)
    carried = [ot.pad(k, padded[i * ot.KEY_BYTES : (i + 1) * ot.KEY_BYTES]) for i, k in enumerate(keys)]
    real = set(subset)
    real_keys = {carried[i] for i in real}
    zero_keys = {carried[i] for i in range(params.slots) if i not in real}
    if len(real_keys) != 1 or len(zero_keys) != 1 or real_keys == zero_keys:
        in_real = sum(1 for key in carried if key in real_keys)
        raise SamplingCheat(
            f"{where}: the slots do not carry one key on the {params.real} committed real slots and "
            f"another on the rest ({in_real} of {params.slots} slots carry a real slot's key)"
        )
    (real_key,), (zero_key,) = real_keys, zero_keys
    context = _box_context(round_index, u)
    zeros, reals = _open_boxes(zero_key, boxes, context), _open_boxes(real_key, boxes, context)
    if len(zeros) != 1 or len(reals) != 1 or zeros[0][0] == reals[0][0]:
        raise SamplingCheat(f"{where}: the two slot keys do not open one box each")
    if not _is_ciphertext(int.from_bytes(reals[0][1], "big"), n * n):
        # A malformed real box makes a sampled silo's retrieval fail, and only a sampled one's.
        raise SamplingCheat(f"{where}: the box of the real slots does not hold a Paillier ciphertext")
    r = gmpy2.mpz(opened.zero_randomness)
    nsquare = n * n
    if not 0 < r < n or gmpy2.gcd(r, n) != 1:
        raise SamplingCheat(f"{where}: the opened randomness of Enc(0) is not a unit modulo n")
    if int.from_bytes(zeros[0][1], "big") != gmpy2.powmod(r, n, nsquare):
        raise SamplingCheat(f"{where}: the box of the other slots does not hold Enc(0): it is a real weight")
