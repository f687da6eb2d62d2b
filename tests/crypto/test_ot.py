"""1-out-of-P oblivious transfer (`crypto.ot`, Chou-Orlandi "simplest OT" in the RFC 3526 group).

What is checked: the receiver derives the sender's key at its choice and at no other index, for
every choice; its message B lies in the prime-order subgroup; elements outside that subgroup are
refused wherever a party receives one; keys are bound to their context; the pad inverts itself.

Not checked here: that B reveals nothing of the choice as a distribution (B = g^b A^c is uniform
on the subgroup for b uniform, whatever c is). A statistical test of that would need many 3072-bit
exponentiations and could only ever fail to reject; instead `test_every_b_is_consistent_with_every_choice`
checks the algebraic fact the argument rests on: for a given B, every choice c' has an exponent b'
that explains it.
"""

from __future__ import annotations

import hashlib

import gmpy2
import pytest

from uldp.crypto import ot
from uldp.crypto.dh import MODP_3072_GENERATOR, MODP_3072_PRIME
from uldp.errors import ProtocolError

P = MODP_3072_PRIME
Q = (P - 1) // 2


def _first_non_residue() -> int:
    value = 2
    while gmpy2.jacobi(value, P) != -1:
        value += 1
    return value


NON_RESIDUE = _first_non_residue()
ORDER_2Q = (P - 1) * MODP_3072_GENERATOR % P  # -g: a generator of the whole group Z*_p (order 2q)


def in_subgroup(value: int) -> bool:
    return 1 < value < P and pow(value, Q, P) == 1


def transfer(slots: int, choice: int, context: bytes = b"test/ot"):
    sender = ot.offer()
    b, big_b = ot.choose(sender.public, choice, slots)
    keys = ot.sender_keys(context, sender, big_b, slots)
    key = ot.receiver_key(context, sender.public, big_b, b, choice)
    return sender, b, big_b, keys, key


@pytest.mark.parametrize("slots", [2, 3, 7])
def test_receiver_key_equals_the_senders_key_at_the_choice_and_no_other(slots):
    for choice in range(slots):
        _, _, _, keys, key = transfer(slots, choice)
        assert len(keys) == slots and all(len(k) == ot.KEY_BYTES for k in keys)
        assert keys[choice] == key
        assert [i for i, k in enumerate(keys) if k == key] == [choice]
        assert len(set(keys)) == slots  # the other slots' keys are distinct from each other too


def test_sender_keys_are_the_definition_not_only_the_incremental_product():
    """sender_keys steps (B / A^i)^a by one multiplication per slot: compare with the formula."""
    slots, context = 5, b"test/ot/formula"
    sender, _, big_b, keys, _ = transfer(slots, 3, context)
    for i in range(slots):
        shared = pow(big_b * pow(pow(sender.public, i, P), -1, P) % P, sender.secret, P)
        digest = hashlib.sha256(b"uldp/ot/chou-orlandi/v1")
        digest.update(len(context).to_bytes(4, "big") + context + i.to_bytes(4, "big"))
        for element in (sender.public, big_b, shared):
            digest.update(element.to_bytes(ot.ELEMENT_BYTES, "big"))
        assert keys[i] == digest.digest()


def test_the_choice_message_and_the_offer_lie_in_the_subgroup():
    for choice in (0, 1, 9):
        sender, b, big_b, _, _ = transfer(10, choice)
        assert in_subgroup(sender.public) and in_subgroup(big_b)
        assert gmpy2.jacobi(big_b, P) == 1 and ot.check_element(big_b, "B") == big_b
        assert big_b == pow(MODP_3072_GENERATOR, b, P) * pow(sender.public, choice, P) % P
        assert 2 <= b < 2**ot.EXPONENT_BITS and 2 <= sender.secret < 2**ot.EXPONENT_BITS
        assert ot.public_of(sender.secret) == sender.public


def test_every_b_is_consistent_with_every_choice():
    """B = g^b A^c = g^(b + a (c - c')) A^c' for every c': the same B for any choice (perfect
    hiding, given b uniform modulo q). The sender's secret a is used only to exhibit b'."""
    slots = 6
    sender, b, big_b, _, _ = transfer(slots, 4)
    for other in range(slots):
        explaining = (b + sender.secret * (4 - other)) % Q
        assert pow(MODP_3072_GENERATOR, explaining, P) * pow(sender.public, other, P) % P == big_b


BAD_ELEMENTS = [
    pytest.param(0, id="zero"),
    pytest.param(1, id="one"),
    pytest.param(P - 1, id="p-1"),
    pytest.param(P, id="p"),
    pytest.param(P + 4, id="above-p"),
    pytest.param(-4, id="negative"),
    pytest.param(NON_RESIDUE, id="non-residue"),
    pytest.param(ORDER_2Q, id="generator-of-Z*p"),
]


