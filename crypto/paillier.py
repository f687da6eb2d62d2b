"""Paillier encryption for Protocol 1 of ULDP-FL (§4.1), a thin layer over `phe` and gmpy2.

Ciphertexts are plain integers modulo n^2 (gmpy2 `mpz`), not phe's `EncryptedNumber`: Protocol 1
does its own fixed-point encoding on F_n (Algorithm 5, `crypto.encoding`), and the silo's
weighting loop (`crypto.weighting`) needs the bare group operations without phe's exponent
bookkeeping. Key generation and decryption are phe's; phe's private key decrypts modulo p^2 and
q^2 separately and recombines by the CRT (`PaillierPrivateKey.raw_decrypt`), about four times
faster than decrypting modulo n^2.

With g = n + 1 (phe's choice), Enc(m; r) = (1 + n m) r^n mod n^2, and
Enc(a) Enc(b) = Enc(a + b), Enc(a)^k = Enc(k a) (mod n) -- the homomorphisms §4.1 relies on.
"""

from __future__ import annotations

import functools
import numbers
import secrets
from dataclasses import dataclass, field

import gmpy2
from phe import paillier as phe_paillier

from uldp.errors import InvalidParameter

DEFAULT_KEY_BITS = 3072
"""λ of Protocol 1: a 3072-bit modulus, about 128-bit security (NIST SP 800-57)."""

MIN_SECURE_KEY_BITS = 2048
"""Smaller moduli are refused unless the caller says `test_keys=True`."""

MIN_TEST_KEY_BITS = 256
"""Below this the fixed-point encoding has no room left; even test keys stop here."""


@dataclass(frozen=True)
class PublicKey:
    """The modulus n; plaintexts live in F_n, ciphertexts in Z*_{n^2} (§4.1)."""

    n: gmpy2.mpz
    nsquare: gmpy2.mpz = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = gmpy2.mpz(self.n)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "nsquare", n * n)

    @property
    def bits(self) -> int:
        return int(self.n.bit_length())

    def random_unit(self) -> gmpy2.mpz:
        """A uniform element of Z*_n from `secrets` (the encryption randomness)."""
        while True:
            r = gmpy2.mpz(secrets.randbelow(int(self.n) - 1) + 1)
            if gmpy2.gcd(r, self.n) == 1:
                return r

    def obfuscator(self) -> gmpy2.mpz:
        """r^n mod n^2 for a fresh random r: an encryption of 0."""
        return gmpy2.powmod(self.random_unit(), self.n, self.nsquare)

    def encrypt(self, plaintext: int) -> gmpy2.mpz:
        """Enc(m) = (1 + n m) r^n mod n^2, for m taken modulo n (an element of F_n)."""
        m = gmpy2.mpz(plaintext) % self.n
        return (1 + self.n * m) * self.obfuscator() % self.nsquare

    def add(self, a: gmpy2.mpz, b: gmpy2.mpz) -> gmpy2.mpz:
        """Enc(x) (+) Enc(y) = Enc(x + y mod n)."""
        return a * b % self.nsquare

    def add_plain(self, ciphertext: gmpy2.mpz, plaintext: int) -> gmpy2.mpz:
        """Enc(x) (+) m = Enc(x + m mod n), using (1 + n)^m = 1 + n m mod n^2."""
        m = gmpy2.mpz(plaintext) % self.n
        return ciphertext * (1 + self.n * m) % self.nsquare

    def mul_plain(self, ciphertext: gmpy2.mpz, scalar: int) -> gmpy2.mpz:
        """k (x) Enc(x) = Enc(k x mod n); a negative k is taken modulo n (a full-size exponent)."""
        return gmpy2.powmod(ciphertext, gmpy2.mpz(scalar) % self.n, self.nsquare)

    def rerandomize(self, ciphertext: gmpy2.mpz) -> gmpy2.mpz:
        """The same plaintext under fresh randomness, so the result says nothing of how it was made."""
        return ciphertext * self.obfuscator() % self.nsquare


