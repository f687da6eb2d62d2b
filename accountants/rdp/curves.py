"""Rényi DP of the Gaussian and of the Poisson-subsampled Gaussian mechanism.

Formulas (ULDP-FL §2.2):
- Lemma 3: the Gaussian mechanism with noise multiplier sigma is (alpha, alpha / (2 sigma^2))-RDP.
- Lemma 4 / [39]: the Poisson-subsampled Gaussian is (alpha, log(A_alpha) / (alpha - 1))-RDP with
  A_alpha = E_{z ~ N(0, sigma^2)} [((1 - q) + q e^{(2z - 1) / (2 sigma^2)})^alpha]
  (Mironov, Talwar, Zhang 2019, "Rényi DP of the Sampled Gaussian Mechanism", §3.2 for integer
  alpha: a binomial expansion; §3.3 for fractional alpha: two series split at
  z0 = sigma^2 log(1/q - 1) + 1/2).
- Lemma 1: RDP composes additively, so `steps` compositions multiply the RDP by `steps`.

Everything is computed in log space so that sigma in [0.3, 100], any q in (0, 1] and orders up
to 1e8 stay finite. We write this instead of calling dp-accounting because its RDP code evaluates
one order at a time in pure Python and importing dp_accounting alone takes about a second. At
integer orders the results agree with `dp_accounting.rdp.RdpAccountant` to 1e-6 relative; at
fractional orders ours keep the alternating signs of the series and are lower (tighter), and are
checked against 30-digit quadrature of the definition instead (tests/accountants/test_rdp.py).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import gammaln, gammasgn, log_ndtr

from uldp.errors import InvalidParameter

from ..events import (
    Composed,
    Event,
    KnownParticipation,
    Mechanism,
    ParallelSilos,
    SubsampledGaussian,
    describe,
    silos_of,
)
from .participation import known_participation_rdp

# Orders above this use the Gaussian bound alpha / (2 sigma^2) (sub-sampling can only lower the
# RDP, so this is a valid upper bound); the binomial sum would need alpha terms per order.
MAX_EXACT_ORDER = 2**17
# A fractional-order series is cut once both of its terms fall e^-30 below the running total
# of magnitudes (dp-accounting's criterion).
_LOG_TAIL = 30.0
_FRAC_MAX_TERMS = 1_000_000


def gaussian_rdp(orders: np.ndarray, sigma: float) -> np.ndarray:
    """RDP of one Gaussian mechanism at each order (ULDP-FL Lemma 3)."""
    return np.asarray(orders, dtype=float) / (2.0 * sigma**2)


def _logsumexp_rows(x: np.ndarray) -> np.ndarray:
    """Row-wise log(sum(exp(x))) with -inf entries allowed (scipy's has a large per-call cost)."""
    m = np.max(x, axis=1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return (m + np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)))[:, 0]


def _log_expm1(x: np.ndarray) -> np.ndarray:
    """log(e^x - 1) for x > 0 without overflow or cancellation."""
    return x + np.log(-np.expm1(-x))


