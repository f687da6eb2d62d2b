"""One-run privacy audit (accountants/statements/audit_bound.py): the p-value and the epsilon lower bound of
Steinke, Nasr, Jagielski 2023 against the paper's own Appendix D code (transcribed below as the
reference), their monotonicity, the guesser, the Bonferroni-corrected best bound over guess counts
and its false-positive rate when the scores carry no information."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from uldp.accountants.statements.audit_bound import (
    CONFIDENCE,
    GUESS_FRACTIONS,
    AuditBound,
    audit_scores,
    correct_guesses,
    epsilon_lower_bound,
    guess_counts,
    p_value,
    p_values,
)
from uldp.errors import InvalidParameter

# --- The reference: Steinke, Nasr, Jagielski 2023, Appendix D, verbatim. ---------------------------


def p_value_DP_audit(m, r, v, eps, delta):
    q = 1 / (1 + math.exp(-eps))
    beta = scipy.stats.binom.sf(v - 1, r, q)
    alpha = 0
    sum = 0
    for i in range(1, v + 1):
        sum = sum + scipy.stats.binom.pmf(v - i, r, q)
        if sum > i * alpha:
            alpha = sum / i
    p = beta + alpha * delta * 2 * m
    return min(p, 1)


def get_eps_audit(m, r, v, delta, p):
    eps_min = 0
    eps_max = 1
    while p_value_DP_audit(m, r, v, eps_max, delta) < p:
        eps_max = eps_max + 1
    for _ in range(30):
        eps = (eps_min + eps_max) / 2
        if p_value_DP_audit(m, r, v, eps, delta) < p:
            eps_min = eps
        else:
            eps_max = eps
    return eps_min


# ---------------------------------------------------------------------------------------------------

M = 1000
EPSILONS = (0.0, 0.3, 1.0, 2.0, 4.0, 8.0)
DELTAS = (0.0, 1e-6, 1e-5, 1e-3)


def _p_cases():
    for r, vs in (
        (20, (0, 1, 10, 13, 16, 19, 20)),
        (100, (50, 60, 75, 90, 99, 100)),
        (1000, (500, 750, 1000)),
    ):
        for v in vs:
            yield r, v


@pytest.mark.parametrize(("r", "v"), list(_p_cases()))
def test_p_value_matches_paper_code(r, v):
    """p_value equals the paper's p_value_DP_audit (rtol 1e-9) over a grid of epsilon and delta."""
    for delta in DELTAS if r < 1000 else (0.0, 1e-5):
        for eps in EPSILONS:
            ours = p_value(M, r, v, eps, delta)
            ref = p_value_DP_audit(M, r, v, eps, delta)
            assert ours == pytest.approx(ref, rel=1e-9, abs=0.0), (r, v, eps, delta)


def test_p_values_vectorised_matches_scalar():
    """p_values over an array of epsilons equals p_value at each one."""
    eps = np.linspace(0.0, 6.0, 13)
    for delta in (0.0, 1e-5):
        vec = p_values(500, 80, 70, eps, delta)
        assert vec.shape == eps.shape
        np.testing.assert_allclose(vec, [p_value(500, 80, 70, e, delta) for e in eps], rtol=1e-12)


def _eps_cases():
    for r, vs in ((20, (10, 12, 15, 18, 20)), (100, (50, 51, 60, 75, 90, 100))):
        for v in vs:
            for delta in (0.0, 1e-5, 1e-3):
                yield M, r, v, delta, 0.95
    for v in (600, 900, 1000):
        yield M, 1000, v, 1e-5, 0.95


@pytest.mark.parametrize(("m", "r", "v", "delta", "confidence"), list(_eps_cases()))
def test_epsilon_lower_bound_matches_paper_code(m, r, v, delta, confidence):
    """epsilon_lower_bound agrees with get_eps_audit to 1e-4 and is never above it by more than 1e-5."""
    ours = epsilon_lower_bound(m, r, v, delta, confidence)
    ref = get_eps_audit(m, r, v, delta, 1 - confidence)
    assert abs(ours - ref) <= 1e-4
    assert ours <= ref + 1e-5


