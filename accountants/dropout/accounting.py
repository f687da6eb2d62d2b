"""Epsilon of dropout rounds, released and as the server sees them (Baek et al. 2021, §IV-V).

Each round is one Poisson-subsampled Gaussian step with the multiplier `accountants.dropout.rounds`
derives, against observers who do not know the sample; against the server, which draws it, a
run is a `KnownParticipation` event (its RDP curve, or its exact profile for pld / prv). Both go
through the accountant registry, the round limits through the one generic calibrator. The
accounting options are the registry's: accountant (default rdp), conversion, orders.

At q = 1 (every participant in every round) both views are plain Gaussians, whose composition
has an exact closed form (`accountants.tight.gaussian`, Balle & Wang 2018 Thm. 8): the figures are
then that exact epsilon, below every accountant's (6 rounds at multiplier 2, delta 1e-5: 5.545
where RDP gives 5.979), and the accountant's figure is kept as the cross-check
(`accountant_epsilon`, `server_accountant_epsilon`).
"""

from __future__ import annotations

from typing import Any

from ..calibrate import MAX_STEPS, most_rounds
from ..events import KnownParticipation, SubsampledGaussian
from ..registry import account_event
from ..tight.gaussian import composed_mu, gaussian_epsilon, gaussian_max_count

#: How the paper accounted Table 2: TF-Privacy's RDP accountant (§VI), i.e. its legacy order
#: list and the classic RDP-to-DP conversion eps = rho + log(1/delta)/(alpha - 1).
PAPER_ACCOUNTING = {"accountant": "rdp", "conversion": "classic", "orders": "tf-privacy"}


def dropout_epsilon(
    multiplier: float, q: float, rounds: int, delta: float, *, exact: bool = True, **accounting: Any
) -> float:
    """Epsilon after `rounds` rounds, each a Poisson-subsampled Gaussian with this multiplier
    (by RDP from the cached one-round curve, `rdp.curves.step_rdp`: tables and searches reuse it).

    At q = 1 with `exact` (the default), the exact epsilon of `rounds` plain Gaussians
    (`gaussian.gaussian_epsilon` at mu = sqrt(rounds) / multiplier, computed as a training run's
    rounds are, `run_spend`, so the two agree to the last digit); `exact=False` gives the
    accountant's figure, the cross-check.
    """
    if exact and q >= 1.0:
        return gaussian_epsilon(composed_mu([(multiplier, rounds)]), delta)
    return account_event(SubsampledGaussian(multiplier, q, rounds), delta, **accounting).epsilon


def max_rounds(
    multiplier: float, q: float, budget: float, delta: float, *, exact: bool = True, **accounting: Any
) -> int:
    """The most rounds whose epsilon stays within `budget` (0 when even one round exceeds it);
    at q = 1 with `exact` by the exact closed form, like `dropout_epsilon`."""
    if exact and q >= 1.0:
        return gaussian_max_count(multiplier, budget, delta, MAX_STEPS)
    return most_rounds(lambda rounds: SubsampledGaussian(multiplier, q, rounds), budget, delta, **accounting)


def server_epsilon(
    multiplier: float, q: float, rounds: int, delta: float, *, exact: bool = True, **accounting: Any
) -> float:
    """Epsilon after `rounds` rounds against the server, which draws the sample U^t itself: by
    rdp `known_participation_rdp` converted (a bound); by pld / prv the exact
    `known_participation_delta` inverted (its upper end: never below the exact epsilon).

    At q = 1 with `exact` (the default), the server's view is `rounds` plain Gaussians: their
    exact epsilon, as `dropout_epsilon`.
    """
    if exact and q >= 1.0:
        return gaussian_epsilon(composed_mu([(multiplier, rounds)]), delta)
    return account_event(KnownParticipation(multiplier, q, rounds), delta, **accounting).epsilon


def server_max_rounds(multiplier: float, q: float, budget: float, delta: float, **accounting: Any) -> int:
    """The most rounds whose `server_epsilon` stays within `budget` (0 when one round exceeds it)."""
    if q >= 1.0:
        return gaussian_max_count(multiplier, budget, delta, MAX_STEPS)
    return most_rounds(lambda rounds: KnownParticipation(multiplier, q, rounds), budget, delta, **accounting)
