"""Private user-level sub-sampling (ULDP-FL §4.1): the rate m/P, and the server's view it buys."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uldp.accountants.account import account_plan
from uldp.accountants.private_sampling import (
    DEFAULT_SLOTS,
    MAX_SLOTS,
    SERVER_VIEW_NOTE,
    PrivateSampling,
    private_rate,
)
from uldp.errors import InvalidParameter
from uldp.trainers.algorithms import plan_algorithm

DELTA = 1e-5


def test_default_slots_is_100() -> None:
    assert DEFAULT_SLOTS == 100
    rate = private_rate(0.333)
    assert (rate.m, rate.slots, rate.q) == (33, 100, 0.33)
    words = "user q 0.333 rounded to m/P = 33/100 = 0.33 (private sampling draws at rates m/P)"
    assert rate.describe() == words


def test_a_rate_already_m_over_p_is_kept_and_said_so() -> None:
    rate = private_rate(0.25, 4)
    assert (rate.m, rate.slots, rate.q) == (1, 4, 0.25)
    assert rate.describe() == "user q m/P = 1/4 = 0.25 (private sampling draws at rates m/P)"


@pytest.mark.parametrize(("q", "slots", "m"), [(0.335, 100, 34), (0.125, 4, 1), (0.375, 4, 2), (0.05, 10, 1)])
def test_ties_go_up_on_the_decimal_typed(q: float, slots: int, m: int) -> None:
    # 0.335 is stored just below 335/1000; it is read as typed, and the tie 33.5 goes up.
    assert private_rate(q, slots).m == m


@given(q=st.floats(min_value=1e-6, max_value=1.0), slots=st.integers(min_value=2, max_value=MAX_SLOTS))
def test_rounding_is_within_half_a_slot_or_refused(q: float, slots: int) -> None:
    try:
        rate = private_rate(q, slots)
    except InvalidParameter as error:
        message = str(error)
        assert "\n" not in message and "--user-q" in message and "--sampling-slots" in message
        m = Fraction(repr(q)) * slots
        assert m < Fraction(1, 2) or m >= slots - Fraction(1, 2)
        return
    assert 1 <= rate.m <= slots - 1 and rate.slots == slots
    assert abs(rate.q - q) <= 1 / (2 * slots) + 1e-12
    assert rate.q == rate.m / slots and rate.fraction == Fraction(rate.m, slots)


@pytest.mark.parametrize(
    ("q", "slots", "words"),
    [
        (0.5, 1, "--sampling-slots must be an integer in [2, 10000]"),
        (0.5, 0, "--sampling-slots"),
        (0.5, MAX_SLOTS + 1, "--sampling-slots"),
        (0.5, 2.0, "--sampling-slots must be an integer"),
        (0.0, 100, "--user-q must be in (0, 1]"),
        (1.5, 100, "--user-q must be in (0, 1]"),
        (float("nan"), 100, "--user-q must be in (0, 1]"),
        (0.004, 100, "the smallest rate is 1/100 = 0.01"),
        (0.996, 100, "no sampling"),
        (1.0, 100, "no sample to hide"),
    ],
)
def test_refusals_name_the_option_in_one_line(q: float, slots: int, words: str) -> None:
    with pytest.raises(InvalidParameter, match=None) as caught:
        private_rate(q, slots)  # type: ignore[arg-type]
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_dataclass_refuses_m_outside_1_to_p_minus_1() -> None:
    for m, slots in ((0, 10), (10, 10), (11, 10), (1, 1)):
        with pytest.raises(InvalidParameter):
            PrivateSampling(m, slots)
    assert PrivateSampling(3, 10).assumption_lines()[0] == (
        "private sampling",
        "user q m/P = 3/10 = 0.3 (private sampling draws at rates m/P)",
    )


@pytest.mark.parametrize("algo", ["uldp-avg-w", "uldp-sgd-w"])
def test_private_sampling_gives_the_server_the_released_models_epsilon(algo: str) -> None:
    plan = plan_algorithm(algo, sigma=5, rounds=100, user_q=0.33, silos=3)
    released, server = account_plan(plan, delta=DELTA, private_sampling=True)
    assert server.method == "server view" and server.note == SERVER_VIEW_NOTE
    assert (server.epsilon, server.order, server.accountant) == (released.epsilon, released.order, "rdp")
    # Without it the server knows the sample: no amplification against it, a larger epsilon.
    plain = account_plan(plan, delta=DELTA)
    assert plain[0] == released
    assert plain[1].epsilon > 1.2 * server.epsilon and plain[1].note == "knows the user sample"


def test_the_server_row_follows_the_first_accountant() -> None:
    plan = plan_algorithm("uldp-avg-w", sigma=5, rounds=20, user_q=0.5, silos=3)
    rows = account_plan(plan, delta=DELTA, accountants=("pld", "rdp"), private_sampling=True)
    assert [r.method for r in rows] == ["user", "user", "server view"]
    assert (rows[2].epsilon, rows[2].accountant) == (rows[0].epsilon, "pld")
    assert len(account_plan(plan, delta=DELTA, server_view=False, private_sampling=True)) == 1


@pytest.mark.parametrize(
    "plan",
    [
        plan_algorithm("uldp-avg-w", sigma=5, rounds=20, user_q=1.0, silos=3),
        plan_algorithm("uldp-group", sigma=1, rounds=10, record_q=0.01, silos=2, k=2),
    ],
)
def test_private_sampling_without_user_sampling_is_refused(plan) -> None:
    with pytest.raises(InvalidParameter, match="samples users"):
        account_plan(plan, delta=DELTA, private_sampling=True)