@dataclass(frozen=True)
class PrivateKey:
    """The factorisation of n, held by the aggregation server only (Protocol 1, setup (a))."""

    public_key: PublicKey
    _phe_key: phe_paillier.PaillierPrivateKey = field(repr=False)

    def decrypt(self, ciphertext: gmpy2.mpz) -> gmpy2.mpz:
        """The plaintext in [0, n), decrypted by phe modulo p^2 and q^2 and joined by the CRT."""
        return gmpy2.mpz(self._phe_key.raw_decrypt(int(ciphertext)))

    def obfuscator(self) -> gmpy2.mpz:
        """r^n mod n^2 for a fresh random r, computed modulo p^2 and q^2 and joined by the CRT.

        Only the key holder can do this: exponents reduce modulo p(p - 1) and q(q - 1), the
        orders of Z*_{p^2} and Z*_{q^2}, so it costs about a quarter of `PublicKey.obfuscator`.
        """
        return self.obfuscator_of(self.public_key.random_unit())

    def obfuscator_of(self, r: gmpy2.mpz) -> gmpy2.mpz:
        """r^n mod n^2 for a given unit r, by the CRT: Enc(0; r), whose r the holder may reveal
        to prove it encrypts 0 (the audit of private sampling, `crypto.protocol.sampling`).

        Modulo p^2, r^n lies in the subgroup of order p - 1 of Z*_{p^2} (write r = w (1 + k p)
        with w of order dividing p - 1; (1 + k p)^n = 1 mod p^2 as p divides n), whose element
        congruent to x mod p is x^p mod p^2. So r^n mod p^2 = (r^(n mod (p - 1)) mod p)^p mod p^2:
        a |p|-bit exponent modulo p^2 and one modulo p, half the bits of n mod p(p - 1) (about
        1.9 times faster); the same modulo q^2.
        """
        p, q, psq, qsq, exp_p, exp_q, crt = self._crt
        at_p = gmpy2.powmod(gmpy2.powmod(r % p, exp_p, p), p, psq)
        at_q = gmpy2.powmod(gmpy2.powmod(r % q, exp_q, q), q, qsq)
        return at_q + qsq * ((at_p - at_q) * crt % psq)

    @functools.cached_property
    def _crt(self) -> tuple[gmpy2.mpz, ...]:
        """p, q, p^2, q^2, n mod (p - 1), n mod (q - 1) and (q^2)^-1 mod p^2, computed once."""
        p, q = gmpy2.mpz(self._phe_key.p), gmpy2.mpz(self._phe_key.q)
        n = self.public_key.n
        return p, q, p * p, q * q, n % (p - 1), n % (q - 1), gmpy2.invert(q * q, p * p)

    def encrypt(self, plaintext: int) -> gmpy2.mpz:
        """Enc(m), as `PublicKey.encrypt` gives it, with the CRT shortcut of the key holder."""
        n = self.public_key.n
        m = gmpy2.mpz(plaintext) % n
        return (1 + n * m) * self.obfuscator() % self.public_key.nsquare

    @property
    def p(self) -> int:
        return int(self._phe_key.p)

    @property
    def q(self) -> int:
        return int(self._phe_key.q)


def check_key_bits(key_bits: int, *, test_keys: bool = False) -> int:
    """`key_bits` if allowed: >= 2048 always, down to 256 only with `test_keys=True` (insecure)."""
    if isinstance(key_bits, bool) or not isinstance(key_bits, int):
        raise InvalidParameter(f"key_bits must be an integer, got {key_bits!r}")
    if key_bits % 2:
        raise InvalidParameter(f"key_bits must be even (n = p q with equal-sized primes), got {key_bits}")
    if key_bits < MIN_TEST_KEY_BITS:
        raise InvalidParameter(f"key_bits must be >= {MIN_TEST_KEY_BITS}, got {key_bits}")
    if key_bits < MIN_SECURE_KEY_BITS and not test_keys:
        raise InvalidParameter(
            f"key_bits {key_bits} < {MIN_SECURE_KEY_BITS} is insecure; use >= "
            f"{MIN_SECURE_KEY_BITS} (default {DEFAULT_KEY_BITS}), or test_keys=True for tests only"
        )
    return key_bits


SMALL_PRIME_BOUND = 2**16
"""Trial division bound of `check_modulus`: every prime below it is ruled out as a factor of n."""


