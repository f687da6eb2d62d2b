"""What a training run with dropouts really spent, round by round (Baek et al. 2021, §IV-V).

`uldp dropout` plans with one dropout rate for every round; a run of Algorithm 2 or 3 (`uldp
train --algo dp-fedavg-robust`) knows what each round released: the weight sum n of the
participants sampled, n' of those alive at upload, n_ref (n, or n_0 in Algorithm 3), the weight
of survivors lost before their calibration share, and whether the round was calibrated. Each such
round is an `ObservedRound`; its noise multipliers are `accountants.dropout.rounds.DropoutRound`'s (the
same algebra as `uldp dropout`), and a run is the composition of its rounds (ULDP-FL Lemma 1: RDP
curves add), accounted through the registry like every other event:

- released model (outsiders, who do not know the sample): one Poisson-subsampled Gaussian step
  per released round at rate q, with that round's multiplier;
- the server: it draws the sample, so a `KnownParticipation` round per released round (no
  amplification), with the multiplier of what it holds. Under secure aggregation (Algorithm 3)
  that is the aggregate and the calibration shares (`DropoutRound.server_view_multiplier`);
  without it (Algorithm 2 in the clear) the server reads every participant's message M_i =
  w_i Delta_i + e_i alone, `single_message_multiplier`.

A round with identical multipliers to another is merged with it (a run of T such rounds is the
same event `uldp dropout --rounds T` accounts, so the two print the same epsilon); the released
model of a run of more than `REFINED_PARTS` distinct multipliers is accounted at the RDP grid's
orders without the real-order refinement between them (a valid bound; the refinement would cost
seconds per round, every round). Rounds that
released nothing (nobody sampled, the sampled weight below n_0, too few survivors for the secure
aggregation) add nothing.

At q = 1 (every participant sampled every round) both views are plain Gaussians, one per
released round, and their composition is exact in closed form (`accountants.tight.gaussian`: mu-GDP,
Balle & Wang 2018 Thm. 8); the run's epsilons are then that exact figure, below the accountant's
(`run_accountant_epsilons`, the cross-check).

Assumptions, as in `uldp dropout`: dropouts do not depend on the data, and the weight sums the
server broadcasts (n, n') are public and treated as independent of who was sampled (the paper's
accounting, §V-B: a participant joins each round with probability q).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from uldp.errors import InvalidParameter

from ..events import Composed, Event, KnownParticipation, SubsampledGaussian
from ..registry import account_event
from ..tight.gaussian import exact_gaussian_epsilon
from .rounds import DropoutRound


@dataclass(frozen=True)
class ObservedRound:
    """One released round of Algorithm 2 / 3 as it happened.

    `largest_weight` is the largest w_i among the survivors: without secure aggregation the server
    reads each one's message, and the heaviest is the least protected.
    """

    weights: DropoutRound
    calibrated: bool
    largest_weight: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.largest_weight <= 1:
            raise InvalidParameter(f"a participant's weight must be in (0, 1], got {self.largest_weight}")

    def model_multiplier(self, z: float) -> float:
        """What the released model carries: z sqrt(n'/n_ref) uncalibrated (§IV-B); calibrated,
        z sqrt(W_cal/n' + W_lost/n_ref) (z when no survivor was lost before line 22)."""
        if self.calibrated:
            return self.weights.calibrated_multiplier(z)
        return self.weights.uncalibrated_multiplier(z)

    def server_multiplier(self, z: float, secure: bool) -> float:
        """What the server's view carries: under secure aggregation the aggregate (and, calibrated,
        the calibration shares); in the clear, one participant's own message."""
        if not secure:
            return self.single_message_multiplier(z)
        if self.calibrated:
            return self.weights.server_view_multiplier(z)
        return self.weights.uncalibrated_multiplier(z)

    def single_message_multiplier(self, z: float) -> float:
        """A participant's message read alone, in units of its own sensitivity 2 C w_i.

        M_i = w_i Delta_i + e_i with Var e_i = 4 C^2 z^2 w_i / n_ref (line 15): multiplier
        z / sqrt(w_i n_ref). Calibrated, the server also holds M_i + e_i', whose fresh noise has
        variance 4 C^2 z^2 w_i / n' (line 22); the two together: z / sqrt(w_i (n_ref + n')).
        The heaviest survivor is the worst case (a survivor lost before line 22 has the first
        figure, which is larger).
        """
        w = self.largest_weight
        reference = self.weights.reference
        if self.calibrated and self.weights.calibrating_weight > 0:
            return z / math.sqrt(w * (reference + self.weights.alive_weight_sum))
        return z / math.sqrt(w * reference)


def run_events(rounds: Sequence[ObservedRound], z: float, q: float, *, secure: bool) -> tuple[Event, Event]:
    """(released model's, server's) event of these released rounds, equal rounds merged."""
    if not rounds:
        raise InvalidParameter("no round was released: there is nothing to account")
    model = Counter(r.model_multiplier(z) for r in rounds)
    server = Counter(r.server_multiplier(z, secure) for r in rounds)
    return (
        _composed([SubsampledGaussian(m, q, n) for m, n in sorted(model.items())]),
        _composed([KnownParticipation(m, q, n) for m, n in sorted(server.items())]),
    )


def run_epsilons(
    rounds: Sequence[ObservedRound], z: float, q: float, delta: float, *, secure: bool, **accounting: Any
) -> tuple[float, float]:
    """(released model's, server's) epsilon at `delta` after these rounds; (0, 0) before any.

    `accounting`: the registry's options (accountant, conversion, orders); the default is the RDP
    accountant with the improved conversion, as `uldp dropout` and `uldp train` print. At q = 1
    both views are compositions of plain Gaussians (multipliers m_t): their exact epsilon
    (`accountants.tight.gaussian`, mu = sqrt(sum_t 1/m_t^2)) is returned instead, as `uldp dropout`
    prints at q = 1; `run_accountant_epsilons` gives the accountant's figures, the cross-check.
    """
    if not rounds:
        return 0.0, 0.0
    model, server = run_events(rounds, z, q, secure=secure)
    return _tightest(model, delta, accounting), _tightest(server, delta, accounting)


def _tightest(event: Event, delta: float, accounting: dict[str, Any]) -> float:
    # At q = 1 the rounds are plain Gaussians, whose composition has an exact epsilon below
    # every accountant's; otherwise the accountant's bound.
    exact = exact_gaussian_epsilon(event, delta)
    if exact is not None:
        return exact
    return account_event(event, delta, **_grid_only(event, accounting)).epsilon


def run_accountant_epsilons(
    rounds: Sequence[ObservedRound], z: float, q: float, delta: float, *, secure: bool, **accounting: Any
) -> tuple[float, float]:
    """`run_epsilons` by the accountant alone, also at q = 1 (the cross-check of the exact figure)."""
    if not rounds:
        return 0.0, 0.0
    model, server = run_events(rounds, z, q, secure=secure)
    return (
        account_event(model, delta, **_grid_only(model, accounting)).epsilon,
        account_event(server, delta, **_grid_only(server, accounting)).epsilon,
    )


#: Above this many distinct multipliers the released model's rounds are accounted at the orders
#: of the RDP grid only: the real-order refinement evaluates one fractional-order series per
#: multiplier at every order it tries (Mironov et al. 2019 §3.3), which took 5.8 s per epsilon
#: after 100 uncalibrated rounds of 78 multipliers, every round. The grid's bound is valid, and
#: was within 0.2% of the refined one in the runs of docs/dropout.md. The server's rounds
#: (known participation, a closed form per order) are always refined: cheap, and at its large
#: epsilons the best order lies below the grid's first.
REFINED_PARTS = 4


def _grid_only(event: Event, accounting: dict[str, Any]) -> dict[str, Any]:
    parts = event.events if isinstance(event, Composed) else (event,)
    steps = sum(isinstance(part, SubsampledGaussian) for part in parts)
    return {**accounting, "real_orders": False} if steps > REFINED_PARTS else accounting


def _composed(events: list[Any]) -> Event:
    # One kind of round is the event itself, exactly what `uldp dropout --rounds T` accounts.
    return events[0] if len(events) == 1 else Composed(tuple(events))