@pytest.mark.parametrize(
    ("m", "r", "v", "delta", "confidence", "expected"),
    [
        (200, 200, 200, 1e-5, 1 - 0.05 / 6, 3.7067),
        (1000, 1000, 1000, 1e-5, 0.95, 5.7823),
    ],
)
def test_epsilon_lower_bound_known_values(m, r, v, delta, confidence, expected):
    """Perfect guesses give the known bounds (3.7067 for m=r=v=200, 5.7823 for m=r=v=1000)."""
    ours = epsilon_lower_bound(m, r, v, delta, confidence)
    assert ours == pytest.approx(expected, abs=1e-4)  # the paper code's value (checked above for m = 1000)
    if m < 1000:
        assert ours == pytest.approx(get_eps_audit(m, r, v, delta, 1 - confidence), abs=1e-4)


def test_epsilon_lower_bound_is_rejected_and_tight():
    """The returned bound is itself rejected (p < level) and eps + 1e-5 is not."""
    for m, r, v, delta in ((1000, 100, 90, 1e-5), (200, 200, 180, 0.0), (1000, 20, 20, 1e-6)):
        eps = epsilon_lower_bound(m, r, v, delta, 0.95)
        assert eps > 0
        assert p_value(m, r, v, eps, delta) < 0.05
        assert p_value(m, r, v, eps + 1e-5, delta) >= 0.05


def test_epsilon_lower_bound_zero_when_nothing_rejected():
    """No guesses, no correct guesses, or a delta so large it swamps the test give a bound of 0."""
    assert epsilon_lower_bound(100, 0, 0, 1e-5) == 0.0
    assert epsilon_lower_bound(100, 50, 0, 1e-5) == 0.0
    assert epsilon_lower_bound(1000, 100, 100, 0.5) == 0.0  # 2 m delta alpha >= 1
    assert p_value(100, 50, 0, 3.0, 1e-5) == 1.0


def test_p_value_delta_term():
    """At delta = 0 the p-value is the plain binomial tail; the delta term is 2 m delta alpha."""
    m, r, v, eps = 400, 60, 50, 1.5
    q = 1 / (1 + math.exp(-eps))
    beta = scipy.stats.binom.sf(v - 1, r, q)
    assert p_value(m, r, v, eps, 0.0) == pytest.approx(beta, rel=1e-12)
    pmf = scipy.stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)
    alpha = np.max(np.cumsum(pmf) / np.arange(1, v + 1))
    assert p_value(m, r, v, eps, 1e-4) == pytest.approx(beta + 2 * m * 1e-4 * alpha, rel=1e-12)


# --- Properties. ------------------------------------------------------------------------------------

_delta = st.sampled_from((0.0, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3))


@st.composite
def _counts(draw, max_r=200):
    r = draw(st.integers(1, max_r))
    m = draw(st.integers(r, 5000))
    v = draw(st.integers(0, r))
    return m, r, v


@settings(max_examples=40, deadline=None)
@given(counts=_counts(), delta=_delta, confidence=st.floats(0.5, 0.999))
def test_bound_non_decreasing_in_correct_guesses(counts, delta, confidence):
    """One more correct guess never lowers the bound."""
    m, r, v = counts
    v = min(v, r - 1)
    assert epsilon_lower_bound(m, r, v + 1, delta, confidence) >= epsilon_lower_bound(
        m, r, v, delta, confidence
    )


@settings(max_examples=40, deadline=None)
@given(counts=_counts(), delta=_delta, c1=st.floats(0.01, 0.999), c2=st.floats(0.01, 0.999))
def test_bound_non_increasing_in_confidence(counts, delta, c1, c2):
    """Asking for more confidence never raises the bound."""
    m, r, v = counts
    low, high = sorted((c1, c2))
    assert epsilon_lower_bound(m, r, v, delta, high) <= epsilon_lower_bound(m, r, v, delta, low)


@settings(max_examples=40, deadline=None)
@given(counts=_counts(), d1=_delta, d2=_delta, confidence=st.floats(0.5, 0.999))
def test_bound_non_increasing_in_delta(counts, d1, d2, confidence):
    """A larger delta never raises the bound."""
    m, r, v = counts
    small, large = sorted((d1, d2))
    assert epsilon_lower_bound(m, r, v, large, confidence) <= epsilon_lower_bound(m, r, v, small, confidence)


