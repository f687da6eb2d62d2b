"""The aggregation server A of Protocol 1 (ULDP-FL §4.1).

A holds the Paillier secret key. It sees DH public keys, sealed seeds it cannot open, the
doubly blinded histograms B'(n_{s,u}) (uniform on F_n one by one), their sum B(N_u) = r_u N_u
(uniform on F_n for N_u > 0, since r_u is a uniform unit unknown to A -- Appendix D.5) and, each
round, masked encrypted sums whose decryptions are uniform except for their total.

Every message A sends or receives is authenticated (`crypto.channel`): A holds a DH key pair
whose public key `dh_public` every silo knows in advance (out of band: the trust anchor), and the
DH secret of A and silo s keys both directions between them. Messages between two silos pass
through A (`relay`) authenticated under the silos' own pairwise keys, which A does not have.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import gmpy2
import numpy as np

from uldp.crypto import ot
from uldp.crypto.channel import SERVER, SETUP_ROUND, Channels, Envelope, TamperedMessage, silo_name
from uldp.crypto.dh import generate_dh_keypair, validate_public_key
from uldp.crypto.masking import inverse_mod
from uldp.crypto.paillier import PrivateKey, PublicKey, check_modulus, generate_keypair
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
    SamplingOfferMessage,
    SamplingOpeningMessage,
    SamplingTransferMessage,
)
from uldp.crypto.protocol.params import ProtocolParams
from uldp.errors import InvalidParameter, ProtocolError

S = TypeVar("S", BlindedHistogramMessage, MaskedSumMessage, SamplingChoiceMessage, SamplingAuditMessage)
"""The messages a silo sends the server after setup (a): both name their silo."""


class AggregationServer:
    """The party A: key generation, relaying, inverses of the blinded histogram, decryption."""

    def __init__(self, params: ProtocolParams, keypair: tuple[PublicKey, PrivateKey] | None = None) -> None:
        self.params = params
        self.inbox: list[object] = []
        if keypair is not None:
            _check_keypair(keypair, params)
        self._keypair = keypair
        self._dh = generate_dh_keypair()
        self.channels = Channels(SERVER)
        self._dh_keys: dict[int, int] = {}
        self._histograms: dict[int, tuple[int, ...]] = {}
        self._blinded_inverses: list[gmpy2.mpz] | None = None
        self._sums: dict[int, dict[int, tuple[int, ...]]] = {}
        self._sampling: dict[int, sampling.ServerRound] = {}
        self._last_round = -1  # private sampling: rounds are opened in increasing order, once

    @property
    def dh_public(self) -> int:
        """A's DH public key: the trust anchor each silo must obtain out of band, before setup."""
        return self._dh.public

    # Setup (a): Paillier keys, one authenticated copy per silo.
    def paillier_key(self) -> list[Envelope]:
        """Generate (PK, SK) of λ bits and send PK to every silo; checks the encoding fits in F_n."""
        if self._keypair is None:
            self._keypair = generate_keypair(self.params.key_bits, test_keys=self.params.test_keys)
        _check_keypair(self._keypair, self.params)
        self.params.encoding.check_capacity(self.public_key.n, self.params.users, self.params.silos)
        message = PaillierKeyMessage(int(self.public_key.n))
        return self._to_every_silo(message, SETUP_ROUND)

    @property
    def private_key(self) -> PrivateKey:
        """SK, which never leaves A; benchmarks use it to check the silos' ciphertexts."""
        if self._keypair is None:
            raise ProtocolError("server: setup (a) has not run: no Paillier key yet")
        return self._keypair[1]

    @property
    def public_key(self) -> PublicKey:
        if self._keypair is None:
            raise ProtocolError("server: setup (a) has not run: no Paillier key yet")
        return self._keypair[0]

    # Setup (a)-(b): the silos' DH public keys, relayed to all.
    def receive_dh_key(self, envelope: Envelope) -> None:
        """Silo s's pk_s: keys the channel A <-> s, and must carry a valid tag under that key.

        The tag confirms the key (a corrupted pk_s fails it); it cannot prove that pk_s is the
        silo's own, which needs silo keys known in advance (docs/protocol.md, "Threat model").
        """
        self.inbox.append(envelope)
        message = envelope.payload if isinstance(envelope, Envelope) else None
        if not isinstance(message, DhKeyMessage) or envelope.sender != silo_name(message.silo):
            raise ProtocolError(f"expected a silo's dh-key message, got {envelope!r:.80}")
        self._check_silo(message.silo)
        if message.silo in self._dh_keys:
            raise TamperedMessage(envelope, "is a second DH key for the same silo: replayed or injected")
        try:
            validate_public_key(message.public)
        except InvalidParameter as error:
            raise TamperedMessage(envelope, f"carries an invalid DH public key ({error})") from None
        self.channels.connect_dh(self._dh, envelope.sender, message.public)
        self.channels.unwrap(envelope, DhKeyMessage.KIND)
        self._dh_keys[message.silo] = message.public

    def broadcast_dh_keys(self) -> list[Envelope]:
        missing = set(range(self.params.silos)) - self._dh_keys.keys()
        if missing:
            raise ProtocolError(
                f"setup (b): no DH public key from silo(s) {sorted(missing)}; the keys cannot be broadcast"
            )
        return self._to_every_silo(DhKeysBroadcast(tuple(sorted(self._dh_keys.items()))), SETUP_ROUND)

    # Setup (c): relay the sealed seed without being able to open it (or to re-tag it).
    def relay(self, envelope: Envelope) -> Envelope:
        self.inbox.append(envelope)
        return envelope

    # Setup (e)-(f): aggregate the doubly blinded histograms and invert.
    def receive_histogram(self, envelope: Envelope) -> None:
        self.inbox.append(envelope)
        message = self._receive(envelope, BlindedHistogramMessage, SETUP_ROUND)
        if len(message.values) != self.params.users:
            raise ProtocolError(
                f"silo {message.silo} sent {len(message.values)} counts, expected {self.params.users}"
            )
        self._histograms[message.silo] = message.values

    def blinded_totals(self) -> list[gmpy2.mpz]:
        """B(N_u) = sum_s B'(n_{s,u}) mod n = r_u N_u: the pairwise masks cancel (setup (e))."""
        missing = set(range(self.params.silos)) - self._histograms.keys()
        if missing:
            raise ProtocolError(
                f"setup (e): no blinded histogram from silo(s) {sorted(missing)}; nothing to unblind"
            )
        n = self.public_key.n
        return [
            sum((gmpy2.mpz(self._histograms[s][u]) for s in range(self.params.silos)), gmpy2.mpz(0)) % n
            for u in range(self.params.users)
        ]

    def compute_inverses(self) -> None:
        """B_inv(N_u) = B(N_u)^{-1} mod n (setup (f)).

        B(N_u) = 0 means N_u = 0, a user with no records anywhere: A learns that much and gives
        the user weight 0, which changes nothing since every n_{s,u} is 0.
        """
        n = self.public_key.n
        self._blinded_inverses = [
            gmpy2.mpz(0) if b == 0 else inverse_mod(b, n) for b in self.blinded_totals()
        ]

    # Round (a): encrypted weights, 0 for users not sub-sampled.
    def encrypted_weights(self, round_index: int, sampled: Sequence[bool] | np.ndarray) -> list[Envelope]:
        """Enc(B_inv(N_u)) for the sampled users, Enc(0) for the others: one authenticated copy per silo."""
        if self._blinded_inverses is None:
            raise ProtocolError(
                f"round {round_index}: setup (f) has not run (no blinded inverses); no weights are sent"
            )
        if self.params.sampling is not None:
            raise ProtocolError(
                f"round {round_index}: under private sampling the weights go by oblivious transfer "
                "(sampling_offer), not in the clear"
            )
        sampled = np.asarray(sampled, dtype=bool)
        if sampled.shape != (self.params.users,):
            raise ProtocolError(f"sampled must have shape ({self.params.users},), got {sampled.shape}")
        # The key holder encrypts through the CRT, about four times faster than with PK alone.
        sk = self.private_key
        ciphertexts = tuple(
            int(sk.encrypt(b if keep else 0)) for b, keep in zip(self._blinded_inverses, sampled)
        )
        self._sums[round_index] = {}
        return self._to_every_silo(EncryptedWeightsMessage(round_index, ciphertexts), round_index)

    # Private sampling (ULDP-FL §4.1; crypto/protocol/sampling.py): round (a) by oblivious transfer.
    def sampling_offer(self, round_index: int) -> list[Envelope]:
        """Sampling (1): fresh secrets for the round; the OT offers and commitments to every silo."""
        params = self._sampling_params()
        if self._blinded_inverses is None:
            raise ProtocolError(f"round {round_index}: setup (f) has not run (no blinded inverses)")
        if round_index in self._sampling or round_index in self._sums or round_index <= self._last_round:
            raise ProtocolError(f"round {round_index} was already opened by the server")
        self._last_round = round_index
        state, offers, commitments = sampling.server_round(round_index, self.params.users, params)
        self._sampling[round_index] = state
        message = SamplingOfferMessage(round_index, tuple(offers), tuple(commitments))
        state.offer = message
        return self._to_every_silo(message, round_index)

    def receive_sampling_choice(self, envelope: Envelope) -> None:
        """Silo s's OT choices B_u: one per user, each checked to be in the group when used."""
        self.inbox.append(envelope)
        message = self._receive(envelope, SamplingChoiceMessage, envelope.round)
        state = self._sampling_round(message.round, "choices")
        if len(message.choices) != self.params.users:
            raise ProtocolError(
                f"silo {message.silo} sent {len(message.choices)} OT choices, expected {self.params.users}"
            )
        if message.silo in state.choices:
            raise ProtocolError(f"silo {message.silo} sent its OT choices for round {message.round} twice")
        for choice in message.choices:
            ot.check_element(choice, f"silo {message.silo}'s OT choice B in round {message.round}")
        state.choices[message.silo] = message.choices

    def sampling_transfer(self, round_index: int) -> list[Envelope]:
        """Sampling (3): Enc(B_inv(N_u)) and Enc(0) sealed per user, and each silo's padded slots."""
        params = self._sampling_params()
        state = self._sampling_round(round_index, "transfer")
        if state.boxes:
            raise ProtocolError(f"round {round_index}: the sampling transfer was already made")
        missing = set(range(self.params.silos)) - state.choices.keys()
        if missing:
            raise ProtocolError(f"round {round_index}: no OT choices from silo(s) {sorted(missing)}")
        assert self._blinded_inverses is not None  # sampling_offer checked it
        sampling.seal_weights(state, round_index, self._blinded_inverses, self.private_key)
        return [
            self.channels.wrap(
                silo_name(s),
                SamplingTransferMessage.KIND,
                round_index,
                SamplingTransferMessage(
                    round_index,
                    state.boxes,
                    sampling.slot_pads(state, round_index, state.choices[s], params.slots),
                ),
            )
            for s in range(self.params.silos)
        ]

    def receive_sampling_audit(self, envelope: Envelope) -> None:
        """Silo s's audit request: the users it will check; every silo must ask for the same."""
        self.inbox.append(envelope)
        message = self._receive(envelope, SamplingAuditMessage, envelope.round)
        state = self._sampling_round(message.round, "audit")
        if not state.boxes:
            raise ProtocolError(
                f"silo {message.silo} asked for an audit of round {message.round} before its transfer"
            )
        if message.silo in state.audits:
            raise ProtocolError(f"silo {message.silo} asked twice for the audit of round {message.round}")
        state.audits[message.silo] = message.audited

    def sampling_openings(self, round_index: int) -> list[Envelope]:
        """Sampling (5): the audited users' secrets to every silo; opens the round for masked sums."""
        state = self._sampling_round(round_index, "openings")
        missing = set(range(self.params.silos)) - state.audits.keys()
        if missing:
            raise ProtocolError(f"round {round_index}: no audit request from silo(s) {sorted(missing)}")
        requests = set(state.audits.values())
        if len(requests) != 1:
            raise ProtocolError(
                f"round {round_index}: the silos asked to audit different users; "
                "they derive them from one seed"
            )
        (audited,) = requests
        if any(not 0 <= u < self.params.users for u in audited) or sorted(set(audited)) != list(audited):
            raise ProtocolError(
                f"round {round_index}: the audit request names users outside [0, {self.params.users})"
            )
        state.audited = audited
        openings = tuple(sampling.opening(state, u) for u in audited)
        self._sums[round_index] = {}
        return self._to_every_silo(SamplingOpeningMessage(round_index, openings), round_index)

    def sampling_secrets(self, round_index: int) -> sampling.ServerRound:
        """The server's secrets of a round (its real slots S_u): for tests and benchmarks that
        check the realised sample, which needs these and the silos' seed R together."""
        return self._sampling_round(round_index, "inspection")

    def _sampling_params(self) -> sampling.SamplingParams:
        if self.params.sampling is None:
            raise ProtocolError("private sampling was not agreed in the protocol's parameters")
        return self.params.sampling

    def _sampling_round(self, round_index: int, step: str) -> sampling.ServerRound:
        state = self._sampling.get(round_index)
        if state is None:
            raise ProtocolError(f"round {round_index} has no private sampling offer (at step {step})")
        return state

    # Round (c): aggregate, decrypt, decode.
    def receive_masked_sum(self, envelope: Envelope) -> None:
        """Silo s's masked sum, after its tag is checked: a shifted ciphertext never reaches decryption."""
        self.inbox.append(envelope)
        message = self._receive(envelope, MaskedSumMessage, envelope.round)
        if message.round not in self._sums:
            raise ProtocolError(f"round {message.round} was not opened by the server")
        if len(message.ciphertexts) != self.params.dimension:
            raise ProtocolError(
                f"silo {message.silo} sent {len(message.ciphertexts)} coordinates, "
                f"expected {self.params.dimension}"
            )
        self._sums[message.round][message.silo] = message.ciphertexts

    def aggregate(self, round_index: int) -> np.ndarray:
        """Decode(Dec(prod_s Enc(Delta_s + masks))): the masks cancel only when all silos sent."""
        received = self._sums.get(round_index)
        if received is None:
            raise ProtocolError(f"round {round_index} was not opened by the server: no weights were sent")
        missing = set(range(self.params.silos)) - received.keys()
        if missing:
            # Without every silo's sum the pairwise masks do not cancel: nothing is decrypted.
            raise ProtocolError(
                f"round {round_index}: no masked sum from silo(s) {sorted(missing)}; the masks would "
                f"not cancel, nothing is decrypted"
            )
        del self._sums[round_index]  # a whole run keeps one server: hold one round's ciphertexts
        for old in [t for t in self._sampling if t < round_index]:  # keep only this round's secrets
            del self._sampling[old]  # (`sampling_secrets`), not every aborted round's
        pk, sk = self.public_key, self.private_key
        encoding = self.params.encoding
        bound = encoding.aggregate_bound(self.params.users, self.params.silos)
        totals = []
        for j in range(self.params.dimension):
            c = gmpy2.mpz(1)
            for s in range(self.params.silos):
                c = pk.add(c, gmpy2.mpz(received[s][j]))
            totals.append(sk.decrypt(c))
        return encoding.decode_all(totals, pk.n, bound=bound)

    def _to_every_silo(self, message: Message, round_index: int) -> list[Envelope]:
        kind = message.KIND
        return [
            self.channels.wrap(silo_name(s), kind, round_index, message) for s in range(self.params.silos)
        ]

    def _receive(self, envelope: Envelope, message_type: type[S], round_index: int) -> S:
        """The verified payload of `envelope`, checked to be a `message_type` from the silo it names."""
        message = self.channels.unwrap(envelope, message_type.KIND)
        if not isinstance(message, message_type) or envelope.sender != silo_name(message.silo):
            raise ProtocolError(f"{envelope.sender} sent a {envelope.kind} message for another silo")
        if getattr(message, "round", round_index) != envelope.round:
            raise ProtocolError(
                f"{envelope.sender} sent a {envelope.kind} message whose round is inconsistent"
            )
        self._check_silo(message.silo)
        return message

    def _check_silo(self, silo: int) -> None:
        if not 0 <= silo < self.params.silos:
            raise ProtocolError(f"unknown silo id {silo}")


def _check_keypair(keypair: tuple[PublicKey, PrivateKey], params: ProtocolParams) -> None:
    """ValueError unless a supplied key pair is one pair, of the agreed size (`check_modulus`)."""
    public, private = keypair
    if private.public_key.n != public.n:
        raise ProtocolError("the Paillier private key does not belong to the public key")
    check_modulus(public.n, params.key_bits, test_keys=params.test_keys)
