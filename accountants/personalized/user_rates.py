"""Per-user budgets for ULDP: each user's own sampling probability q_u, and its epsilon.

ULDP-AVG, ULDP-AVG-w and ULDP-SGD with user sub-sampling (ULDP-FL Algorithm 4, Theorem 3 and
Lemma 4) release, in each of T rounds, a Gaussian of noise multiplier sigma for the user-level
sensitivity C: per-user clipping with weights summing to 1 over the silos bounds what all of a
user's records, in every silo, add to the round's sum by C. With a sampling probability q_u of
its own (the ULDP-FL authors' PULDP-AVG, `src/run_puldp.py` and `src/aggregator.py` of
github.com/FumiyukiKato/uldp-fl: the server Poisson-samples user u with its q_u every round),
user u sees T rounds of a Poisson-subsampled Gaussian at rate q_u, which is exactly one record
of an rPDP-FL run with tau = 1 local step and every client in every round
(`accountants.personalized.record_spend`, slides ch. 3 II: rho_FL = T rho(alpha, q_u)). So the curve, its
inverse and the calibration of sigma are those of the record level (`EpsilonCurve`,
`record_rates.personalize`, `record_spend.calibrate_sigma`): one code path, the same exact
inverse; only the run's description differs (`UserSampledULDP`), so the assumptions say user
level.

The amplification by sub-sampling holds against observers who do not learn the sample (whoever
sees the released models); the server draws the sample, so it knows the rounds each user took
part in (ULDP-FL Remark 1). `server_epsilon` counts its view for a user sampled at q_u as the RDP
of that known participation (`account.known_participation_epsilon`, the "server view"
`uldp account --user-q q_u` prints), and never more than T rounds of the plain Gaussian
(epsilon*(1), what a user sampled every round spends, a bound whatever q_u).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from uldp.errors import InvalidParameter

from ..assumptions import AssumptionLines
from ..calibrate import Calibration
from .record_rates import DEFAULT_Q_MIN, Personalization, personalization_assumptions, personalize
from .record_spend import EpsilonCurve, RecordSampledFL, calibrate_sigma

#: The server's view is listed rate by rate for at most this many distinct rates, else its range.
SERVER_RATES_LISTED = 6


@dataclass(frozen=True)
class UserSampledULDP(RecordSampledFL):
    """A ULDP-AVG / ULDP-SGD run with per-user sampling, as seen by one user (ULDP-FL Theorem 3,
    Algorithm 4): T rounds of a Gaussian of multiplier sigma, user u Poisson-sampled with q_u.

    The record-level run with local_steps = 1, client_rate = 1 and the untrusted threat model
    has exactly this RDP, so `EpsilonCurve` accounts it unchanged; build it with `user_run`.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.local_steps, self.client_rate, self.threat_model, self.fixed_schedule) != (
            1,
            1.0,
            "untrusted",
            False,
        ):
            # The user-level mechanism has one Gaussian per round and no silo sampling; any
            # other setting would account a different mechanism under the user-level words.
            raise InvalidParameter(
                "a user-level run has one Gaussian per round, every silo, the untrusted model"
            )

    def assumptions(self) -> dict[str, str]:
        """What every epsilon of this run assumes, in words."""
        return {
            "run": (
                f"ULDP-AVG / ULDP-AVG-w / ULDP-SGD (ULDP-FL Theorem 3), T = {self.rounds} rounds "
                f"of a Gaussian with noise multiplier sigma = {self.sigma:g} for the user-level "
                "sensitivity C; each user Poisson-sampled every round with its own q_u "
                "(Algorithm 4, Lemma 4; PULDP-AVG of the ULDP-FL authors' code)"
            ),
            "threat model": (
                "observers who do not learn the user sample (the released models): rho = "
                "T rho(alpha, q_u) (Mironov et al. 2019); the server draws the sample, so this "
                "amplification does not hold against it (see 'server view')"
            ),
            "neighbouring": "add or remove all records of one user, in every silo (user-level DP)",
        }


def user_run(sigma: float, rounds: int) -> UserSampledULDP:
    """The user-level run of T = `rounds` rounds at noise multiplier `sigma`."""
    return UserSampledULDP(sigma, 1, rounds)