@settings(max_examples=40, deadline=None)
@given(counts=_counts(), delta=_delta, confidence=st.floats(0.5, 0.999))
def test_bound_zero_at_chance(counts, delta, confidence):
    """At most r / 2 correct guesses (chance) rejects nothing: the bound is 0."""
    m, r, _ = counts
    v = r // 2
    assert epsilon_lower_bound(m, r, v, delta, confidence) == 0.0


@settings(max_examples=40, deadline=None)
@given(counts=_counts(max_r=400), delta=_delta)
def test_p_values_monotone_and_in_unit_interval(counts, delta):
    """p_values lies in [0, 1] and is non-decreasing in epsilon."""
    m, r, v = counts
    p = p_values(m, r, v, np.linspace(0.0, 12.0, 121), delta)
    assert ((p >= 0) & (p <= 1)).all()
    assert (np.diff(p) >= -1e-15).all()


@settings(max_examples=20, deadline=None)
@given(counts=_counts(max_r=100), delta=_delta, confidence=st.floats(0.5, 0.999))
def test_bound_agrees_with_reference_property(counts, delta, confidence):
    """On random (m, r, v, delta, confidence) the bound is within [-1e-4, +1e-5] of get_eps_audit."""
    m, r, v = counts
    ours = epsilon_lower_bound(m, r, v, delta, confidence)
    ref = get_eps_audit(m, r, v, delta, 1 - confidence)
    assert ref - 1e-4 <= ours <= ref + 1e-5


# --- The guesser. -----------------------------------------------------------------------------------


def test_guess_counts_default():
    """The default guess counts are round(f m), even, at least 2 and at most m (rounded down to even)."""
    assert guess_counts(1000) == (20, 50, 100, 200, 500, 1000)
    assert guess_counts(200) == (4, 10, 20, 40, 100, 200)
    assert guess_counts(101) == (2, 6, 10, 20, 50, 100)
    assert guess_counts(3) == (2,)
    assert guess_counts(2) == (2,)
    assert guess_counts(1) == ()
    assert guess_counts(1000, (0.1,)) == (100,)


@settings(max_examples=50, deadline=None)
@given(m=st.integers(2, 100_000))
def test_guess_counts_property(m):
    """Guess counts are sorted, distinct, even, in [2, m], one per fraction at most."""
    counts = guess_counts(m)
    assert counts == tuple(sorted(set(counts)))
    assert 1 <= len(counts) <= len(GUESS_FRACTIONS)
    assert all(c % 2 == 0 and 2 <= c <= m for c in counts)


def test_correct_guesses_known_answers():
    """Hand-built scores: the r / 2 highest guessed in, the r / 2 lowest out."""
    scores = np.array([5.0, 1.0, 4.0, 0.0, 3.0, 2.0])  # order: 3, 1, 5, 4, 2, 0
    included = np.array([True, False, True, False, True, False])  # the top half is included
    assert correct_guesses(scores, included, 6) == 6
    assert correct_guesses(scores, included, 2) == 2  # canary 0 in, canary 3 out
    assert correct_guesses(scores, included, 4) == 4
    assert correct_guesses(scores, ~included, 6) == 0
    assert correct_guesses(scores, included, 0) == 0
    assert correct_guesses(scores, included, 3) == correct_guesses(
        scores, included, 2
    )  # odd r: r // 2 a side
    # Swap the middle: canaries 5 (score 2, out) and 4 (score 3, in) trade inclusion.
    mixed = np.array([True, False, True, False, False, True])
    assert correct_guesses(scores, mixed, 6) == 4
    assert correct_guesses(scores, mixed, 4) == 4  # top 2 (canaries 0, 2) in; bottom 2 (3, 1) out


