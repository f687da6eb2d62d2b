"""A round of distributed-noise federated averaging after dropouts: its weights, the noise that
survives, and the multiplier that noise gives the released average (`DropoutRound`).

Baek, Kim, Nam, Park, "Enhancing Differential Privacy for Federated Learning at Scale" (IEEE
Access 2021), §IV-V. Notation of the paper: n is the weight sum of the participants sampled in
a round, n' the weight sum of those still alive at aggregation, z the noise multiplier, C the
clipping bound, w_i = min(n_i / n_max, 1) a participant's weight (Algorithm 2, line 8).

Neighbouring relation (Propositions 1-2): one participant's update replaced by another of the
same weight, the weight sum n being public; the weighted average then has l2-sensitivity
2 W C / n with W = max weight = 1 (weights are capped at 1, so W = 1 is the conservative
choice). A round adds Gaussian noise of std (multiplier x 2C/n) and is accounted, as the paper
does with the moments accountant of TF-Privacy, as one Poisson-subsampled Gaussian step with
that multiplier at the participant sampling rate q: the add/remove pair with shift 2C/n'. The
replace-one pair has shifts a, b with |a| <= C/n' and |b| <= C/n' (each participant's
contribution w_i u_i / n', ||u_i|| <= C, w_i <= 1); |a - b| <= 2C/n' alone is not enough (two
shifts far from 0 break it). tests/accountants/test_dropout.py checks by quadrature that the
replace pair's Renyi divergence never exceeds the accounted one; that check covers the RDP
accountant only. For pld/prv there is no proof here: the same file composes the replace pair's
PLD with dp-accounting in a few settings and checks the printed pld epsilon is above it.
`DropoutRound` gives the noise multipliers in units of that sensitivity (this module: the
algebra); `accountants.dropout.accounting` turns one into epsilon, and
`accountants.dropout.tables` tabulates both for the CLI.

Three noise multipliers matter per round, with n_ref = n (Algorithm 2) or n_0 (Algorithm 3):

- no calibration: the survivors' shares e_i ~ N(0, n_ref w_i sigma_ref^2), sigma_ref = 2Cz/n_ref
  (line 15), average to variance (2Cz)^2 / (n' n_ref) while the sensitivity becomes 2C/n' (§IV-B),
  so the multiplier is z sqrt(n' / n_ref);
- calibrated, released model: line 22 replaces each share by fresh noise of variance
  n' w_i sigma'^2, sigma' = 2Cz/n', restoring multiplier z (§V-B);
- calibrated, seen by the server: the server holds both the uncalibrated aggregate (line 19) and
  the calibration messages e_i' (line 22) in the clear, i.e. two observations of the same
  average with independent noises of multipliers z sqrt(n'/n_ref) and z; together they are one
  Gaussian observation with 1/m^2 = 1/z^2 + n_ref/(n' z^2), so m = z / sqrt(1 + n_ref/n').
  The paper's analysis covers only the released model; this third figure is ours.

Who gets the subsampling amplification. The server draws the sample U^t itself (Algorithm 2
line 11, Algorithm 3 line 16), so it knows in which rounds the user took part: against it a run
is K ~ Bin(T, q) plain Gaussian rounds of multiplier m, K known. Its RDP is exactly
T/(alpha-1) ln(1 - q + q e^{(alpha-1) alpha / (2 m^2)}) (the Renyi moment of a mixture over the
observed K; the untrusted formula of accountants/personalized/record_spend.py with one Gaussian
step), and its delta(eps) is exactly E_K[delta_Gauss(eps; sqrt(K)/m)]
(`accountants.rdp.participation`). Only observers who do not know U^t (outsiders who see the
released models) get the Poisson-subsampled figure.

A coalition of surviving participants of weight k knows its own noise shares: against the
released model it sees the other survivors' noise only, multiplier z sqrt((n'-k)/n') calibrated,
z sqrt((n'-k)/n_ref) without calibration (`DropoutRound.coalition_multiplier`); in Algorithm 3 it
also learns who was sampled, so it is accounted like the server
(`accounting.server_epsilon`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from uldp.errors import InvalidParameter


def participant_weights(examples: Sequence[int], n_max: int) -> np.ndarray:
    """w_i = min(n_i / n_max, 1) for each participant (Algorithm 2, line 8)."""
    if n_max < 1:
        raise InvalidParameter(f"n_max must be >= 1, got {n_max}")
    counts = np.asarray(examples, dtype=float)
    if counts.size == 0 or np.any(counts < 1):
        raise InvalidParameter("every participant needs at least one example")
    return np.minimum(counts / n_max, 1.0)


def dropped_count(participants: int, dropout: float) -> int:
    """Participants lost at rate `dropout`, rounded up (more dropouts is the worse case)."""
    _check_dropout(dropout)
    # The small slack keeps 0.1 * 50 at 5 despite floating point (0.1 * 50 = 5.000000000000001).
    return min(participants, math.ceil(dropout * participants - 1e-9))


def surviving_weight_sum(weights: Sequence[float] | np.ndarray, dropout: float) -> float:
    """Worst-case n': the heaviest ceil(dropout x count) participants drop out.

    The uncalibrated multiplier z sqrt(n'/n) falls with n', so losing the heaviest is the
    worst case; with unit weights this is n' = n - ceil(dropout n).
    """
    w = np.sort(np.asarray(weights, dtype=float))
    survivors = w.size - dropped_count(w.size, dropout)
    if survivors < 1:
        raise InvalidParameter(f"dropout {dropout:g} leaves no participant out of {w.size}")
    return float(np.sum(w[:survivors]))


@dataclass(frozen=True)
class DropoutRound:
    """One round's weight sums: sampled n, alive n', and the noise reference n_ref.

    n_ref is n for Algorithm 2 and the minimum weight sum n_0 for Algorithm 3 (§V-B), whose
    participants draw their first noise share for n_0 so the server never sees too little noise.
    Only the ratios matter for epsilon, so a rate-only scenario uses n = 1, n' = 1 - dropout.
    """

    weight_sum: float
    alive_weight_sum: float
    reference: float
    # Weight of participants alive at upload (counted in n') that are lost before they send their
    # calibration share (Algorithm 2 line 22): their first share stays in the aggregate. 0 in
    # `uldp dropout`'s scenarios; a training run records what happened (`run_spend`).
    calibration_dropped: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.alive_weight_sum <= self.weight_sum:
            raise InvalidParameter("the alive weight sum must be in (0, weight sum]")
        if not 0 < self.reference <= self.weight_sum:
            raise InvalidParameter(f"n_0 = {self.reference:g} must be in (0, weight sum {self.weight_sum:g}]")
        if not 0 <= self.calibration_dropped <= self.alive_weight_sum:
            raise InvalidParameter("the weight lost before calibration must be in [0, alive weight sum]")

    @property
    def calibrating_weight(self) -> float:
        """The weight of the survivors that send their calibration share (line 22)."""
        return self.alive_weight_sum - self.calibration_dropped

    def uncalibrated_multiplier(self, z: float) -> float:
        """z sqrt(n' / n_ref): no calibration step (§IV-B)."""
        return z * math.sqrt(self.alive_weight_sum / self.reference)

    def calibrated_multiplier(self, z: float) -> float:
        """The released model after line 22: the survivors' fresh shares over the sensitivity 2C/n'.

        Their average has variance sum_i 4 C^2 z^2 w_i / n' / n'^2 = 4 C^2 z^2 / n'^2, which is
        z times the sensitivity whatever the dropout (§V-B); derived from the line-22 variance
        rather than returned as z, so the tests check the derivation. A survivor lost before its
        calibration share leaves its first share (line 15) in place: variance
        4 C^2 z^2 w_i / n_ref instead, so the multiplier is z sqrt(W_cal / n' + W_lost / n_ref).
        """
        # C = 1; the weights sum the survivors' variances
        total = self.calibration_variance(z, 1.0, weight=self.calibrating_weight) + self.share_variance(
            z, 1.0, weight=self.calibration_dropped
        )
        return math.sqrt(total) / self.alive_weight_sum / (2.0 / self.alive_weight_sum)

    def server_view_multiplier(self, z: float) -> float:
        """z / sqrt(1 + n_ref / n'): the server sees lines 19 and 22 of Algorithm 2 (module doc).

        In general the aggregate X = S + E_cal + E_lost (line 19) and the calibrated release
        X + sum e_i' = S + F_cal + E_lost are two observations whose noises share E_lost (the
        first shares of survivors lost before line 22). With a, b, c the variances of E_cal,
        F_cal and E_lost, the best combination of the two has variance ab / (a + b) + c (the
        inverse of 1' Sigma^-1 1 for their 2 x 2 covariance); with c = 0 this is the formula above.
        """
        a = self.share_variance(z, 1.0, weight=self.calibrating_weight)
        b = self.calibration_variance(z, 1.0, weight=self.calibrating_weight)
        c = self.share_variance(z, 1.0, weight=self.calibration_dropped)
        combined = (a * b / (a + b) if a + b > 0 else 0.0) + c
        return math.sqrt(combined) / self.alive_weight_sum / (2.0 / self.alive_weight_sum)

    def coalition_multiplier(self, z: float, weight: float, calibrated: bool = True) -> float:
        """What surviving participants of total weight k see in the released model (module doc).

        They know their own shares, so only the other survivors' noise is left: variance
        (n' - k) x 4 C^2 z^2 / n'^2 calibrated (line 22), (n' - k) x 4 C^2 z^2 / (n_ref n'^2)
        without calibration (line 15), over the sensitivity 2C/n'.
        """
        if not 0 <= weight < self.alive_weight_sum:
            raise InvalidParameter(
                f"coalition weight must be in [0, n' = {self.alive_weight_sum:g}), got {weight:g}"
            )
        rest = self.alive_weight_sum - weight
        return z * math.sqrt(rest / (self.alive_weight_sum if calibrated else self.reference))

    def calibration_variance(self, z: float, clip: float, weight: float = 1.0) -> float:
        """Variance of the fresh noise a survivor of weight w adds: n' w sigma'^2 = 4 C^2 z^2 w / n'.

        Algorithm 2 line 22 (Algorithm 3 line 34): e_i' = -e_i + N(0, n' w_i sigma'^2 I),
        sigma' = 2 C z / n'. Per coordinate, in the units of the update vectors.
        """
        return 4.0 * clip**2 * z**2 * weight / self.alive_weight_sum

    def share_variance(self, z: float, clip: float, weight: float = 1.0) -> float:
        """Variance of the first share (line 15, or Algorithm 3 line 26): 4 C^2 z^2 w / n_ref."""
        return 4.0 * clip**2 * z**2 * weight / self.reference


def rate_only_round(dropout: float) -> DropoutRound:
    """n' / n = 1 - dropout, when the participants' number and weights are not given."""
    _check_dropout(dropout)
    return DropoutRound(1.0, 1.0 - dropout, 1.0)


def weighted_round(
    weights: Sequence[float] | np.ndarray, dropout: float, min_weight_sum: float | None = None
) -> DropoutRound:
    """The worst-case round for these participants' weights, optionally with n_0 (Algorithm 3)."""
    n = float(np.sum(weights))
    if min_weight_sum is not None and not 0 < min_weight_sum <= n:
        raise InvalidParameter(
            f"n_0 = {min_weight_sum:g} must be in (0, weight sum {n:g}] "
            "(Algorithm 3 line 17 checks n_0 <= sum of weights)"
        )
    return DropoutRound(
        n, surviving_weight_sum(weights, dropout), n if min_weight_sum is None else float(min_weight_sum)
    )


def _check_dropout(dropout: float) -> None:
    if not 0 <= dropout < 1:
        raise InvalidParameter(f"dropout rate must be in [0, 1), got {dropout}")
