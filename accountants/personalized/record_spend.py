"""epsilon*(q): what one record spends in rPDP-FL when it is sampled with probability q.

rPDP-FL (record-level personalised DP in cross-silo FL; slides ch. 3, Algorithm 2): in each of
T rounds every client is sampled with probability lambda; a sampled client runs tau DP-SGD
steps (noise multiplier sigma) in which record j is Poisson-sampled with its own probability
q_j. Slides ch. 3 II bound the record's RDP at order alpha, with rho(alpha, q) the RDP of one
sub-sampled Gaussian step (`accountants.rdp.curves`, Mironov et al. 2019 §3.2):

- untrusted clients or third parties (they see the global models):
  rho_FL = T / (alpha - 1) * ln(1 - lambda + lambda e^{(alpha - 1) tau rho(alpha, q)});
- honest-but-curious server (it sees the sampled clients' updates), as the slides write it:
  rho_FL = lambda T tau rho(alpha, q).

and epsilon*(q) = min over alpha of the RDP-to-DP conversion of rho_FL
(`accountants.conversion`: the slides' classic one, or the improved Lemma 2).

The slides' server formula counts lambda T rounds of participation, the *expected* number under
Poisson client sampling (Algorithm 2); it is the expected RDP, not a bound on it. A server that
sees which rounds the record's client joined observes the participation pattern, which does not
depend on the record; given k rounds the record spends k tau rho, so the RDP of what it sees is
ln E[e^{(alpha-1) K tau rho}] / (alpha-1) with K ~ Binomial(T, lambda), which is exactly the
untrusted formula (and by Jensen never below lambda T tau rho). So by default the server threat
model uses the untrusted formula whenever lambda < 1. Only under a fixed schedule
(`fixed_schedule=True`: every client takes part in exactly k = round(lambda T) rounds chosen in
advance, no client sampling) is the count formula k tau rho(alpha, q) a bound; then it is used,
with the integer k. At lambda = 1 all of them coincide: T tau rho.

Evaluation is vectorised over q and alpha at integer orders (`subsampled_gaussian_rdp_grid`),
then refined over real orders (`subsampled_gaussian_rdp_real`, Mironov et al. 2019 §3.3): one
epsilon*(q) costs about half a millisecond, a curve of ten thousand rates a few seconds (the
searches evaluate a few hundred to a few thousand rates). At q = 1 (the capped tier) a record is
in every step: its steps are plain Gaussians, accounted exactly in closed form
(`EpsilonCurve.full_rate_epsilon`, `accountants.tight.gaussian`), below every RDP order's figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from uldp.errors import InvalidParameter

from ..calibrate import Calibration, calibrate
from ..conversion import CONVERSIONS, epsilon_curve
from ..events import KnownParticipation
from ..rdp.curves import subsampled_gaussian_rdp_grid, subsampled_gaussian_rdp_real
from ..rdp.participation import known_participation_exact_epsilon, log_poisson_mixture
from ..tight.gaussian import gaussian_epsilon

THREAT_MODELS = ("untrusted", "server")


def _personalized_orders() -> np.ndarray:
    # Integers only: the vectorised binomial sum needs them, and dp-accounting can check them.
    # Every integer to 16, then about 15% apart to 256 (budgets down to about 0.05 at
    # delta = 1e-5 find their optimum inside). Cost grows with the sum of the orders, so this
    # is about 2,000 binomial terms per q instead of 33,000 for every integer to 256; a coarser
    # set only loosens the bound (the minimum over fewer orders), it never invalidates it.
    high = np.unique(np.round(np.geomspace(16, 256, 21)))
    return np.unique(np.concatenate([np.arange(2.0, 17.0), high]))


#: RDP orders of every personalised computation, for all inversion methods alike.
PERSONALIZED_ORDERS: np.ndarray = _personalized_orders()
PERSONALIZED_ORDERS.flags.writeable = False
#: Golden-section steps of the real-order refinement: the bracket between the best integer
#: order's neighbours shrinks to 0.618^10 ~ 8e-3 of its width.
REFINE_STEPS = 10
#: Terms of a fractional-order series before the refinement gives up on that (order, rate): at
#: large rates and small sigma the series settles slowly (up to a million terms), and there the
#: optimum is at small integer orders already; giving up keeps the integer orders' epsilon.
REFINE_MAX_TERMS = 256
#: Rates refined: at most this. Small budgets (small rates) are where integer orders lose most
#: (28% of the rate at sigma 0.7, budget 1); at large rates the series often does not settle in
#: REFINE_MAX_TERMS terms, and refining some rates but not larger ones would make the curve dip
#: where it should rise. Above it the integer orders' value is kept: a step up, which keeps the
#: curve non-decreasing.
REFINE_MAX_RATE = 0.25
#: Rates per evaluation of the curve at most; more are evaluated in chunks of this many, which
#: bounds the work arrays (about 2,000 binomial terms per rate) to a few hundred MB.
CURVE_CHUNK = 25_000


def orders_description(orders: np.ndarray) -> str:
    """A short label for the assumptions block."""
    orders = np.asarray(orders)
    return f"{orders.size} integer orders {orders[0]:g}..{orders[-1]:g}"


@dataclass(frozen=True)
class RecordSampledFL:
    """An rPDP-FL run, as seen by one record (slides ch. 3 I, Algorithm 2).

    sigma: noise multiplier of every DP-SGD step.
    local_steps: tau, DP-SGD steps per round on a sampled client.
    rounds: T, federated rounds.
    client_rate: lambda, Poisson sampling probability of a client per round.
    threat_model: "untrusted" (clients or third parties) or "server" (honest but curious).
    fixed_schedule: server model only: instead of Poisson sampling, every client takes part in
        exactly round(lambda T) rounds fixed in advance (see the module docstring).
    """

    sigma: float
    local_steps: int
    rounds: int
    client_rate: float = 1.0
    threat_model: str = "untrusted"
    fixed_schedule: bool = False

    def __post_init__(self) -> None:
        if not (self.sigma > 0 and math.isfinite(self.sigma)):
            raise InvalidParameter(f"sigma must be > 0, got {self.sigma}")
        if self.local_steps < 1 or self.rounds < 1:
            raise InvalidParameter("local steps (tau) and rounds (T) must be >= 1")
        if not 0 < self.client_rate <= 1:
            raise InvalidParameter(f"client rate must be in (0, 1], got {self.client_rate}")
        if self.threat_model not in THREAT_MODELS:
            raise InvalidParameter(
                f"threat model must be one of {', '.join(THREAT_MODELS)}, got {self.threat_model!r}"
            )
        if self.fixed_schedule:
            if self.threat_model != "server":
                raise InvalidParameter("a fixed schedule applies to the server threat model only")
            if self.participations < 1:
                raise InvalidParameter(
                    f"a fixed schedule needs round(lambda T) >= 1 rounds, got "
                    f"round({self.client_rate:g} * {self.rounds}) = 0"
                )

    @property
    def participations(self) -> int:
        """k = round(lambda T): rounds each client takes part in under a fixed schedule (halves
        round up, never to even: the schedule is the larger one)."""
        return math.floor(self.client_rate * self.rounds + 0.5)

    @property
    def server_count_formula(self) -> bool:
        """Whether rho_FL is (count) x tau rho: the server model under a fixed schedule."""
        return self.threat_model == "server" and self.fixed_schedule

    def assumptions(self) -> dict[str, str]:
        """What every epsilon of this run assumes, in words."""
        steps = (
            f"tau = {self.local_steps} DP-SGD steps per round, sigma = {self.sigma:g}; "
            "each record Poisson-sampled with its own q"
        )
        if self.fixed_schedule:
            run = (
                f"T = {self.rounds} rounds, fixed schedule: every client takes part in exactly "
                f"k = round(lambda T) = {self.participations} rounds chosen in advance (no "
                f"client sampling); {steps}"
            )
        else:
            run = (
                f"T = {self.rounds} rounds, clients Poisson-sampled with probability lambda = "
                f"{self.client_rate:g}; {steps}"
            )
        untrusted = "T/(alpha-1) ln(1 - lambda + lambda e^{(alpha-1) tau rho(alpha, q)})"
        if self.threat_model == "untrusted":
            threat = (
                "untrusted clients or third parties (slides ch. 3 II): rho_FL = "
                f"{untrusted}; also valid for a server that sees which rounds the client "
                "joined"
            )
        elif self.fixed_schedule:
            threat = (
                f"honest-but-curious server (slides ch. 3 II), fixed schedule: rho_FL = "
                f"k tau rho(alpha, q) with k = {self.participations}; valid only if no "
                f"client takes part in more than {self.participations} rounds"
            )
        elif self.client_rate < 1:
            threat = (
                f"honest-but-curious server that sees which rounds the client joined: "
                f"rho_FL = {untrusted}, the exact RDP of the Poisson participation; the "
                "slides' lambda T tau rho(alpha, q) is only its expectation (not a bound) "
                "and is used only with --fixed-schedule"
            )
        else:
            threat = (
                "honest-but-curious server (slides ch. 3 II), every client in every "
                "round: rho_FL = T tau rho(alpha, q)"
            )
        return {
            "run": run,
            "threat model": threat,
            "neighbouring": "add or remove one record (record-level DP)",
        }


def fl_rdp(run: RecordSampledFL, qs: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """rho_FL(alpha, q) of the whole run, shape (len(qs), len(orders)) (slides ch. 3 II)."""
    orders = np.asarray(orders, dtype=float)
    return _compose_rounds(run, subsampled_gaussian_rdp_grid(orders, run.sigma, qs), orders)


def fl_rdp_real(
    run: RecordSampledFL, qs: np.ndarray, alphas: np.ndarray, max_terms: int = REFINE_MAX_TERMS
) -> np.ndarray:
    """rho_FL at one real order per rate (`alphas[i]` for `qs[i]`), Mironov et al. 2019 §3.3."""
    alphas = np.asarray(alphas, dtype=float)
    step = subsampled_gaussian_rdp_real(alphas, run.sigma, qs, max_terms)
    return _compose_rounds(run, step, alphas)


def _compose_rounds(run: RecordSampledFL, step: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """From one DP-SGD step's RDP to the whole run's under the run's threat model."""
    local = run.local_steps * step  # tau steps compose (Lemma 1)
    if run.server_count_formula:
        return run.participations * local  # fixed schedule: k rounds, known in advance
    # Untrusted parties, and a server that sees the Poisson participation: the same bound.
    if run.client_rate == 1.0:
        return run.rounds * local
    # ln(1 - lambda + lambda e^{(alpha - 1) tau rho}) per round
    return run.rounds * log_poisson_mixture(run.client_rate, (orders - 1.0) * local) / (orders - 1.0)


