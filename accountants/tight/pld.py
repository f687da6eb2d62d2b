"""Tight (epsilon, delta) by privacy loss distributions (dp-accounting's PLD), record and group level.

Every epsilon here is an upper bound at delta under add-or-remove adjacency: the PLDs are built
with pessimistic (connect-the-dots) rounding and the larger of the add and remove directions is
taken, as `dp_accounting.pld.PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE)` does for the
same events (tests/accountants check that the two agree). We call the PLD factories directly
rather than the accountant because the group bound over silos composes cached PLDs.

Record level (k = 1): `steps` self-compositions of PoissonSampledDpEvent(q, GaussianDpEvent(sigma));
q = 1 is the plain Gaussian, accounted in one piece as GaussianDpEvent(sigma) composed `steps`
times (a Gaussian with noise sigma / sqrt(steps)), which has no composition error at all.

Group level (k > 1 records, all added or all removed together, which is how a user's records
come and go in ULDP-FL §2.2). In one step each of the k records is sampled independently with
probability q, so the released noisy sum moves by the sum of the B sampled clipped contributions,
B ~ Binomial(k, q), conditionally on everything else the step sampled. That shift has norm at most
B C, and a mixture of Gaussians with vector shifts is dominated by the scalar one whose shifts are
the norms (Choquette-Choo, Ganesh, Steinke, Thakurta 2024, "Privacy Amplification for Matrix
Mechanisms", arXiv 2310.15526, Cor. 4.7 — where dp-accounting's MixtureOfGaussiansDpEvent comes
from). The norm bound B C is attained when all k contributions are aligned at full norm, so the
worst case is MixtureOfGaussiansDpEvent(sigma, sensitivities [0, 1, ..., k], probabilities
Binomial(k, q).pmf), self-composed over the steps (adaptive composition of dominating pairs).
With q = 1 every record is always sampled: a Gaussian with sensitivity k. A group that mixes
added and removed records (a replacement) is not covered.

Compositions (Composed, e.g. an Opacus history of several phases): the k records are in every
phase, and the dominance above holds step by step whatever the earlier steps released, so a group
of k over phases (sigma_i, q_i, T_i) is bounded by the composition of each phase's mixture PLD
(`pld_distribution_composed` with k > 1), both directions composed separately. Lemma 5 on the
composed RDP curve is 3-4x looser (docs/group-privacy.md).

Over silos (ParallelSilos): at k = 1 a record lies in one silo, so the bound is the worst silo.
At k > 1 the user's records may be split over silos as (k_1, ..., k_m); each silo's part is a
group of k_i for that silo's own mechanism, and the silos' outputs compose. We take the worst
split (`_splits`): every way of giving the k records to the distinct silo mechanisms (records
given to silos that share a mechanism are no worse in one of them, see `_splits`).

Discretisation (`value_discretization_interval`). The error of the connect-the-dots PLD after
composition depends on how finely the grid resolves the privacy loss of the PLD that is
discretised, not on epsilon: a fixed interval that is accurate at the Fig. 2 setting is far too
coarse for a run with tiny per-step losses (sigma 50, q 1e-4: 1e-4 gives 7x the converged
epsilon). So the default is the standard deviation of that privacy loss divided by
`_GRID_PER_LOSS_STD` = 30, where the loss is that of one step (q < 1; of one round of all silos
for a split group) or of the whole run (q = 1, a single Gaussian). At the Fig. 2 setting (sigma 5,
q 0.01, 1e5 steps, delta 1e-5) this is 0.01-0.015% above the converged epsilon for every
k in 1, 2, 4, ..., 32, and the k = 32 group bound takes about 0.4 s (benchmarks/bench_pld_group.py);
the same rule stays within 0.1% at sigma 0.7-10, q 1e-3-0.1, up to 1e6 steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from itertools import islice
from typing import Any

import numpy as np
from scipy.special import logsumexp
from scipy.stats import binom

from uldp.errors import InvalidParameter

from ..events import MAX_PLD_GROUP_K, Mechanism, SubsampledGaussian, check_tight_sigma, silos_of

# Grid points per standard deviation of the discretised privacy loss; the relative error of
# epsilon falls roughly as the inverse square of this (10: ~1e-3, 30: ~1e-4 at Fig. 2).
_GRID_PER_LOSS_STD = 30.0
# A group split over silos with different mechanisms builds one mixture PLD per silo and part
# (dp-accounting inverts each mixture's loss point by point, ~0.15 ms a point): a grid 10 points
# per loss std keeps that to seconds, at about 1e-3 relative above the converged epsilon.
_GRID_PER_SPLIT_LOSS_STD = 10.0
# The group bound over silos accounts every split of k; beyond this many it is too slow.
MAX_PARTITIONS = 200
# A group over a composition builds one mixture PLD per distinct phase (about a second or more
# each); beyond this many phases the rdp and normal group methods answer instead.
MAX_GROUP_PHASES = 32
# dp-accounting's self-composition bounds its FFT by a tail estimate that widens with the steps:
# 1e7 steps take about 15 s here, 1e8 about 2 minutes, 1e9 run out of memory.
MAX_STEPS = 10**7
_HERMITE_NODES = 64
# Bounds on the grid of one step's PLD: its loss stays within +-(k * 12 sigma + k^2 / 2) / sigma^2
# except for mass far below dp-accounting's truncation.
_TAIL_SIGMAS = 12.0
_MAX_STEP_POINTS = 1_000_000
# ... and the composed PLD at most about this many (memory: a few dense FFTs of this length).
_MAX_COMPOSED_POINTS = 4_000_000


def pld_epsilon(
    mechanism: Mechanism, delta: float, *, k: int = 1, discretization: float | None = None
) -> float:
    """Upper bound on epsilon at `delta` for one record (k = 1) or a group of k records.

    `discretization` is dp-accounting's value_discretization_interval; by default it is chosen
    from the mechanism as the module docstring describes.
    """
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    silos = _checked_silos(mechanism, k, discretization)
    with _overflow_refused(silos, k):
        # The worst silo (k = 1: parallel composition, a record lies in exactly one silo) or the
        # worst split of the k records; a silo without steps releases nothing.
        return max(
            0.0 if pld is None else float(pld.get_epsilon_for_delta(delta))
            for pld in _silos_plds(silos, k, discretization)
        )


def pld_distributions(
    mechanism: Mechanism, *, k: int = 1, discretization: float | None = None
) -> Iterator[Any | None]:
    """The composed dp-accounting PrivacyLossDistributions whose worst case `pld_epsilon` takes:
    one per silo (k = 1) or per split of the k records over the silos (k > 1), None for one
    that releases nothing (no steps). Their privacy profiles (`get_delta_for_epsilon`, the
    larger of the two directions) bound the event's at every epsilon by their maximum.

    The checks run at the call; the PLDs are built lazily, one split's at a time, so only one
    composed PLD need be held at once.
    """
    silos = _checked_silos(mechanism, k, discretization)
    return _refusing_overflow(_silos_plds(silos, k, discretization), silos, k)


def _checked_silos(
    mechanism: Mechanism, k: int, discretization: float | None
) -> tuple[SubsampledGaussian, ...]:
    """The silos of `mechanism`, after the checks `pld_epsilon` makes (besides delta's)."""
    _check_group_k(k)
    if discretization is not None and not discretization > 0:
        raise InvalidParameter(f"discretization must be > 0, got {discretization}")
    silos = silos_of(mechanism)
    check_tight_sigma(silos, "pld")
    if max(silo.steps for silo in silos) > MAX_STEPS:
        raise InvalidParameter(
            f"the PLD accountant handles up to {MAX_STEPS:.0e} steps; use the 'prv' "
            "accountant (record level, up to 1e9 steps) or 'rdp'"
        )
    return silos


def _check_group_k(k: int) -> None:
    if k < 1:
        raise InvalidParameter(f"k must be >= 1, got {k}")
    if k > MAX_PLD_GROUP_K:
        raise InvalidParameter(
            f"the PLD group bound serves groups of up to {MAX_PLD_GROUP_K} records, got k = {k}; "
            "use the 'rdp' or 'normal' group method"
        )


@contextmanager
def _overflow_refused(silos: Sequence[SubsampledGaussian], k: int) -> Iterator[None]:
    try:
        yield
    except OverflowError:
        # dp-accounting's mixture PLD exponentiates the loss, about k^2 / (2 sigma^2) at the
        # largest shift: large groups at small sigma leave the double range (k = 65536 at sigma 1).
        raise InvalidParameter(
            f"the PLD group bound overflows for k = {k} at sigma = {min(m.sigma for m in silos):g}; "
            "use the 'rdp' or 'normal' group method"
        ) from None


def _refusing_overflow(plds: Iterator, silos: Sequence[SubsampledGaussian], k: int) -> Iterator:
    with _overflow_refused(silos, k):
        yield from plds


def _silos_plds(
    silos: tuple[SubsampledGaussian, ...], k: int, discretization: float | None
) -> Iterator[Any | None]:
    """The composed PLD of each silo (k = 1) or each split of k records (lazily), None where
    nothing is released; the splits and their grids are settled (and refused) at the call."""
    if k == 1:
        # Parallel composition: a record lies in exactly one silo.
        return (_group_pld(silo, (1,), discretization) for silo in silos)
    splits = list(islice(_splits(k, len(silos)), MAX_PARTITIONS + 1))
    if len(splits) > MAX_PARTITIONS:
        raise InvalidParameter(
            f"a group of {k} records can be split over {len(silos)} silos in more than "
            f"{MAX_PARTITIONS} ways, too many for the PLD group bound; use the 'rdp' or "
            "'normal' group method instead"
        )
    if discretization is None and len(silos) == 1:
        grids = {splits[0]: _default_discretization(silos[0], (k,))}
    elif discretization is None:
        # Each split's own grid, rounded down to a power of 2 (finer is only more accurate) so
        # that splits share their silos' PLDs.
        grids = {split: 2.0 ** math.floor(math.log2(_split_discretization(silos, split))) for split in splits}
    else:
        grids = dict.fromkeys(splits, discretization)
    cache: dict[tuple[int, int, float], object] = {}
    return (_split_pld(silos, split, grids[split], cache) for split in splits)


def pld_epsilon_composed(mechanisms: Sequence[SubsampledGaussian], delta: float, *, k: int = 1) -> float:
    """Epsilon at `delta` of the sequential composition of `mechanisms`, for one record (k = 1)
    or a group of k records present in every part.

    The same PLDs as `pld_epsilon` (pessimistic, both directions), on one grid: the finest of the
    parts' default intervals, so each part is resolved at least as well as on its own. One part
    gives exactly `pld_epsilon` of it.
    """
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    composed = pld_distribution_composed(mechanisms, k=k)
    return 0.0 if composed is None else float(composed.get_epsilon_for_delta(delta))


def pld_distribution_composed(mechanisms: Sequence[SubsampledGaussian], *, k: int = 1) -> Any | None:
    """The composed PLD that `pld_epsilon_composed` reads; None when no part has a step.

    A group of k > 1 records (an Opacus history of several phases, say) is in every part: each
    step of each part is dominated by that part's mixture of Gaussians with Binomial(k, q)
    shifts (module docstring), whatever the earlier steps released, so the run is dominated by
    the composition of the parts' group PLDs (adaptive composition of dominating pairs, Zhu,
    Dong, Wang 2022, Thm. 10), each direction of add-or-remove composed with itself.
    """
    parts = [m for m in mechanisms if m.steps > 0]
    if not parts:
        return None
    _check_group_k(k)
    if k > 1:
        # Composition commutes: phases of one (sigma, q) are one run of their steps, and each
        # distinct phase costs one mixture PLD (seconds), hence the ceiling.
        steps: dict[tuple[float, float], int] = {}
        for m in parts:
            steps[(m.sigma, m.q)] = steps.get((m.sigma, m.q), 0) + m.steps
        parts = [SubsampledGaussian(sigma, q, n) for (sigma, q), n in steps.items()]
        if len(parts) > MAX_GROUP_PHASES:
            raise InvalidParameter(
                f"the PLD group bound composes up to {MAX_GROUP_PHASES} distinct (sigma, q) phases, "
                f"got {len(parts)}; use the 'rdp' or 'normal' group method"
            )
    check_tight_sigma(parts, "pld")
    if sum(m.steps for m in parts) > MAX_STEPS:
        raise InvalidParameter(f"the PLD accountant handles up to {MAX_STEPS:.0e} steps; use 'rdp'")
    discretization = min(_default_discretization(m, (k,)) for m in parts)
    composed = None
    with _overflow_refused(parts, k):
        for m in parts:
            unit = _unit_pld(m, k, discretization)
            composed = unit if composed is None else composed.compose(unit)
    assert composed is not None  # `parts` is not empty
    return composed


def _splits(k: int, n_mechanisms: int) -> Iterator[tuple[tuple[int, int], ...]]:
    """Every split of a group of k records over silos with `n_mechanisms` distinct mechanisms, as
    (mechanism index, records) pairs: k = k_1 + ... + k_m, k_i records in silos of mechanism i.

    Records of one mechanism are counted in one silo: two silos with the same mechanism take
    their steps side by side, and a step of both, with B_1 and B_2 of the group's records
    sampled, is a Gaussian mixture with the vector shift (B_1, B_2), dominated by the scalar
    shift of its norm, at most B_1 + B_2 ~ Binomial(k_1 + k_2, q) (Choquette-Choo et al. 2024,
    Cor. 4.7): the step of one silo holding all k_1 + k_2 records.
    """
    for shares in _compositions(k, n_mechanisms):
        yield tuple((i, share) for i, share in enumerate(shares) if share)


def _compositions(k: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every (k_1, ..., k_parts) of non-negative integers summing to k."""
    if parts == 1:
        yield (k,)
        return
    for first in range(k, -1, -1):
        for rest in _compositions(k - first, parts - 1):
            yield (first, *rest)


def _split_pld(
    silos: Sequence[SubsampledGaussian],
    split: tuple[tuple[int, int], ...],
    discretization: float,
    cache: dict,
) -> Any | None:
    """The composition over silos of each silo's group PLD (its own mechanism); None: no steps."""
    composed = None
    for i, part in split:
        if silos[i].steps == 0:
            continue
        key = (i, part, discretization)
        if key not in cache:
            cache[key] = _unit_pld(silos[i], part, discretization)
        composed = cache[key] if composed is None else composed.compose(cache[key])
    return composed


def _split_discretization(silos: Sequence[SubsampledGaussian], split: tuple[tuple[int, int], ...]) -> float:
    """`_default_discretization` for a split over silos: the parts' losses add, so do their
    variances (each silo's run composes its own steps), and one grid resolves their sum."""
    parts = [(silos[i], part) for i, part in split]
    std = math.sqrt(sum(_loss_std(m, part) ** 2 for m, part in parts))
    reach = max((part * _TAIL_SIGMAS * m.sigma + part * part / 2) / m.sigma**2 for m, part in parts)
    composed_std = math.sqrt(
        sum(_loss_std(m, part) ** 2 * (m.steps if m.q < 1.0 else 1.0) for m, part in parts)
    )
    return max(
        std / _GRID_PER_SPLIT_LOSS_STD,
        2 * reach / _MAX_STEP_POINTS,
        2 * _TAIL_SIGMAS * composed_std / _MAX_COMPOSED_POINTS,
    )


def _mixture(k: int, q: float) -> tuple[np.ndarray, np.ndarray]:
    """Sensitivities 0..k and their probabilities Binomial(k, q) (the worst-case group step)."""
    sensitivities = np.arange(k + 1, dtype=float)
    return sensitivities, binom.pmf(sensitivities, k, q)


def _loss_std(mechanism: SubsampledGaussian, k: int) -> float:
    """Standard deviation of the privacy loss of the PLD that `_unit_pld` discretises.

    For q = 1 that PLD is the whole run, a Gaussian with mu = k sqrt(steps) / sigma whose loss is
    N(mu^2 / 2, mu^2). For q < 1 it is one step, whose loss (add direction: x ~ N(0, sigma^2),
    loss -log sum_j p_j exp((j x - j^2 / 2) / sigma^2)) we integrate by Gauss-Hermite; the add
    direction has the smaller spread of the two, which gives the finer grid.
    """
    sigma = mechanism.sigma
    if mechanism.q >= 1.0:
        return k * math.sqrt(mechanism.steps) / sigma
    sensitivities, probs = _mixture(k, mechanism.q)
    nodes, weights = np.polynomial.hermite_e.hermegauss(_HERMITE_NODES)
    x = sigma * nodes
    loss = -logsumexp((np.outer(x, sensitivities) - sensitivities**2 / 2) / sigma**2, b=probs, axis=1)
    weights = weights / weights.sum()
    mean = weights @ loss
    return math.sqrt(max(weights @ (loss - mean) ** 2, 0.0))


def _default_discretization(mechanism: SubsampledGaussian, parts: tuple[int, ...]) -> float:
    """Grid interval for a group split into `parts`: the parts' losses add, so their variances do.

    Floored so that one step's PLD has at most `_MAX_STEP_POINTS` points (when the loss is
    nearly constant except in a far tail, sigma 0.05, q 0.01, the spread measured at the
    Hermite nodes is almost zero and would ask for an impossibly fine grid) and the composed
    PLD about `_MAX_COMPOSED_POINTS` (1e9 steps). A coarser grid only loosens the (pessimistic)
    bound.
    """
    std = math.sqrt(sum(_loss_std(mechanism, part) ** 2 for part in parts))
    sigma = mechanism.sigma
    reach = sum((part * _TAIL_SIGMAS * sigma + part * part / 2) / sigma**2 for part in parts)
    # The composed loss spreads as sqrt(steps) times one step's (q = 1: `std` is the whole run).
    composed_std = std * (math.sqrt(mechanism.steps) if mechanism.q < 1.0 else 1.0)
    return max(
        std / _GRID_PER_LOSS_STD,
        2 * reach / _MAX_STEP_POINTS,
        2 * _TAIL_SIGMAS * composed_std / _MAX_COMPOSED_POINTS,
    )


#: The last few runs' PLDs: a report accounts epsilon and then the whole curve of the same
#: mechanism, and a group's mixture PLD can take seconds to build (dp-accounting's PLDs are
#: never modified in place: composing returns a new one). Few, because a composed PLD of many
#: steps holds millions of points and a calibration's bisection would keep every one it tried.
_UNIT_CACHE = 4


@lru_cache(maxsize=_UNIT_CACHE)
def _unit_pld(mechanism: SubsampledGaussian, k: int, discretization: float):
    """PLD of a whole run for a group of k records in one silo (k = 1: one record)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    if mechanism.q >= 1.0:
        # Composing Gaussians is exact: one Gaussian with noise sigma / sqrt(steps).
        return pld.from_gaussian_mechanism(
            standard_deviation=mechanism.sigma / math.sqrt(mechanism.steps),
            sensitivity=k,
            pessimistic_estimate=True,
            value_discretization_interval=discretization,
        )
    return _step_pld(mechanism.sigma, mechanism.q, k, discretization).self_compose(mechanism.steps)


#: One-step PLDs kept (per sigma, q, k, grid): building a mixture's step inverts its loss point by
#: point (seconds), composing it over the steps takes milliseconds, and a step-count search, or a
#: subject's per-round accounting (accountants/subject/horizontal.py), asks for one step at many counts.
_STEP_CACHE = 32


@lru_cache(maxsize=_STEP_CACHE)
def _step_pld(sigma: float, q: float, k: int, discretization: float):
    """Dense PLD of one step (q < 1) for a group of k records: the mixture with shifts 0..k and
    weights Binomial(k, q) (k = 1: the Poisson-subsampled Gaussian), pessimistic."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    if k == 1:
        step = pld.from_gaussian_mechanism(
            standard_deviation=sigma,
            sensitivity=1,
            sampling_prob=q,
            pessimistic_estimate=True,
            value_discretization_interval=discretization,
        )
    else:
        sensitivities, probs = _mixture(k, q)
        step = pld.from_mixture_gaussian_mechanism(
            standard_deviation=sigma,
            sensitivities=sensitivities.tolist(),
            sampling_probs=probs.tolist(),
            pessimistic_estimate=True,
            value_discretization_interval=discretization,
        )
    return _as_dense(step, discretization)


def _as_dense(pld_, discretization: float):
    """The same PLD with dense PMFs.

    dp-accounting keeps a PMF of at most 1000 points sparse, and its sparse `self_compose` first
    evaluates `size ** num_times` as an exact integer: 37 s for 1e7 steps, hours for 1e9. A
    one-step PLD resolved as finely as ours has a few hundred points for sigma around 5, so we
    compose it once with a dense identity (exactly, no tail truncation), which sends the
    self-composition down the FFT path.
    """
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as pld

    identity = pld_pmf.DensePLDPmf(discretization, 0, np.ones(1), 0.0, True)
    return pld_.compose(pld.PrivacyLossDistribution(identity), tail_mass_truncation=0.0)


def _group_pld(
    mechanism: SubsampledGaussian,
    parts: tuple[int, ...],
    discretization: float | None,
    cache: dict | None = None,
) -> Any | None:
    """The composition over silos of groups of `parts` records (one part: one silo); None: no steps."""
    if mechanism.steps == 0:
        return None
    if discretization is None:
        discretization = _default_discretization(mechanism, parts)
    cache = {} if cache is None else cache
    composed = None
    for part in parts:
        if part not in cache:
            cache[part] = _unit_pld(mechanism, part, discretization)
        composed = cache[part] if composed is None else composed.compose(cache[part])
    assert composed is not None  # a group has at least one part
    return composed
