"""1-out-of-P oblivious transfer: Chou and Orlandi's "simplest OT" over the RFC 3526 group.

T. Chou and C. Orlandi, "The Simplest Protocol for Oblivious Transfer", LATINCRYPT 2015, §3
(the 1-out-of-n variant), in the order-q subgroup of the 3072-bit MODP group of RFC 3526 that
`crypto.dh` already uses (g = 2, q = (p - 1) / 2):

- the sender draws a and sends A = g^a;
- the receiver with choice c in [0, P) draws b and sends B = g^b A^c;
- the sender derives P keys k_i = H(context, i, A, B, (B / A^i)^a); the receiver derives
  k_c = H(context, c, A, B, A^b), since (B / A^c)^a = g^(ab) = A^b. Any other k_i would need
  g^(a^2 (c - i)), a computational Diffie-Hellman value: the receiver cannot compute it.

B is g^b times a value fixed by c. For b uniform modulo q, B would be uniform whatever c is; b is
a short exponent (below), so the hiding is computational: B looks uniform under the short-exponent
discrete-logarithm assumption (Koshiba and Kurosawa, "Short Exponent Diffie-Hellman Problems",
PKC 2004), about 2^128 work for a 256-bit exponent, the strength of the rest of Protocol 1.
Private sampling in Protocol 1 (`crypto.protocol.sampling`) uses the OT to let the silos pick a
user's slot without the server knowing which.

Exponents are 256-bit (`EXPONENT_BITS`): NIST SP 800-56A Rev. 3, §5.6.1.1.4, allows private keys
of 2s bits in the safe-prime groups for security strength s (s = 128 for this group); a full
3072-bit exponent would cost 8 times as much for no gain in that strength. Every group element
received is checked to be in the subgroup (`check_element`: a Jacobi symbol, cheap for a safe
prime) before it is used. Semi-honest security only, as the rest of Protocol 1: Chou and Orlandi's
UC claim was later found not to hold against a malicious receiver (Genç, Iovino, Rial, ePrint
2017/1285); docs/protocol.md, "Private sampling", says what that means here.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

import gmpy2

from uldp.crypto.dh import MODP_3072_GENERATOR, MODP_3072_PRIME
from uldp.errors import ProtocolError

EXPONENT_BITS = 256
"""2s for s = 128-bit security (NIST SP 800-56A Rev. 3, §5.6.1.1.4)."""

KEY_BYTES = 32
ELEMENT_BYTES = (MODP_3072_PRIME.bit_length() + 7) // 8

_P = gmpy2.mpz(MODP_3072_PRIME)
_G = gmpy2.mpz(MODP_3072_GENERATOR)


@dataclass(frozen=True)
class Offer:
    """The sender's secret a and its public A = g^a, one per transfer."""

    secret: int
    public: int


def random_exponent() -> int:
    """A uniform exponent in [2, 2^256) from `secrets`."""
    return secrets.randbelow(2**EXPONENT_BITS - 2) + 2


def offer() -> Offer:
    """A fresh (a, A = g^a)."""
    a = random_exponent()
    return Offer(a, int(gmpy2.powmod(_G, a, _P)))


def public_of(secret: int) -> int:
    """g^secret: what the receiver checks an opened sender secret against."""
    return int(gmpy2.powmod(_G, secret, _P))


def check_element(value: int, what: str) -> gmpy2.mpz:
    """`value` as a group element if it lies in the order-q subgroup, else ProtocolError.

    For the safe prime p = 2q + 1 that subgroup is the quadratic residues: 1 < value < p and
    Jacobi(value, p) = 1. (1 is excluded: a sender's A = 1 would make every key the same.)
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 1 < value < MODP_3072_PRIME:
        raise ProtocolError(f"{what} is not a group element in (1, p)")
    element = gmpy2.mpz(value)
    if gmpy2.jacobi(element, _P) != 1:
        raise ProtocolError(f"{what} is not in the prime-order subgroup of the RFC 3526 group")
    return element


def choose(sender_public: int, choice: int, slots: int) -> tuple[int, int]:
    """The receiver's (b, B = g^b A^c) for choice c in [0, slots)."""
    if not 0 <= choice < slots:
        raise ProtocolError(f"OT choice {choice} is not in [0, {slots})")
    a_public = check_element(sender_public, "the sender's OT offer A")
    b = random_exponent()
    big_b = gmpy2.powmod(_G, b, _P) * gmpy2.powmod(a_public, choice, _P) % _P
    return b, int(big_b)


