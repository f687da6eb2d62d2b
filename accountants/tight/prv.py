"""Record-level (epsilon, delta) by privacy random variables (Gopi, Lee, Wutschitz 2021).

`prv_epsilon` returns the upper end of prv-accountant's error interval: the estimate of epsilon
at delta - delta_error, plus eps_error (Gopi et al., "Numerical Composition of Differential
Privacy", NeurIPS 2021, Thm. 5.5). Defaults: delta_error = delta / 1000, so the discretisation
moves delta by 0.1% at most; eps_error = 0.01, an additive 0.4% at the Fig. 2 setting (sigma 5,
q 0.01, 1e5 steps, delta 1e-5: 2.637 against the converged 2.627).

Both directions of add-or-remove adjacency. prv-accountant's PoissonSubsampledGaussianMechanism
is the remove direction only: the pair (1 - q) N(0, sigma^2) + q N(1, sigma^2) against
N(0, sigma^2), the privacy loss drawn under the distribution with the record. A neighbouring
pair is one direction for every step of the run, so the run's epsilon is the larger of the two
self-compositions, as dp-accounting's PLD accountant does; `_AddDirection` is the other one (the
loss drawn under N(0, sigma^2), the distribution without the record). Neither direction
dominates the other at every epsilon, so both are needed for an upper bound. With q = 1 the two coincide (a
Gaussian's loss is symmetric). A ParallelSilos run is its worst silo (parallel composition).

Grid. prv-accountant takes a mesh of eps_error / sqrt(steps / 2 log(12 / delta_error)) over
[-L, L], L from an RDP bound, so the number of points grows as sqrt(steps): 1.4e6 at Fig. 2 and
7e7 at 1e9 steps. Two adjustments keep it usable:
- we widen [-L, L] slightly so the grid has an FFT-friendly size (the composer's FFTs run in
  long double, and a size with a large prime factor took 2.3 s instead of 0.1 s at Fig. 2);
- beyond `MAX_GRID_POINTS` we coarsen the mesh and raise eps_error to match it, so a run of up
  to 1e9 steps still finishes in seconds, with a wider (still valid) upper bound.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import ndtr

from uldp.errors import InvalidParameter

from ..events import Mechanism, SubsampledGaussian, check_tight_sigma, silos_of

DEFAULT_EPS_ERROR = 1e-2
MAX_GRID_POINTS = 2**22


def prv_epsilon(
    mechanism: Mechanism,
    delta: float,
    *,
    eps_error: float = DEFAULT_EPS_ERROR,
    delta_error: float | None = None,
) -> float:
    """Upper estimate of the record-level epsilon at `delta` (worst silo for ParallelSilos)."""
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    if not eps_error > 0:
        raise InvalidParameter(f"eps_error must be > 0, got {eps_error}")
    check_tight_sigma(silos_of(mechanism), "prv")
    delta_error = delta / 1000 if delta_error is None else delta_error
    if not 0 < delta_error < delta:
        raise InvalidParameter(f"delta_error must be in (0, delta), got {delta_error}")
    return max(
        _silo_epsilon(silo, delta, eps_error, delta_error, add)
        for silo in silos_of(mechanism)
        for add in (False, True)
    )


def _add_direction(q: float, sigma: float):
    """The add direction of the Poisson-subsampled Gaussian as a prv-accountant PRV."""
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism
    from prv_accountant.privacy_random_variables.abstract_privacy_random_variable import PrivacyRandomVariable

    class _AddDirection(PrivacyRandomVariable):
        """Loss Y = log N(0,s^2)(x) / ((1-q) N(0,s^2)(x) + q N(1,s^2)(x)) for x ~ N(0, s^2).

        Y = -log(1 - q + q exp((2x - 1) / (2 s^2))) decreases in x and stays below -log(1 - q),
        so P(Y <= t) = P(x >= x_t) with x_t = s^2 log((e^{-t} - 1 + q) / q) + 1/2, and 1 for
        t >= -log(1 - q).
        """

        def __init__(self) -> None:
            self._remove = PoissonSubsampledGaussianMechanism(q, sigma)

        def cdf(self, t):
            t = np.asarray(t, dtype=float)
            ceiling = -math.log1p(-q)
            inside = t < ceiling
            gap = np.where(inside, np.expm1(-np.where(inside, t, 0.0)) + q, 1.0)
            x_t = sigma**2 * np.log(gap / q) + 0.5
            return np.where(inside, ndtr(-x_t / sigma), 1.0)

        def rdp(self, alpha: float) -> float:
            # Only sizes the domain: the remove direction's RDP is at least the add direction's
            # at every order >= 1 (Mironov, Talwar, Zhang 2019, Thm. 5), so the domain it gives is
            # wide enough.
            return self._remove.rdp(alpha)

    return _AddDirection()


def _silo_epsilon(
    mechanism: SubsampledGaussian, delta: float, eps_error: float, delta_error: float, add: bool
) -> float:
    try:
        built = silo_composition(mechanism, eps_error, delta_error, add)
        if built is None:
            return 0.0
        composed, eps_error = built
        # What PRVAccountant.compute_epsilon returns, from the composition built once.
        _, _, upper = composed.compute_epsilon(delta, delta_error, eps_error)
    except RuntimeError as error:
        raise _undiscretisable(mechanism, error) from None
    except ValueError:
        # prv-accountant's grid sums probabilities in long double: a delta within its rounding
        # error of the grid's size ("Floating point errors will dominate") cannot be resolved.
        raise _unresolvable(delta) from None
    # Below 0 at a large delta (-0.68 at delta 0.5, sigma 5, q 0.01, 100 steps): delta(epsilon)
    # decreases in epsilon, so (0, delta)-DP holds too, and no epsilon is negative.
    return max(float(upper), 0.0)


#: Below this delta_error, log(12 / delta_error) in the mesh (Gopi et al. Thm. 5.5) overflows.
_SMALLEST_DELTA_ERROR = 1e-300


def _unresolvable(delta: float) -> InvalidParameter:
    return InvalidParameter(
        f"the prv accountant cannot resolve delta = {delta:g} (its grid's rounding error is larger); "
        "use --accountant rdp or pld for so small a delta"
    )


#: The last few compositions: a report accounts epsilon and then the whole privacy curve of the
#: same run, and one composition at the Fig. 2 setting takes about a second. Four: both
#: directions of two silos; a composition can hold 4M long doubles (64 MB, MAX_GRID_POINTS).
_COMPOSITION_CACHE = 4


@lru_cache(maxsize=_COMPOSITION_CACHE)
def silo_composition(
    mechanism: SubsampledGaussian, eps_error: float, delta_error: float, add: bool
) -> tuple[Any, float] | None:
    """One direction of a run (`add`: the add direction) as prv-accountant's composed discrete
    PRV, and the eps_error that holds for it (raised above `eps_error` when the mesh had to be
    coarsened, see the module docstring); None when that direction releases nothing.

    Its delta at epsilon is within [delta(eps + eps_error) - delta_error, delta(eps - eps_error)
    + delta_error] of the estimate (Gopi et al. 2021, Thm. 5.5), which is what
    PRVAccountant.compute_delta returns as its lower and upper bounds.
    """
    from prv_accountant import PRVAccountant
    from prv_accountant.accountant import compute_safe_domain_size
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism
    from scipy.fft import next_fast_len

    steps = mechanism.steps
    if steps == 0:
        return None
    if not delta_error >= _SMALLEST_DELTA_ERROR:  # the mesh below would not be a number
        raise _unresolvable(delta_error)
    if add and mechanism.q >= 1.0:
        return None  # the Gaussian's loss is symmetric: the remove direction says it all
    if add:
        prv = _add_direction(mechanism.q, mechanism.sigma)
    else:
        prv = PoissonSubsampledGaussianMechanism(
            sampling_probability=mechanism.q, noise_multiplier=mechanism.sigma
        )
    half_width = compute_safe_domain_size([prv], [steps], eps_error, delta_error)
    # The mesh prv-accountant derives from eps_error (Gopi et al. Thm. 5.5).
    scale = math.sqrt(steps / 2 * math.log(12 / delta_error))
    mesh = eps_error / scale
    if 2 * half_width / mesh > MAX_GRID_POINTS:
        mesh = 2 * half_width / MAX_GRID_POINTS
        eps_error = mesh * scale
    # The domain [-(n - 1/2) mesh, (n - 1/2) mesh] gets 2n + 2 points (create_aligned rounds
    # outwards to multiples of the mesh, then pads to an even size); pick n for a fast size.
    size = 2 * math.ceil(half_width / mesh + 0.5) + 2
    while (size := next_fast_len(size, real=True)) % 2:
        size += 1
    eps_max = ((size - 2) // 2 - 0.5) * mesh
    try:
        with warnings.catch_warnings():
            # eps_max is prv-accountant's own safe domain, widened; its "assuming epsilon < eps_max"
            # warning does not apply.
            warnings.simplefilter("ignore", UserWarning)
            accountant = PRVAccountant(
                prvs=[prv],
                eps_error=eps_error,
                delta_error=delta_error,
                max_self_compositions=[steps],
                eps_max=eps_max,
            )
        return accountant.compute_composition([steps]), eps_error
    except RuntimeError as error:
        raise _undiscretisable(mechanism, error) from None


def _undiscretisable(mechanism: SubsampledGaussian, error: RuntimeError) -> InvalidParameter:
    # prv-accountant's own checks that its grid resolves the loss ("Discrete mean differs
    # from continuous mean significantly", "Cannot compute epsilon"): with a small sigma and
    # a large q the loss is too concentrated for the mesh, and any number it would give is
    # not a bound. Refuse; RDP and PLD have no such grid limit.
    return InvalidParameter(
        f"the prv accountant cannot discretise the privacy loss of sigma = "
        f"{mechanism.sigma:g}, q = {mechanism.q:g} (prv-accountant: {str(error).rstrip('.')}); "
        "use --accountant rdp or pld for this mechanism"
    )