@pytest.mark.parametrize("value", BAD_ELEMENTS)
def test_elements_outside_the_subgroup_are_refused_by_every_party(value):
    assert not in_subgroup(value)  # each really is outside the subgroup (or out of range)
    with pytest.raises(ProtocolError, match="group element|prime-order subgroup"):
        ot.check_element(value, "x")
    with pytest.raises(ProtocolError, match="the sender's OT offer A"):
        ot.choose(value, 0, 2)
    with pytest.raises(ProtocolError, match="the sender's OT offer A"):
        ot.receiver_key(b"c", value, ot.offer().public, 5, 0)
    with pytest.raises(ProtocolError, match="the receiver's OT choice B"):
        ot.sender_keys(b"c", ot.offer(), value, 2)


@pytest.mark.parametrize("value", [True, 4.0, "4", None])
def test_non_integers_are_refused_as_elements(value):
    with pytest.raises(ProtocolError, match="not a group element"):
        ot.check_element(value, "x")


def test_the_non_residue_and_full_group_generator_are_what_they_claim():
    assert gmpy2.jacobi(NON_RESIDUE, P) == -1 and pow(NON_RESIDUE, Q, P) == P - 1
    assert pow(ORDER_2Q, Q, P) == P - 1 and pow(ORDER_2Q, 2, P) != 1
    assert gmpy2.jacobi(P - 1, P) == -1  # p = 3 mod 4: -1 is not a square


@pytest.mark.parametrize("choice", [-1, 4, 100])
def test_a_choice_outside_the_slots_is_refused(choice):
    with pytest.raises(ProtocolError, match=r"OT choice .* is not in \[0, 4\)"):
        ot.choose(ot.offer().public, choice, 4)


def test_distinct_contexts_give_distinct_keys():
    sender = ot.offer()
    b, big_b = ot.choose(sender.public, 2, 4)
    first = ot.sender_keys(b"uldp/test/1", sender, big_b, 4)
    second = ot.sender_keys(b"uldp/test/2", sender, big_b, 4)
    assert not set(first) & set(second)
    assert ot.receiver_key(b"uldp/test/1", sender.public, big_b, b, 2) == first[2]
    assert ot.receiver_key(b"uldp/test/2", sender.public, big_b, b, 2) == second[2]
    # the context is length-prefixed: shifting bytes between context and index changes the key
    assert (
        ot.sender_keys(b"uldp/test/1", sender, big_b, 4)[1]
        != ot.sender_keys(b"uldp/test/", sender, big_b, 4)[1]
    )


def test_keys_are_bound_to_the_transcript():
    """A receiver that runs a second transfer against the same offer gets unrelated keys."""
    sender = ot.offer()
    _, first_b = ot.choose(sender.public, 1, 3)
    _, second_b = ot.choose(sender.public, 1, 3)
    assert first_b != second_b  # fresh b each time
    assert not set(ot.sender_keys(b"c", sender, first_b, 3)) & set(ot.sender_keys(b"c", sender, second_b, 3))
    other = ot.offer()
    assert other.public != sender.public and other.secret != sender.secret


def test_receiver_with_the_wrong_exponent_or_choice_gets_another_key():
    sender, b, big_b, keys, key = transfer(4, 1)
    assert ot.receiver_key(b"test/ot", sender.public, big_b, b + 1, 1) not in keys
    assert ot.receiver_key(b"test/ot", sender.public, big_b, b, 2) not in keys  # claims another index


def test_pad_round_trips_and_hides():
    key, message = bytes(range(32)), hashlib.sha256(b"slot key").digest()
    padded = ot.pad(key, message)
    assert padded != message and ot.pad(key, padded) == message
    assert ot.pad(bytes(32), message) == message  # XOR, nothing else
    other = hashlib.sha256(b"other").digest()
    assert ot.pad(other, padded) != message
    for key_len, message_len in ((31, 32), (32, 33), (0, 32), (32, 0)):
        with pytest.raises(ProtocolError, match="32-byte keys and messages"):
            ot.pad(bytes(key_len), bytes(message_len))


def test_random_exponents_are_in_range_and_fresh():
    drawn = {ot.random_exponent() for _ in range(50)}
    assert len(drawn) == 50 and all(2 <= e < 2**ot.EXPONENT_BITS for e in drawn)
    assert max(drawn).bit_length() > ot.EXPONENT_BITS - 8  # full-width, not a short exponent