@functools.lru_cache(maxsize=1)
def _small_primes() -> tuple[tuple[int, ...], gmpy2.mpz]:
    """The primes below `SMALL_PRIME_BOUND` and their product (one gcd tests them all)."""
    primes, p = [], gmpy2.mpz(2)
    while p < SMALL_PRIME_BOUND:
        primes.append(int(p))
        p = gmpy2.next_prime(p)
    product = gmpy2.mpz(1)
    for q in primes:
        product *= q
    return tuple(primes), product


def small_factor(n: int) -> int | None:
    """The smallest prime below `SMALL_PRIME_BOUND` dividing `n`, or None."""
    primes, product = _small_primes()
    if gmpy2.gcd(n, product) == 1:
        return None
    return next(p for p in primes if n % p == 0)


def check_modulus(modulus: int, key_bits: int, *, test_keys: bool = False) -> int:
    """`modulus` if a party may accept it as the Paillier n of a `key_bits`-bit key.

    The same rule as key generation (`check_key_bits`), applied to a modulus someone else made:
    below 2048 bits only with `test_keys=True`, and never more than one bit short of the agreed
    λ = `key_bits` (n = p q of two λ/2-bit primes has λ or λ - 1 bits; phe's generator always
    gives λ). Without this a silo would encrypt under whatever small modulus it was sent.

    Beyond size and parity, what a silo can check cheaply without the factors (issue 12): no
    prime factor below 2^16 (one gcd with their product), not a perfect power (a square p^2
    included), not a prime (a prime n makes phi(n) = n - 1 public, so anyone decrypts). A modulus
    that passes can still be a bad one (three primes, or primes of very different size); ruling
    that out needs a zero-knowledge proof from the server that n is a product of two primes
    (e.g. Gennaro, Micciancio, Rabin, CCS 1998), which the semi-honest model of ULDP-FL does not
    ask for (docs/protocol.md, "Threat model"). g is not checked because it is not sent: the
    protocol fixes g = n + 1 (`PublicKey.encrypt`).
    """
    if isinstance(modulus, bool) or not isinstance(modulus, numbers.Integral):
        raise InvalidParameter(f"the Paillier modulus must be an integer, got {type(modulus).__name__}")
    n = int(modulus)
    bits = n.bit_length()
    if n < 3 or n % 2 == 0:
        raise InvalidParameter(
            f"the Paillier modulus must be an odd integer > 2 (n = p q), got {n}"
            if bits <= 64
            else "the Paillier modulus must be odd (n = p q)"
        )
    if bits < MIN_SECURE_KEY_BITS and not test_keys:
        raise InvalidParameter(
            f"a {bits}-bit Paillier modulus is insecure; keys must have >= {MIN_SECURE_KEY_BITS} "
            f"bits (default {DEFAULT_KEY_BITS}), or test_keys=True for tests only"
        )
    if bits < key_bits - 1:
        raise InvalidParameter(
            f"the Paillier modulus has {bits} bits, but the agreed key size is "
            f"{key_bits} bits (at least {key_bits - 1} accepted)"
        )
    factor = small_factor(n)
    if factor is not None:
        raise InvalidParameter(
            f"the Paillier modulus has the small prime factor {factor}; n = p q must have no prime "
            f"factor below 2^16"
        )
    if gmpy2.is_power(n):
        raise InvalidParameter("the Paillier modulus is a perfect power (e.g. p^2); n = p q needs p != q")
    if gmpy2.is_prime(n, 32):
        raise InvalidParameter("the Paillier modulus is a prime; n = p q must be a product of two primes")
    return modulus


def generate_keypair(
    key_bits: int = DEFAULT_KEY_BITS, *, test_keys: bool = False
) -> tuple[PublicKey, PrivateKey]:
    """A fresh Paillier key pair with an n of exactly `key_bits` bits (phe's generator).

    phe draws its primes from `random.SystemRandom`, i.e. `os.urandom`.
    """
    check_key_bits(key_bits, test_keys=test_keys)
    phe_public, phe_private = phe_paillier.generate_paillier_keypair(n_length=key_bits)
    public = PublicKey(gmpy2.mpz(phe_public.n))
    return public, PrivateKey(public, phe_private)