def _log_a_int(alphas: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """log A_alpha for integer orders (Mironov et al. 2019 §3.2).

    A_alpha = sum_i C(alpha,i) q^i (1-q)^(alpha-i) e^{(i^2-i)/(2 sigma^2)}. Because the binomial
    weights sum to one, A_alpha = 1 + sum_{i>=2} C(alpha,i) q^i (1-q)^(alpha-i) (e^{(i^2-i)/(2 sigma^2)} - 1);
    summing the excess over 1 keeps full relative precision when the RDP is tiny (large sigma,
    small q), where the direct sum loses it to rounding near 1.
    Orders are evaluated together in batches whose largest order is at most about twice the
    smallest, so that padding the ragged sums to a rectangle wastes little work.
    """
    out = np.empty(alphas.size)
    order = np.argsort(alphas)
    start = 0
    while start < order.size:
        lo = alphas[order[start]]
        stop = start
        while stop < order.size and alphas[order[stop]] <= 2 * lo + 64:
            stop += 1
        batch = alphas[order[start:stop]][:, None]
        i = np.arange(2, int(batch.max()) + 1, dtype=float)[None, :]
        with np.errstate(invalid="ignore"):
            log_excess = (
                gammaln(batch + 1.0)
                - gammaln(i + 1.0)
                - gammaln(np.maximum(batch - i, 0.0) + 1.0)
                + i * np.log(q)
                + (batch - i) * np.log1p(-q)
                + _log_expm1((i * i - i) / (2.0 * sigma**2))
            )
        log_excess = np.where(i <= batch, log_excess, -np.inf)
        out[order[start:stop]] = np.logaddexp(0.0, _logsumexp_rows(log_excess))
        start = stop
    return out


def _log_a_frac(alpha: float, q: float, sigma: float) -> float:
    """log A_alpha for fractional alpha (Mironov et al. 2019 §3.3), with the series' true signs.

    The generalised binomial coefficients C(alpha, i) alternate in sign once i > alpha + 1.
    dp-accounting adds their magnitudes, a valid but loose bound (several times the true RDP
    for q around 0.4 near alpha = 1); we add positive and negative terms separately and
    subtract, then add back a margin for the float rounding of both sums and for the series
    tail, so the result stays an upper bound (checked against 30-digit quadrature in tests).
    """
    z0 = sigma**2 * np.log(1.0 / q - 1.0) + 0.5
    log_q, log_1mq = np.log(q), np.log1p(-q)
    n = int(max(64, 2 * np.ceil(alpha)))
    while True:
        i = np.arange(n, dtype=float)
        j = alpha - i
        log_coef = gammaln(alpha + 1.0) - gammaln(i + 1.0) - gammaln(j + 1.0)
        sign = gammasgn(j + 1.0)
        log_s0 = (
            log_coef + i * log_q + j * log_1mq + (i * i - i) / (2.0 * sigma**2) + log_ndtr((z0 - i) / sigma)
        )
        log_s1 = (
            log_coef + j * log_q + i * log_1mq + (j * j - j) / (2.0 * sigma**2) + log_ndtr((j - z0) / sigma)
        )
        log_mag = np.logaddexp(log_s0, log_s1)
        total = np.logaddexp.accumulate(log_mag)
        done = np.zeros(n, dtype=bool)
        done[1:] = (
            (log_s0[1:] < log_s0[:-1]) & (log_s1[1:] < log_s1[:-1]) & (log_mag[1:] < total[1:] - _LOG_TAIL)
        )
        hits = np.flatnonzero(done)
        if hits.size:
            last = hits[0]
            break
        if n >= _FRAC_MAX_TERMS:
            return float("inf")
        n *= 4
    mag, sgn = log_mag[: last + 1], sign[: last + 1]
    log_pos = _logsumexp(mag[sgn > 0])
    log_neg = _logsumexp(mag[sgn < 0])
    # Rounding of two sums of at most `last` terms each, plus the first omitted tail term
    # (the tail alternates with shrinking terms past the cut, so it is bounded by one term).
    log_margin = np.logaddexp(total[last] + np.log(1e-15 * (last + 1)), log_mag[last])
    if log_neg >= log_pos:
        return float(total[last])  # cancellation beyond float precision: fall back to magnitudes
    log_diff = log_pos + np.log1p(-np.exp(log_neg - log_pos))
    return float(min(np.logaddexp(log_diff, log_margin), total[last]))


def _logsumexp(x: np.ndarray) -> float:
    if x.size == 0:
        return float("-inf")
    m = float(np.max(x))
    return m + float(np.log(np.sum(np.exp(x - m))))


def subsampled_gaussian_rdp(orders: np.ndarray, sigma: float, q: float) -> np.ndarray:
    """RDP of one step of the Poisson-subsampled Gaussian at each order (ULDP-FL Lemma 4, [39]).

    Valid for integer and fractional orders > 1; q = 1 is the plain Gaussian (Lemma 3).
    """
    orders = np.asarray(orders, dtype=float)
    plain = gaussian_rdp(orders, sigma)
    if q >= 1.0:
        return plain
    out = plain.copy()
    exact = orders <= MAX_EXACT_ORDER
    integer = exact & (orders == np.round(orders))
    if integer.any():
        out[integer] = _log_a_int(orders[integer], q, sigma) / (orders[integer] - 1.0)
    for idx in np.flatnonzero(exact & ~integer):
        out[idx] = _log_a_frac(float(orders[idx]), q, sigma) / (orders[idx] - 1.0)
    # Sub-sampling never hurts: clip tiny rounding excess, and keep RDP non-negative.
    return np.clip(out, 0.0, plain)


def mechanism_rdp(mechanism: Mechanism, orders: np.ndarray) -> np.ndarray:
    """RDP curve of a whole run: composition over steps (Lemma 1), maximum over silos (§D.2)."""
    curves = [step_rdp(silo, orders) * silo.steps for silo in silos_of(mechanism)]
    return np.max(np.vstack(curves), axis=0)


def event_rdp(event: Event, orders: np.ndarray) -> np.ndarray:
    """RDP curve of any event that has one: a run (`mechanism_rdp`), a sequential composition
    (the curves add, Lemma 1) or a known-participation mixture (`accountants.rdp.participation`).

    A `Group` has none at these orders (Lemma 6 moves the orders, Lemma 5 leaves RDP); the RDP
    accountant handles it.
    """
    if isinstance(event, Composed):
        grid = np.asarray(orders, dtype=float)
        return sum((event_rdp(part, grid) for part in event.events), np.zeros(grid.size))
    if isinstance(event, KnownParticipation):
        return known_participation_rdp(orders, event.sigma, event.q, event.rounds)
    if isinstance(event, SubsampledGaussian):
        return event.steps * step_rdp(event, orders)
    if isinstance(event, ParallelSilos):
        return mechanism_rdp(event, orders)
    raise InvalidParameter(f"{describe(event)} has no RDP curve at fixed orders")


def step_rdp(mechanism: SubsampledGaussian, orders: np.ndarray) -> np.ndarray:
    """RDP of a single step of `mechanism` at each order (read-only; cached).

    Remembered per (sigma, q, orders): a training run accounts T, then T + 1 steps of the same
    step, and the max-rounds searches many step counts, so the curve is computed once.
    """
    key = tuple(np.asarray(orders, dtype=float).tolist())
    return _step_curve(float(mechanism.sigma), float(mechanism.q), key)


@lru_cache(maxsize=1024)
def _step_curve(sigma: float, q: float, orders: tuple[float, ...]) -> np.ndarray:
    curve = subsampled_gaussian_rdp(np.asarray(orders), sigma, q)
    curve.flags.writeable = False  # shared by every caller through the cache
    return curve


# Elements (sampling rates x binomial terms) per block of `subsampled_gaussian_rdp_grid`: big
# enough to amortise numpy's per-call cost, small enough to stay in cache.
_GRID_BLOCK_ELEMENTS = 1 << 18


@lru_cache(maxsize=16)
def _binomial_terms(orders: tuple[float, ...], sigma: float):
    """The q-independent part of every excess term of Mironov et al. 2019 §3.2, flattened.

    For each order alpha and i = 2..alpha: log C(alpha, i) + log(e^{(i^2-i)/(2 sigma^2)} - 1),
    with i and alpha - i, and where each order's run of terms starts. Cached: a personalised
    run evaluates the same (orders, sigma) at thousands of sampling rates.
    """
    alphas = np.asarray(orders)
    counts = (alphas - 1).astype(int)
    alpha = np.repeat(alphas, counts)
    i = np.concatenate([np.arange(2.0, a + 1.0) for a in alphas])
    x = (i * i - i) / (2.0 * sigma**2)
    log_coef = gammaln(alpha + 1.0) - gammaln(i + 1.0) - gammaln(alpha - i + 1.0) + _log_expm1(x)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    table = (log_coef, i, alpha - i, starts, counts)
    for array in table:
        array.flags.writeable = False  # shared by every caller through the cache
    return table


def subsampled_gaussian_rdp_grid(orders: np.ndarray, sigma: float, qs: np.ndarray) -> np.ndarray:
    """RDP of one Poisson-subsampled Gaussian step for many sampling rates at once.

    Returns an array of shape (len(qs), len(orders)). The same binomial sum as
    `subsampled_gaussian_rdp` at integer orders (Mironov et al. 2019 §3.2, excess over 1), laid
    out as one matrix per block of rates so that a whole epsilon(q) curve (rPDP-FL
    Simulation-CurveFitting, slides ch. 3 III) costs a few numpy passes instead of a Python
    loop per rate. Integer orders in [2, MAX_EXACT_ORDER] only; q = 1 rows are Lemma 3.
    """
    orders = np.asarray(orders, dtype=float)
    qs = np.atleast_1d(np.asarray(qs, dtype=float))
    if (
        orders.size == 0
        or np.any(orders != np.round(orders))
        or np.any(orders < 2)
        or np.any(orders > MAX_EXACT_ORDER)
    ):
        raise InvalidParameter(f"orders must be integers in [2, {MAX_EXACT_ORDER}], got {orders}")
    if not np.all((qs > 0) & (qs <= 1)):
        raise InvalidParameter("sampling rates must be in (0, 1]")
    if not sigma > 0:
        raise InvalidParameter(f"sigma must be > 0, got {sigma}")
    log_coef, i, j, starts, counts = _binomial_terms(tuple(orders.tolist()), float(sigma))
    plain = gaussian_rdp(orders, sigma)
    out = np.broadcast_to(plain, (qs.size, orders.size)).copy()
    sampled = np.flatnonzero(qs < 1.0)
    block = max(1, _GRID_BLOCK_ELEMENTS // log_coef.size)
    for start in range(0, sampled.size, block):
        rows = sampled[start : start + block]
        q = qs[rows, None]
        terms = log_coef + i * np.log(q) + j * np.log1p(-q)
        peak = np.maximum.reduceat(terms, starts, axis=1)
        terms -= np.repeat(peak, counts, axis=1)
        np.exp(terms, out=terms)
        log_excess = peak + np.log(np.add.reduceat(terms, starts, axis=1))
        out[rows] = np.logaddexp(0.0, log_excess) / (orders - 1.0)
    # As in `subsampled_gaussian_rdp`: sub-sampling never hurts, and RDP is non-negative.
    return np.clip(out, 0.0, plain)


def subsampled_gaussian_rdp_real(
    alphas: np.ndarray | float, sigma: float, qs: np.ndarray, max_terms: int = _FRAC_MAX_TERMS
) -> np.ndarray:
    """RDP of one Poisson-subsampled Gaussian step at real orders > 1, one (order, rate) pair per
    entry (`alphas` and `qs` broadcast together), for many pairs at once.

    The same series as `_log_a_frac` (Mironov et al. 2019 §3.3, with the true signs, the cut at
    the first term e^-30 below the running total, and the rounding and tail margin that keep it an
    upper bound), laid out as one matrix (pairs x terms) so that a personalised run's epsilon(q)
    curve can use real orders (`accountants.personalized.record_spend`). q = 1 entries are Lemma 3, orders
    above MAX_EXACT_ORDER the plain Gaussian bound, as in `subsampled_gaussian_rdp`. A series
    that has not settled after `max_terms` terms keeps the plain Gaussian bound too (valid, and
    no better than an integer order: a caller minimising over orders loses nothing).
    """
    alphas, qs = np.broadcast_arrays(np.asarray(alphas, dtype=float), np.asarray(qs, dtype=float))
    alphas, qs = alphas.ravel(), qs.ravel()
    plain = alphas / (2.0 * sigma**2)
    out = plain.copy()
    rows = np.flatnonzero((qs < 1.0) & (alphas <= MAX_EXACT_ORDER))
    # Batched by the number of terms each order starts with (a power of two >= 2 alpha), which
    # depends on the order alone: a pair's value does not depend on what it is computed with.
    first = 2 ** np.ceil(np.log2(np.maximum(64.0, 2.0 * np.ceil(alphas[rows])))).astype(np.int64)
    for n in np.unique(first):
        _real_batch(alphas, qs, sigma, rows[first == n], out, max_terms, int(n))
    return np.clip(out, 0.0, plain)


def _real_batch(
    alphas: np.ndarray,
    qs: np.ndarray,
    sigma: float,
    rows: np.ndarray,
    out: np.ndarray,
    max_terms: int,
    n: int,
) -> None:
    """`subsampled_gaussian_rdp_real` for the pairs `rows`, starting with `n` terms, into `out`."""
    while rows.size:
        q, alpha = qs[rows, None], alphas[rows, None]
        i = np.arange(n, dtype=float)[None, :]
        j = alpha - i
        log_coef = gammaln(alpha + 1.0) - gammaln(i + 1.0) - gammaln(j + 1.0)
        sign = gammasgn(j + 1.0)
        z0 = sigma**2 * np.log(1.0 / q - 1.0) + 0.5
        log_q, log_1mq = np.log(q), np.log1p(-q)
        two_var = 2.0 * sigma**2
        log_s0 = log_coef + i * log_q + j * log_1mq + (i * i - i) / two_var + log_ndtr((z0 - i) / sigma)
        log_s1 = log_coef + j * log_q + i * log_1mq + (j * j - j) / two_var + log_ndtr((j - z0) / sigma)
        log_mag = np.logaddexp(log_s0, log_s1)
        total = np.logaddexp.accumulate(log_mag, axis=1)
        done = np.zeros(log_mag.shape, dtype=bool)
        done[:, 1:] = (
            (log_s0[:, 1:] < log_s0[:, :-1])
            & (log_s1[:, 1:] < log_s1[:, :-1])
            & (log_mag[:, 1:] < total[:, 1:] - _LOG_TAIL)
        )
        settled = done.any(axis=1)
        if settled.any():
            last = np.argmax(done[settled], axis=1)
            mag, sgn = log_mag[settled], sign[settled]
            keep = np.arange(n)[None, :] <= last[:, None]
            with np.errstate(invalid="ignore", divide="ignore"):
                log_pos = _logsumexp_rows(np.where(keep & (sgn > 0), mag, -np.inf))
                log_neg = _logsumexp_rows(np.where(keep & (sgn < 0), mag, -np.inf))
                at_last = np.take_along_axis(total[settled], last[:, None], axis=1)[:, 0]
                mag_last = np.take_along_axis(mag, last[:, None], axis=1)[:, 0]
                log_margin = np.logaddexp(at_last + np.log(1e-15 * (last + 1)), mag_last)
                log_diff = log_pos + np.log1p(-np.exp(log_neg - log_pos))
            value = np.where(
                log_neg >= log_pos, at_last, np.minimum(np.logaddexp(log_diff, log_margin), at_last)
            )
            out[rows[settled]] = value / (alphas[rows[settled]] - 1.0)
        rows = rows[~settled]
        if n >= max_terms:
            break  # the series did not settle: those keep the plain Gaussian's RDP, still a bound
        n *= 4
