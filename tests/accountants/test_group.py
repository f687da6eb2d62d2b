"""Group privacy (ULDP-FL Lemmas 5 and 6) against the paper's Fig. 2 setting and its conditions."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.accountants.account import account, group_level, record_level
from uldp.accountants.events import SubsampledGaussian
from uldp.accountants.rdp.group import doubling_exponent, normal_group, rdp_group
from uldp.accountants.rdp.profile import RdpProfile

FIG2 = SubsampledGaussian(sigma=5.0, q=0.01, steps=100_000)
LOG_DELTA = math.log(1e-5)


def test_fig2_record_level_epsilon_is_the_papers():
    # ULDP-FL §2.2: "with epsilon = 2.85 at record-level (k = 1)".
    assert record_level(FIG2, 1e-5).epsilon == pytest.approx(2.85, abs=0.005)


@pytest.mark.parametrize("k", [2, 4, 8, 16, 32, 64])
def test_lemma6_uses_only_orders_the_lemma_allows(k):
    bound = rdp_group(RdpProfile(FIG2), k, LOG_DELTA)
    c = doubling_exponent(k)
    assert bound.base_order >= 2 ** (c + 1)
    assert bound.order == pytest.approx(bound.base_order / 2**c)


def test_lemma6_rounds_k_up_to_a_power_of_two():
    profile = RdpProfile(FIG2)
    three, four = rdp_group(profile, 3, LOG_DELTA), rdp_group(profile, 4, LOG_DELTA)
    assert three.group_size_used == 4 and three.epsilon == four.epsilon
    assert "next power of two" in three.note


def test_lemma6_refuses_order_sets_that_break_its_condition():
    # The TF-Privacy set stops at 63, below the 2^(5+1) = 64 that k = 32 needs.
    bound = rdp_group(RdpProfile(FIG2), 32, LOG_DELTA, "tf-privacy")
    assert math.isinf(bound.epsilon) and "alpha >= 2^(c+1)" in bound.note


@pytest.mark.parametrize("k", [2, 3, 8, 64, 1024])
def test_lemma5_bound_meets_the_target_delta(k):
    profile = RdpProfile(FIG2)
    bound = normal_group(profile, k, LOG_DELTA)
    record_eps = bound.epsilon / k
    # Lemma 5: (eps', delta')-DP gives (k eps', k e^{(k-1) eps'} delta') for groups of k.
    group_log_delta = math.log(k) + (k - 1) * record_eps + bound.record_log_delta
    assert group_log_delta <= LOG_DELTA + 1e-9
    # ... and the record-level epsilon really holds at that delta'.
    again = record_level(FIG2, 1e-5)  # same mechanism, sanity that eps' >= eps at delta = 1e-5
    assert record_eps >= again.epsilon


def test_group_bounds_are_finite_up_to_k_1024():
    results = account(FIG2, ks=[1024], methods=["rdp", "normal"])
    assert all(np.isfinite(r.epsilon) and r.epsilon > 0 for r in results)


def test_normal_group_of_one_is_record_level():
    assert normal_group(RdpProfile(FIG2), 1, LOG_DELTA).epsilon == record_level(FIG2, 1e-5).epsilon


mechanisms = st.builds(
    SubsampledGaussian, sigma=st.floats(0.5, 20), q=st.floats(1e-3, 1.0), steps=st.integers(1, 10_000)
)


@settings(max_examples=25)
@given(mechanism=mechanisms, k=st.integers(1, 32), method=st.sampled_from(["rdp", "normal"]))
def test_epsilon_grows_with_k(mechanism, k, method):
    def eps(kk):
        if kk == 1:
            return record_level(mechanism, 1e-5).epsilon
        return group_level(mechanism, 1e-5, kk, method).epsilon

    assert eps(k + 1) >= eps(k) * (1 - 1e-9)


@settings(max_examples=25)
@given(
    mechanism=mechanisms,
    k=st.sampled_from([1, 2, 4, 8]),
    method=st.sampled_from(["rdp", "normal"]),
    factor=st.floats(1.05, 3),
)
def test_group_epsilon_monotone_in_sigma_q_and_steps(mechanism, k, method, factor):
    def eps(m):
        if k == 1:
            return record_level(m, 1e-5).epsilon
        return group_level(m, 1e-5, k, method).epsilon

    base = eps(mechanism)
    s, q, t = mechanism.sigma, mechanism.q, mechanism.steps
    assert eps(SubsampledGaussian(s * factor, q, t)) <= base * (1 + 1e-9)
    assert eps(SubsampledGaussian(s, min(1.0, q * factor), t)) >= base * (1 - 1e-9)
    assert eps(SubsampledGaussian(s, q, int(t * factor) + 1)) >= base * (1 - 1e-9)