def test_correct_guesses_ties_broken_by_index():
    """Equal scores: lower canary indices rank lower (guessed out), higher ones higher (guessed in)."""
    scores = np.zeros(4)
    assert correct_guesses(scores, np.array([False, False, True, True]), 4) == 4
    assert correct_guesses(scores, np.array([True, True, False, False]), 4) == 0
    assert correct_guesses(scores, np.array([False, True, False, True]), 2) == 2  # 0 out, 3 in
    assert correct_guesses(scores, np.array([True, False, True, False]), 2) == 0
    # A tie among the middle only: the extremes decide.
    assert correct_guesses(np.array([-1.0, 0.0, 0.0, 1.0]), np.array([False, True, False, True]), 2) == 2


def test_correct_guesses_integer_flags():
    """0/1 integer inclusion flags count the same as booleans."""
    scores = np.array([0.0, 1.0])
    assert correct_guesses(scores, np.array([0, 1]), 2) == correct_guesses(scores, np.array([False, True]), 2)


# --- The audit. -------------------------------------------------------------------------------------


def _separated(m, seed=0):
    rng = np.random.default_rng(seed)
    included = np.zeros(m, dtype=bool)
    included[rng.permutation(m)[: m // 2]] = True
    scores = rng.normal(size=m) + 100.0 * included
    return scores, included


@pytest.mark.parametrize("m", [200, 1000])
def test_audit_perfectly_separated(m):
    """Perfectly separated scores give the best perfect-guess bound at the Bonferroni level."""
    scores, included = _separated(m)
    delta = 1e-5
    result = audit_scores(scores, included, delta=delta)
    counts = guess_counts(m)
    per_test = 1 - (1 - CONFIDENCE) / len(counts)
    best = max(epsilon_lower_bound(m, r, r, delta, per_test) for r in counts)
    assert isinstance(result, AuditBound)
    assert result.epsilon == pytest.approx(best, abs=1e-12)
    assert result.correct == result.guesses
    assert result.accuracy == 1.0
    assert epsilon_lower_bound(m, result.guesses, result.guesses, delta, per_test) == result.epsilon
    assert result.canaries == m
    assert result.guess_counts == counts
    assert result.confidence == CONFIDENCE
    assert result.delta == delta
    if m == 200:
        assert result.epsilon == pytest.approx(3.7067, abs=1e-4)  # r = 200 at 1 - 0.05 / 6


def test_audit_single_count_no_bonferroni():
    """With one guess count the test runs at the stated confidence, no correction."""
    scores, included = _separated(1000)
    result = audit_scores(scores, included, delta=1e-5, confidence=0.95, counts=[1000])
    assert result.guess_counts == (1000,)
    assert result.epsilon == pytest.approx(5.7823, abs=1e-4)
    assert result.epsilon >= audit_scores(scores, included, delta=1e-5, confidence=0.95).epsilon


def test_audit_odd_counts_use_even_guesses():
    """An odd guess count r guesses r // 2 on each side (r - 1 in all); r = 1 guesses nothing."""
    scores, included = _separated(100)
    odd = audit_scores(scores, included, delta=0.0, counts=[41])
    assert (odd.guesses, odd.correct) == (40, 40)
    assert odd.epsilon == audit_scores(scores, included, delta=0.0, counts=[40]).epsilon
    one = audit_scores(scores, included, delta=0.0, counts=[1])
    assert (one.guesses, one.correct, one.epsilon) == (0, 0, 0.0)
    assert math.isnan(one.accuracy)


def test_audit_false_positive_rate():
    """Scores independent of inclusion: over 200 seeds (m = 200) the bound is > 0 in at most 10%."""
    positives = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        included = rng.random(200) < 0.5
        result = audit_scores(rng.normal(size=200), included, delta=1e-5)
        positives += result.epsilon > 0
        assert result.epsilon < 1.0
    assert positives / 200 <= 0.1


def test_audit_grows_with_shift():
    """Gaussian scores shifted by mu on included canaries: the bound is non-decreasing in mu."""
    m = 1000
    rng = np.random.default_rng(7)
    included = rng.random(m) < 0.5
    noise = rng.normal(size=m)
    bounds = [
        audit_scores(noise + mu * included, included, delta=1e-5).epsilon for mu in (0, 1, 2, 3, 4, 6, 8)
    ]
    assert all(b2 >= b1 for b1, b2 in zip(bounds, bounds[1:]))
    assert bounds[0] < 0.2
    assert bounds[2] > bounds[1] > 0
    assert bounds[-1] > 3.0


# --- Bad input. -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((100, 10, 11, 1e-5), "correct <= guesses"),
        ((100, 101, 50, 1e-5), "guesses <= canaries"),
        ((100, 10, -1, 1e-5), "0 <= correct"),
        ((100, 10, 5, -1e-5), "delta must be in"),
        ((100, 10, 5, 1.5), "delta must be in"),
        ((100, 10, 5, math.nan), "delta must be in"),
    ],
)
def test_epsilon_lower_bound_bad_counts_and_delta(args, match):
    """Bad counts (v > r, r > m, v < 0) or delta outside [0, 1] raise InvalidParameter."""
    with pytest.raises(InvalidParameter, match=match):
        epsilon_lower_bound(*args)
    with pytest.raises(InvalidParameter, match=match):
        p_value(*args[:3], 1.0, args[3])


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.1, 1.5, math.nan])
def test_epsilon_lower_bound_bad_confidence(confidence):
    """Confidence outside (0, 1) raises InvalidParameter naming it."""
    with pytest.raises(InvalidParameter, match=r"confidence must be in \(0, 1\)"):
        epsilon_lower_bound(100, 10, 10, 1e-5, confidence)


