"""An empirical lower bound on epsilon from one training run (Steinke, Nasr, Jagielski 2023).

"Privacy Auditing with One (1) Training Run" (NeurIPS 2023, arXiv 2305.08846): m canaries are
each included in the training data independently with probability 1/2; after one run an auditor
scores every canary, guesses "in" for the r+ highest scores and "out" for the r- lowest, and
abstains on the rest. If the run is (epsilon, delta)-DP, the number of correct guesses W among
the r = r+ + r- made is, up to delta, stochastically dominated by Binomial(r, e^eps / (1 + e^eps))
(their main result, for pure DP and, with a delta term, for (epsilon, delta)-DP; the test as
their Appendix D computes it).
Observing v correct guesses therefore rejects "the run is (epsilon, delta)-DP" at level p when

    P[W >= v] <= beta + 2 m delta alpha < p,   beta = P[Binomial(r, q) >= v], q = 1 / (1 + e^-eps),
    alpha = max_{1 <= i <= v} P[v - i <= Binomial(r, q) < v] / i                 (Appendix D)

and the largest epsilon so rejected is a lower bound on the run's epsilon at confidence 1 - p.
`p_values` is that tail, vectorised over i (the paper's loop, as one cumulative sum) and over
epsilon; `epsilon_lower_bound` searches it as the paper's `get_eps_audit` bisects it (lower bound 0 when even
epsilon = 0 is not rejected: the audit then says nothing).

Guess counts (`audit_scores`). The bound holds for guesses fixed in advance or any function of
the run's output. Trying several r and keeping the best is a multiple test: each of the J counts
is tested at level (1 - confidence) / J (Bonferroni), so the best of them still holds at the
stated confidence. Guesses are symmetric (r+ = r- = r / 2): canary scores are a shifted copy of
the same noise whether a canary is in or out, so neither tail is more informative.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from uldp.errors import InvalidParameter

#: The confidence `uldp audit` states its lower bound at (Steinke et al. report 95%).
CONFIDENCE = 0.95
#: The least confidence `uldp audit` takes: a bound at confidence c is wrong with probability up to
#: 1 - c, so below 1/2 it is wrong more often than right, and a correct mechanism would be reported
#: as violated (exit 3) by chance alone.
MIN_CONFIDENCE = 0.5

#: Fractions of the canaries guessed on (r / m) that `audit_scores` tries by default, each then
#: tested at level (1 - confidence) / 6: a strong audit is best on a small r (only the extreme
#: scores are sure), a weak one on a large r.
GUESS_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)

# The search for the largest rejected epsilon: passes over a grid of points each (see
# `epsilon_lower_bound`); no lower bound is claimed beyond MAX_EPSILON (q = 1 - 4e-44 there).
SEARCH_PASSES = 4
SEARCH_POINTS = 65
MAX_EPSILON = 100.0


def _check_counts(m: int, r: int, v: int) -> None:
    if not 0 <= v <= r <= m:
        raise InvalidParameter(f"need 0 <= correct <= guesses <= canaries, got {v}, {r}, {m}")


def p_values(m: int, r: int, v: int, epsilons: np.ndarray, delta: float) -> np.ndarray:
    """P[>= v correct guesses out of r] under (epsilon, delta)-DP with m canaries, for each of
    `epsilons` (Steinke et al. 2023, Appendix D `p_value_DP_audit`: the binomial tail
    plus the delta term; its loop over i as one cumulative sum, all epsilons at once)."""
    from scipy.stats import binom

    _check_counts(m, r, v)
    eps = np.atleast_1d(np.asarray(epsilons, dtype=float))
    if not (eps >= 0).all():
        raise InvalidParameter(f"epsilon must be >= 0, got {eps.min()}")
    if not 0 <= delta <= 1:
        raise InvalidParameter(f"delta must be in [0, 1], got {delta}")
    q = 1.0 / (1.0 + np.exp(-eps))  # the accuracy of epsilon-DP randomized response
    beta = binom.sf(v - 1, r, q)  # P[Binomial(r, q) >= v]
    alpha = np.zeros_like(eps)
    if v > 0 and delta > 0:
        # sums[:, i - 1] = P[v - i <= Binomial(r, q) < v] for i = 1..v
        sums = np.cumsum(binom.pmf(np.arange(v - 1, -1, -1)[None, :], r, q[:, None]), axis=1)
        alpha = np.max(sums / np.arange(1, v + 1)[None, :], axis=1)
    return np.minimum(beta + alpha * delta * 2 * m, 1.0)


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """`p_values` at one epsilon."""
    return float(p_values(m, r, v, np.array([epsilon]), delta)[0])


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, confidence: float = CONFIDENCE) -> float:
    """The largest epsilon that v correct guesses out of r (m canaries) reject at `confidence`:
    a lower bound on the run's epsilon at that delta (Steinke et al. 2023, Appendix D
    `get_eps_audit`); 0 when not even epsilon = 0 is rejected.

    The p-value grows with epsilon, so the rejected epsilons are an interval [0, eps*). Instead
    of the paper's 30 scalar bisection steps, SEARCH_PASSES passes each evaluate SEARCH_POINTS
    epsilons at once and narrow the bracket to one grid step; the lower end of the last bracket
    (rejected, so below eps*) is returned, within MAX_EPSILON / (SEARCH_POINTS - 1)^SEARCH_PASSES
    (6e-6) of eps*."""
    if not 0 < confidence < 1:
        raise InvalidParameter(f"confidence must be in (0, 1), got {confidence}")
    level = 1.0 - confidence
    if p_value(m, r, v, 0.0, delta) >= level:
        return 0.0
    low, high = 0.0, MAX_EPSILON  # p(low) < level; eps* <= high (or eps* beyond MAX_EPSILON)
    for _ in range(SEARCH_PASSES):
        grid = np.linspace(low, high, SEARCH_POINTS)
        rejected = p_values(m, r, v, grid, delta) < level
        last = int(np.flatnonzero(rejected).max())  # grid[0] = low is rejected
        if last == SEARCH_POINTS - 1:
            return float(grid[last])  # rejected up to the search's end
        low, high = float(grid[last]), float(grid[last + 1])
    return low


@dataclass(frozen=True)
class AuditBound:
    """One audit's result: the lower bound and the guesses it rests on."""

    epsilon: float  # the lower bound (0: the audit says nothing)
    canaries: int  # m
    guesses: int  # r, at the best guess count
    correct: int  # v
    confidence: float
    delta: float
    guess_counts: tuple[int, ...]  # every r tried (each at level (1 - confidence) / J)

    @property
    def accuracy(self) -> float:
        return self.correct / self.guesses if self.guesses else math.nan