def user_curve(sigma: float, rounds: int, delta: float, conversion: str = "improved") -> EpsilonCurve:
    """q_u -> epsilon*(q_u) of one user at `delta`: T rounds of the Poisson-subsampled Gaussian
    at rate q_u (ULDP-FL Theorem 3 with Algorithm 4), the record-level curve at tau = 1,
    lambda = 1 (`accountants.personalized.record_spend`). Every value is an upper bound."""
    return EpsilonCurve(user_run(sigma, rounds), delta, conversion)


def user_rates(
    budgets: np.ndarray,
    curve: EpsilonCurve,
    *,
    q_cap: float = 1.0,
    q_min: float = DEFAULT_Q_MIN,
    infeasible: str = "clamp",
) -> Personalization:
    """Each user's q_u from its budget: the largest rate on the exact grid whose epsilon*(q_u)
    is within it (`record_rates.personalize`, method exact), with the epsilon it spends.

    `curve` is a `user_curve`; budgets outside [epsilon*(q_min), epsilon*(q_cap)] follow
    `infeasible` exactly as records do (a budget of 0 gets q_u = 0: never sampled).
    """
    if not isinstance(curve.run, UserSampledULDP):
        raise InvalidParameter("user_rates needs a user-level curve (user_curve)")
    return personalize(budgets, curve, method="exact", q_min=q_min, q_cap=q_cap, infeasible=infeasible)


def calibrate_user_sigma(
    budget: float, rounds: int, delta: float, q_cap: float = 1.0, conversion: str = "improved"
) -> Calibration:
    """The smallest sigma (4 significant digits, rounded up) with epsilon*(q_cap) <= `budget`:
    with the largest user budget, that user is sampled at q_cap (or just below)."""
    if not (budget > 0 and math.isfinite(budget)):
        raise InvalidParameter(f"budget must be a finite number > 0, got {budget}")
    return calibrate_sigma(user_run(1.0, rounds), delta, budget, q_cap, conversion)


def server_epsilon(
    sigma: float, rounds: int, delta: float, conversion: str = "improved", q: float = 1.0
) -> float:
    """The server's epsilon at `delta` for a user sampled at `q`: it draws the user sample, so it
    gets no amplification from it; it knows the rounds the user took part in, whose number is
    random (the RDP of that known participation, `uldp account`'s "server view"), and at most
    T rounds of the plain Gaussian (epsilon*(1) of the user curve, rho = T alpha / (2 sigma^2)),
    which bounds it whatever q: both are valid bounds, the smaller is kept."""
    from ..account import known_participation_epsilon

    plain = float(user_curve(sigma, rounds, delta, conversion)(1.0)[0])
    known = known_participation_epsilon(sigma, q, rounds, delta, conversion=conversion).epsilon
    return min(plain, float(known))


def user_assumptions(
    result: Personalization,
    curve: EpsilonCurve,
    budgets_source: str,
    calibration: Calibration | None = None,
) -> AssumptionLines:
    """The record level's assumption lines (`personalization_assumptions`) for users, with the
    server's view after the run's: its epsilon, which does not depend on q_u."""
    run = curve.run
    lines = personalization_assumptions(
        result, curve, budgets_source, run.sigma, calibration=calibration, unit="users"
    ).lines
    rates = np.unique(result.q[result.q > 0])
    spent = [server_epsilon(run.sigma, run.rounds, curve.delta, curve.conversion, float(q)) for q in rates]
    if 0 < rates.size <= SERVER_RATES_LISTED:
        each = ", ".join(f"{e:.6g} at q_u = {q:.4g}" for q, e in zip(rates, spent))
    elif rates.size:
        each = f"{min(spent):.6g} to {max(spent):.6g} over the {rates.size} rates"
    else:
        each = "0 (no user is sampled)"
    view = (
        "server view",
        f"epsilon {each}: the server draws the sample, so it gets no amplification; it knows the "
        "rounds a user took part in (the RDP of that known participation, as `uldp account "
        f"--user-q q_u` prints it), at most T = {run.rounds} plain Gaussian rounds (epsilon*(1))",
    )
    at = next(i for i, (label, _) in enumerate(lines) if label == "neighbouring") + 1
    return AssumptionLines((*lines[:at], view, *lines[at:]))