def test_p_values_negative_epsilon():
    """A negative epsilon raises InvalidParameter."""
    with pytest.raises(InvalidParameter, match="epsilon must be >= 0"):
        p_values(100, 10, 5, np.array([0.0, -1.0]), 1e-5)


def test_audit_bad_inputs():
    """audit_scores rejects mismatched lengths, 2-D input, < 2 canaries, non-finite scores, bad counts."""
    scores, included = _separated(20)
    with pytest.raises(InvalidParameter, match="same length"):
        audit_scores(scores[:-1], included, delta=1e-5)
    with pytest.raises(InvalidParameter, match="same length"):
        audit_scores(scores.reshape(4, 5), included.reshape(4, 5), delta=1e-5)
    with pytest.raises(InvalidParameter, match="at least 2 canaries"):
        audit_scores(np.array([1.0]), np.array([True]), delta=1e-5)
    with pytest.raises(InvalidParameter, match="at least 2 canaries"):
        audit_scores(np.array([]), np.array([], dtype=bool), delta=1e-5)
    for bad in (math.nan, math.inf, -math.inf):
        broken = scores.copy()
        broken[3] = bad
        with pytest.raises(InvalidParameter, match="finite"):
            audit_scores(broken, included, delta=1e-5)
    for counts in ([], [0], [21], [4, 30]):
        with pytest.raises(InvalidParameter, match="guess counts"):
            audit_scores(scores, included, delta=1e-5, counts=counts)
    for delta in (-1e-5, 2.0):
        with pytest.raises(InvalidParameter, match="delta must be in"):
            audit_scores(scores, included, delta=delta)


@pytest.mark.parametrize("confidence", [1.0, 1.5, math.nan])
def test_audit_bad_confidence_raises(confidence):
    """audit_scores with confidence >= 1 or NaN raises InvalidParameter."""
    scores, included = _separated(20)
    with pytest.raises(InvalidParameter, match="confidence must be in"):
        audit_scores(scores, included, delta=1e-5, confidence=confidence)


@pytest.mark.parametrize("confidence", [0.0, -0.5])
def test_audit_non_positive_confidence_raises(confidence):
    """audit_scores with confidence <= 0 raises InvalidParameter (it is outside (0, 1))."""
    scores, included = _separated(20)
    with pytest.raises(InvalidParameter, match="confidence must be in"):
        audit_scores(scores, included, delta=1e-5, confidence=confidence)


def test_audit_bad_confidence_message_names_callers_value():
    """The error for confidence 1.5 quotes 1.5, the value the caller passed."""
    scores, included = _separated(20)
    with pytest.raises(InvalidParameter, match="got 1.5"):
        audit_scores(scores, included, delta=1e-5, confidence=1.5)