def guess_counts(m: int, fractions: Sequence[float] = GUESS_FRACTIONS) -> tuple[int, ...]:
    """The even guess counts r tried on m canaries: round(f m) for each fraction, at least 2."""
    counts = {min(m - m % 2, max(2, 2 * round(f * m / 2))) for f in fractions}
    return tuple(sorted(c for c in counts if c >= 2))


def correct_guesses(scores: np.ndarray, included: np.ndarray, r: int) -> int:
    """Correct guesses when the r / 2 highest scores are guessed in and the r / 2 lowest out.

    Ties are broken by canary index (a rule fixed before the run, so still a valid guesser)."""
    included = np.asarray(included, dtype=bool)
    order = np.argsort(scores, kind="stable")
    half = r // 2
    low, high = order[:half], order[len(order) - half :]
    return int(included[high].sum() + (~included[low]).sum())


def audit_scores(
    scores: np.ndarray,
    included: np.ndarray,
    *,
    delta: float,
    confidence: float = CONFIDENCE,
    counts: Sequence[int] | None = None,
) -> AuditBound:
    """The best lower bound over the guess counts `counts` (default `guess_counts(m)`), each
    tested at level (1 - confidence) / len(counts), so the best holds at `confidence`."""
    if not 0 < confidence < 1:
        raise InvalidParameter(f"confidence must be in (0, 1), got {confidence}")
    scores = np.asarray(scores, dtype=float)
    included = np.asarray(included, dtype=bool)
    if scores.shape != included.shape or scores.ndim != 1:
        raise InvalidParameter("scores and inclusion flags must be two vectors of the same length")
    m = len(scores)
    if m < 2:
        raise InvalidParameter(f"an audit needs at least 2 canaries, got {m}")
    if not np.isfinite(scores).all():
        raise InvalidParameter("canary scores must be finite")
    tried = tuple(counts) if counts is not None else guess_counts(m)
    if not tried or any(r < 1 or r > m for r in tried):
        raise InvalidParameter(f"guess counts must be in [1, {m}], got {tried}")
    per_test = 1.0 - (1.0 - confidence) / len(tried)
    best = None
    for r in tried:
        v = correct_guesses(scores, included, r)
        bound = epsilon_lower_bound(m, 2 * (r // 2), v, delta, per_test)
        if best is None or bound > best[0]:
            best = (bound, 2 * (r // 2), v)
    assert best is not None
    return AuditBound(best[0], m, best[1], best[2], confidence, delta, tried)
