"""The aggregation server A of Protocol 1 (ULDP-FL §4.1).

A holds the Paillier secret key. It sees DH public keys, sealed seeds it cannot open, the
doubly blinded histograms B'(n_{s,u}) (uniform on F_n one by one), their sum B(N_u) = r_u N_u
(uniform on F_n for N_u > 0, since r_u is a uniform unit unknown to A -- Appendix D.5) and, each
round, masked encrypted sums whose decryptions are uniform except for their total.
"""

from __future__ import annotations

from collections.abc import Sequence

import gmpy2
import numpy as np

from uldp.crypto.masking import inverse_mod
from uldp.crypto.paillier import PrivateKey, PublicKey, check_modulus, generate_keypair
from uldp.crypto.protocol.messages import (
    BlindedHistogramMessage,
    DhKeyMessage,
    DhKeysBroadcast,
    EncryptedWeightsMessage,
    MaskedSumMessage,
    PaillierKeyMessage,
    SealedSeedMessage,
)
from uldp.crypto.protocol.params import ProtocolParams
from uldp.errors import ProtocolError


class AggregationServer:
    """The party A: key generation, relaying, inverses of the blinded histogram, decryption."""

    def __init__(self, params: ProtocolParams, keypair: tuple[PublicKey, PrivateKey] | None = None) -> None:
        self.params = params
        self.inbox: list[object] = []
        if keypair is not None:
            _check_keypair(keypair, params)
        self._keypair = keypair
        self._dh_keys: dict[int, int] = {}
        self._histograms: dict[int, tuple[int, ...]] = {}
        self._blinded_inverses: list[gmpy2.mpz] | None = None
        self._sums: dict[int, dict[int, tuple[int, ...]]] = {}

    # Setup (a): Paillier keys.
    def paillier_key(self) -> PaillierKeyMessage:
        """Generate (PK, SK) of λ bits and publish PK; checks the encoding fits in F_n."""
        if self._keypair is None:
            self._keypair = generate_keypair(self.params.key_bits, test_keys=self.params.test_keys)
        _check_keypair(self._keypair, self.params)
        self.params.encoding.check_capacity(self.public_key.n, self.params.users, self.params.silos)
        return PaillierKeyMessage(int(self.public_key.n))

    @property
    def private_key(self) -> PrivateKey:
        """SK, which never leaves A; benchmarks use it to check the silos' ciphertexts."""
        if self._keypair is None:
            raise RuntimeError("setup (a) has not run: no Paillier key yet")
        return self._keypair[1]

    @property
    def public_key(self) -> PublicKey:
        if self._keypair is None:
            raise RuntimeError("setup (a) has not run: no Paillier key yet")
        return self._keypair[0]

    # Setup (a)-(b): relay DH public keys.
    def receive_dh_key(self, message: DhKeyMessage) -> None:
        self.inbox.append(message)
        self._check_silo(message.silo)
        self._dh_keys[message.silo] = message.public

    def broadcast_dh_keys(self) -> DhKeysBroadcast:
        missing = set(range(self.params.silos)) - self._dh_keys.keys()
        if missing:
            raise RuntimeError(f"no DH public key yet from silos {sorted(missing)}")
        return DhKeysBroadcast(tuple(sorted(self._dh_keys.items())))

    # Setup (c): relay the sealed seed without being able to open it.
    def relay(self, message: SealedSeedMessage) -> SealedSeedMessage:
        self.inbox.append(message)
        return message

    # Setup (e)-(f): aggregate the doubly blinded histograms and invert.
    def receive_histogram(self, message: BlindedHistogramMessage) -> None:
        self.inbox.append(message)
        self._check_silo(message.silo)
        if len(message.values) != self.params.users:
            raise ProtocolError(
                f"silo {message.silo} sent {len(message.values)} counts, expected {self.params.users}"
            )
        self._histograms[message.silo] = message.values

    def blinded_totals(self) -> list[gmpy2.mpz]:
        """B(N_u) = sum_s B'(n_{s,u}) mod n = r_u N_u: the pairwise masks cancel (setup (e))."""
        missing = set(range(self.params.silos)) - self._histograms.keys()
        if missing:
            raise RuntimeError(f"no blinded histogram yet from silos {sorted(missing)}")
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
    def encrypted_weights(
        self, round_index: int, sampled: Sequence[bool] | np.ndarray
    ) -> EncryptedWeightsMessage:
        if self._blinded_inverses is None:
            raise RuntimeError("setup (f) has not run: no blinded inverses yet")
        sampled = np.asarray(sampled, dtype=bool)
        if sampled.shape != (self.params.users,):
            raise ProtocolError(f"sampled must have shape ({self.params.users},), got {sampled.shape}")
        # The key holder encrypts through the CRT, about four times faster than with PK alone.
        sk = self.private_key
        ciphertexts = tuple(
            int(sk.encrypt(b if keep else 0)) for b, keep in zip(self._blinded_inverses, sampled)
        )
        self._sums[round_index] = {}
        return EncryptedWeightsMessage(round_index, ciphertexts)

    # Round (c): aggregate, decrypt, decode.
    def receive_masked_sum(self, message: MaskedSumMessage) -> None:
        self.inbox.append(message)
        self._check_silo(message.silo)
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
        received = self._sums.get(round_index, {})
        missing = set(range(self.params.silos)) - received.keys()
        if missing:
            raise RuntimeError(f"round {round_index}: no masked sum yet from silos {sorted(missing)}")
        del self._sums[round_index]  # a whole run keeps one server: hold one round's ciphertexts
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

    def _check_silo(self, silo: int) -> None:
        if not 0 <= silo < self.params.silos:
            raise ProtocolError(f"unknown silo id {silo}")


def _check_keypair(keypair: tuple[PublicKey, PrivateKey], params: ProtocolParams) -> None:
    """ValueError unless a supplied key pair is one pair, of the agreed size (`check_modulus`)."""
    public, private = keypair
    if private.public_key.n != public.n:
        raise ProtocolError("the Paillier private key does not belong to the public key")
    check_modulus(public.n, params.key_bits, test_keys=params.test_keys)