_KEY_TAG = b"uldp/ot/chou-orlandi/v1"


def _key(context: bytes, index: int, sender_public: int, receiver_public: int, shared: gmpy2.mpz) -> bytes:
    # Length-prefixed context, fixed-width fields: no two inputs hash the same bytes.
    digest = hashlib.sha256(_KEY_TAG)
    digest.update(len(context).to_bytes(4, "big") + context + index.to_bytes(4, "big"))
    for element in (sender_public, receiver_public, int(shared)):
        digest.update(int(element).to_bytes(ELEMENT_BYTES, "big"))
    return digest.digest()


def receiver_key(context: bytes, sender_public: int, receiver_public: int, b: int, choice: int) -> bytes:
    """k_c = H(context, c, A, B, A^b): the one key the receiver can derive."""
    a_public = check_element(sender_public, "the sender's OT offer A")
    return _key(context, choice, sender_public, receiver_public, gmpy2.powmod(a_public, b, _P))


def sender_keys(context: bytes, sender: Offer, receiver_public: int, slots: int) -> list[bytes]:
    """k_0 .. k_{P-1} = H(context, i, A, B, (B / A^i)^a).

    (B / A^i)^a = B^a (A^a)^(-i): two exponentiations, then one multiplication per slot.
    """
    return sender_keys_with_step(context, sender, receiver_public, slots, None)


def sender_step(sender: Offer) -> gmpy2.mpz:
    """(A^a)^(-1) mod p: the factor between consecutive slots' (B / A^i)^a, the same for every
    receiver of one offer (a sender serving several receivers computes it once)."""
    return gmpy2.invert(gmpy2.powmod(gmpy2.mpz(sender.public), sender.secret, _P), _P)


def sender_shared(sender: Offer, receiver_public: int) -> gmpy2.mpz:
    """B^a, once B is checked to be in the group: slot 0's (B / A^0)^a."""
    return gmpy2.powmod(check_element(receiver_public, "the receiver's OT choice B"), sender.secret, _P)


def sender_keys_with_step(
    context: bytes,
    sender: Offer,
    receiver_public: int,
    slots: int,
    step: gmpy2.mpz | None,
    shared: gmpy2.mpz | None = None,
) -> list[bytes]:
    """`sender_keys`, with `sender_step(sender)` and `sender_shared(sender, B)` given (a sender
    may compute them beforehand, several at once) or computed here.

    The hash of each key is `_key`'s, byte for byte: the fixed part (tag, context) is hashed once
    and copied, A and B are encoded once, and each slot adds its index and (B / A^i)^a.
    """
    big_b = check_element(receiver_public, "the receiver's OT choice B")
    current = gmpy2.powmod(big_b, sender.secret, _P) if shared is None else gmpy2.mpz(shared)
    if step is None:
        step = sender_step(sender)
    prefix = hashlib.sha256(_KEY_TAG)
    prefix.update(len(context).to_bytes(4, "big") + context)
    publics = int(sender.public).to_bytes(ELEMENT_BYTES, "big") + int(receiver_public).to_bytes(
        ELEMENT_BYTES, "big"
    )
    keys = []
    for index in range(slots):
        digest = prefix.copy()
        digest.update(index.to_bytes(4, "big") + publics + int(current).to_bytes(ELEMENT_BYTES, "big"))
        keys.append(digest.digest())
        current = current * step % _P
    return keys


def pad(key: bytes, message: bytes) -> bytes:
    """message XOR key for a 32-byte message: a one-time pad under an OT key (the keys are
    SHA-256 outputs, and each one pads a single message)."""
    if len(message) != KEY_BYTES or len(key) != KEY_BYTES:
        raise ProtocolError(f"an OT pad takes {KEY_BYTES}-byte keys and messages")
    value = int.from_bytes(message, "big") ^ int.from_bytes(key, "big")
    return value.to_bytes(KEY_BYTES, "big")
