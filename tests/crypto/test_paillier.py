"""Paillier over phe: round trips, homomorphisms, CRT decryption, and the key-size guard."""

from __future__ import annotations

import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.crypto import paillier
from uldp.crypto.paillier import DEFAULT_KEY_BITS, check_key_bits, generate_keypair


def test_default_is_3072_bits_and_small_keys_need_the_test_flag():
    import inspect

    assert DEFAULT_KEY_BITS == 3072
    assert inspect.signature(generate_keypair).parameters["key_bits"].default == 3072
    with pytest.raises(ValueError, match="insecure"):
        generate_keypair(1024)
    with pytest.raises(ValueError, match="insecure"):
        check_key_bits(2046)
    assert check_key_bits(2048) == 2048
    assert check_key_bits(512, test_keys=True) == 512
    with pytest.raises(ValueError, match=">= 256"):
        check_key_bits(128, test_keys=True)
    with pytest.raises(ValueError, match="even"):
        check_key_bits(1023, test_keys=True)


def test_key_has_requested_size(keypair_1024):
    public, private = keypair_1024
    assert public.bits == 1024
    assert private.p * private.q == public.n
    assert public.nsquare == public.n**2


@settings(max_examples=30)
@given(
    a=st.integers(min_value=-(2**600), max_value=2**600),
    b=st.integers(min_value=-(2**600), max_value=2**600),
    k=st.integers(min_value=-(2**200), max_value=2**200),
)
def test_homomorphisms(keypair_1024, a, b, k):
    public, private = keypair_1024
    n = public.n
    ca, cb = public.encrypt(a), public.encrypt(b)
    assert private.decrypt(ca) == a % n
    assert private.decrypt(public.add(ca, cb)) == (a + b) % n
    assert private.decrypt(public.add_plain(ca, b)) == (a + b) % n
    assert private.decrypt(public.mul_plain(ca, k)) == (a * k) % n
    again = public.rerandomize(ca)
    assert again != ca and private.decrypt(again) == a % n


def test_encryption_is_randomized(keypair_512):
    public, _ = keypair_512
    assert public.encrypt(5) != public.encrypt(5)


def test_decryption_uses_crt_and_matches_the_textbook_formula(keypair_512, monkeypatch):
    import phe.paillier

    public, private = keypair_512
    moduli = []
    real_powmod = phe.paillier.powmod
    monkeypatch.setattr(phe.paillier, "powmod", lambda a, b, c: moduli.append(c) or real_powmod(a, b, c))
    private.decrypt(public.encrypt(42))
    # phe decrypts modulo p^2 and q^2 and joins by the CRT; never a full exponentiation mod n^2.
    assert sorted(moduli) == sorted([private.p**2, private.q**2])
    monkeypatch.undo()
    lam = gmpy2.lcm(private.p - 1, private.q - 1)
    n, nsq = public.n, public.nsquare
    mu = gmpy2.invert((gmpy2.powmod(n + 1, lam, nsq) - 1) // n, n)
    for m in (0, 1, 12345, int(n) - 1):
        c = public.encrypt(m)
        textbook = (gmpy2.powmod(c, lam, nsq) - 1) // n * mu % n
        assert private.decrypt(c) == textbook == m


def test_randomness_comes_from_secrets(monkeypatch, keypair_512):
    public, _ = keypair_512
    calls = []
    real = paillier.secrets.randbelow
    monkeypatch.setattr(paillier.secrets, "randbelow", lambda k: calls.append(k) or real(k))
    public.encrypt(7)
    assert calls


def test_key_holder_crt_encryption_is_a_valid_encryption(keypair_1024, monkeypatch):
    public, private = keypair_1024
    r = public.random_unit()
    monkeypatch.setattr(type(public), "random_unit", lambda self: r)
    assert private.obfuscator() == gmpy2.powmod(r, public.n, public.nsquare)
    monkeypatch.undo()
    for m in (0, 3, -7, int(public.n) - 2):
        c = private.encrypt(m)
        assert private.decrypt(c) == m % public.n
        assert private.decrypt(public.add(c, public.encrypt(5))) == (m + 5) % public.n