class EpsilonCurve:
    """q -> epsilon*(q) at `delta` for one run: the minimum over `orders` of the converted
    rho_FL (slides ch. 3 II). Vectorised over q; counts the rates it has evaluated.

    Every value is an upper bound on the record's epsilon at `delta` under the run's threat
    model. With `refine` (the default) each value is the integer orders' minimum, lowered by a
    search over the real orders between the best one's neighbours (`_refined`), so that a
    budget's rate is within 0.1% of the best rate over real orders, not only integer ones. The
    minimum over a fixed set of orders is non-decreasing in q (the RDP of the sub-sampled
    Gaussian grows with q, and both rho_FL formulas and the conversion are increasing in it);
    the refined one is close to it but not exactly, which is why the searches take the running
    maximum and re-account every answer (`accountants.personalized.rate_search`).
    """

    def __init__(
        self,
        run: RecordSampledFL,
        delta: float,
        conversion: str = "improved",
        orders: np.ndarray = PERSONALIZED_ORDERS,
        refine: bool = True,
    ) -> None:
        if not 0 < delta < 1:
            raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
        if conversion not in CONVERSIONS:
            raise InvalidParameter(f"conversion must be one of {', '.join(CONVERSIONS)}, got {conversion!r}")
        self.run, self.delta, self.conversion = run, delta, conversion
        self.orders = np.asarray(orders, dtype=float)
        self.refine = refine
        self.evaluations = 0
        self._full_rate: float | None = None

    def __call__(self, qs: np.ndarray | float) -> np.ndarray:
        qs = np.atleast_1d(np.asarray(qs, dtype=float))
        if qs.size > CURVE_CHUNK:
            # The work arrays are (rates x orders x binomial terms): in chunks, memory stays
            # bounded whatever the number of rates (the values are the same).
            return np.concatenate([self(qs[i : i + CURVE_CHUNK]) for i in range(0, qs.size, CURVE_CHUNK)])
        self.evaluations += qs.size
        rdp = fl_rdp(self.run, qs, self.orders)
        eps = epsilon_curve(np.tile(self.orders, qs.size), rdp.ravel(), math.log(self.delta), self.conversion)
        eps = eps.reshape(qs.size, self.orders.size)
        best = np.argmin(eps, axis=1)
        found = eps[np.arange(qs.size), best]
        small = qs <= REFINE_MAX_RATE
        if self.refine and small.any():
            found[small] = np.minimum(found[small], self._refined(qs[small], best[small]))
        full = qs >= 1.0
        if self.refine and full.any():
            found[full] = np.minimum(found[full], self.full_rate_epsilon())
        return np.maximum(found, 0.0)

    def full_rate_epsilon(self) -> float:
        """epsilon*(1) exactly: a record sampled with q = 1 is in every DP-SGD step, so what it
        spends is a composition of plain Gaussians, whose privacy curve has a closed form.

        - lambda = 1, or a fixed schedule: T tau (k tau) Gaussians of multiplier sigma, i.e.
          mu-GDP with mu = sqrt(T tau) / sigma (Balle & Wang 2018 Thm. 8, `accountants.tight.gaussian`);
        - Poisson client sampling (lambda < 1): a round the client joins is tau Gaussians, one of
          multiplier sigma / sqrt(tau); an observer who knows which rounds it joined sees
          K ~ Bin(T, lambda) of them, with the exact profile E_K[delta_Gauss(eps; sqrt(K tau) /
          sigma)] (`participation.known_participation_exact_epsilon`); one who does not (the
          untrusted model) sees a post-processing of that, so the same epsilon bounds it.

        Both are below the RDP figure at any order (integer orders gave 4.99992 where the best
        real order gives 4.99197; at sigma 21.34, tau 10, T 50 the integer orders give 4.99759
        and this 4.62088, which dp-accounting's PLD matches to 1e-4:
        tests/accountants/test_personalized_full_rate.py). Computed once per curve.
        """
        if self._full_rate is None:
            run = self.run
            if run.server_count_formula or run.client_rate >= 1.0:
                # every client in every round: `participations` is the rounds
                self._full_rate = gaussian_epsilon(
                    math.sqrt(run.participations * run.local_steps) / run.sigma, self.delta
                )
            else:
                event = KnownParticipation(
                    run.sigma / math.sqrt(run.local_steps), run.client_rate, run.rounds
                )
                self._full_rate = known_participation_exact_epsilon(event, self.delta)
        return self._full_rate

    def _refined(self, qs: np.ndarray, best: np.ndarray) -> np.ndarray:
        """epsilon at the best real order between each rate's best order's neighbours in
        `orders` (golden-section search, vectorised over the rates, `REFINE_STEPS` steps).

        Every value is evaluated exactly at a real order, so it is a valid bound whatever the
        curve's shape; the integer orders alone are up to 28% short of the best rate at small
        budgets (the optimum, e.g. at order 9.45, falls between them).
        """
        orders, log_delta = self.orders, math.log(self.delta)
        a = np.where(best > 0, orders[np.maximum(best - 1, 0)], 1.0 + (orders[0] - 1.0) / 50.0)
        b = orders[np.minimum(best + 1, orders.size - 1)]

        def eps(alphas: np.ndarray) -> np.ndarray:
            rdp = fl_rdp_real(self.run, qs, alphas)
            return epsilon_curve(alphas, rdp, log_delta, self.conversion)[:, 0]

        golden = (math.sqrt(5.0) - 1.0) / 2.0
        x1, x2 = b - golden * (b - a), a + golden * (b - a)
        f1, f2 = eps(x1), eps(x2)
        for _ in range(REFINE_STEPS):
            left = f1 <= f2  # the minimum is in [a, x2], else in [x1, b]
            a, b = np.where(left, a, x1), np.where(left, x2, b)
            x1, x2 = np.where(left, b - golden * (b - a), x2), np.where(left, x1, a + golden * (b - a))
            probe = eps(np.where(left, x1, x2))  # one new point per rate
            f1, f2 = np.where(left, probe, f2), np.where(left, f1, probe)
        return np.minimum(f1, f2)

    def assumptions(self) -> dict[str, str]:
        conversion = (
            "improved, ULDP-FL Lemma 2"
            if self.conversion == "improved"
            else "classic, eps = rho + log(1/delta)/(alpha-1) (as in the slides)"
        )
        return {
            **self.run.assumptions(),
            "delta": f"{self.delta:g}",
            "accountant": (
                "RDP (Mironov et al. 2019, binomial sum at integer orders, series at real orders); "
                "at q = 1 the exact Gaussian curve (Balle & Wang 2018)"
                if self.refine
                else "RDP (Mironov et al. 2019, binomial sum at integer orders)"
            ),
            "conversion": conversion,
            "orders": orders_description(self.orders)
            + (", refined over the real orders next to the best" if self.refine else ""),
            "bound": "every epsilon is an upper bound at this delta",
        }


def calibrate_sigma(
    run: RecordSampledFL,
    delta: float,
    budget: float,
    q_cap: float = 1.0,
    conversion: str = "improved",
    orders: np.ndarray = PERSONALIZED_ORDERS,
) -> Calibration:
    """The noise for a personalised run: the smallest sigma with epsilon*(q_cap) <= `budget`.

    With `budget` the largest of the records' budgets, that record is sampled at q_cap (or just
    below, by the rounding of sigma up to 4 significant digits) and every smaller budget gets a
    smaller rate. `run.sigma` is ignored; epsilon*(q_cap) falls as sigma grows, so the generic
    bisection of `accountants.calibrate` applies.
    """
    if not 0 < q_cap <= 1:
        raise InvalidParameter(f"q cap must be in (0, 1], got {q_cap:g}")

    def epsilon_at_cap(sigma: float) -> float:
        curve = EpsilonCurve(replace(run, sigma=sigma), delta, conversion, orders)
        return float(curve(q_cap)[0])

    return calibrate(epsilon_at_cap, budget, "sigma")
