"""Subject-level accounting across federation members: local guarantee and horizontal composition.

Marathe & Kanani, "Subject Granular Differential Privacy in Federated Learning", §3.
Each member runs T local mini-batches per round (DP-SGD style, noise multiplier sigma relative to
the per-mini-batch subject sensitivity C of HiGradAvgDP, Lemma 3.7), Poisson sampling items at
rate q; s of the N members are selected per round, for R rounds.

- Local guarantee (one member, Theorem 3.8): R x T steps of a Poisson-subsampled Gaussian, at the
  subject's rate 1 - (1 - q)^m when the member holds m of its items (`subject.subject_sampling_rate`).
- Horizontal composition (Theorem 3.9): in the worst case the members holding a subject's items
  compose sequentially. A round selects at most min(s, k) of the k members holding it, so the
  subject's release is the composition of R x T steps at each of the min(s, k) members with the
  highest rates: composed exactly here (RDP curves added; or one PLD of the composed events),
  never by adding epsilons.
- Member selection does not amplify: the server selects the members and knows who took part,
  so a member is assumed to take part in every round (the worst case of the selection).
- Theorem 3.10's rule of thumb (train R / sqrt(s) rounds to keep the local guarantee) comes from
  the asymptotic epsilon ~ q sqrt(T R s) / sigma; it is not a bound. Composition is linear in the
  steps, so keeping the local RDP curve needs R / s rounds; `rule_of_thumb` reports both.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from .account import record_level
from .calibrate import calibrate_sigma, calibrate_steps
from .composition import rdp_epsilon
from .mechanism import SubsampledGaussian
from .subject import subject_sampling_rate

ACCOUNTANTS = ("rdp", "pld")


@dataclass(frozen=True)
class FederationRun:
    """N members, s selected per round, R rounds of T local steps at item rate q, multiplier sigma."""

    members: int
    per_round: int
    rounds: int
    local_steps: int
    q: float
    sigma: float

    def __post_init__(self) -> None:
        if self.members < 1 or self.local_steps < 1 or self.rounds < 0:
            raise ValueError("members and local steps must be >= 1, rounds >= 0")
        if not 1 <= self.per_round <= self.members:
            raise ValueError(f"members per round s = {self.per_round} must be in [1, N = {self.members}]")
        if not 0 < self.q <= 1:
            raise ValueError(f"q must be in (0, 1], got {self.q}")
        if not self.sigma > 0:
            raise ValueError(f"sigma must be > 0, got {self.sigma}")

    def with_rounds(self, rounds: int) -> "FederationRun":
        return FederationRun(self.members, self.per_round, rounds, self.local_steps, self.q, self.sigma)


Composition = tuple[tuple[float, int], ...]  # (sampling rate, steps) pairs, composed sequentially


def local_composition(run: FederationRun, holding: Sequence[int]) -> Composition:
    """One member: the one holding most of the subject's items, over all R x T steps."""
    _check_holding(run, holding)
    return ((subject_sampling_rate(run.q, max(holding)), run.rounds * run.local_steps),)


def federation_composition(run: FederationRun, holding: Sequence[int]) -> Composition:
    """Worst case over member selection: each round the min(s, k) holders with most items take part."""
    _check_holding(run, holding)
    top = sorted(holding, reverse=True)[:min(run.per_round, len(holding))]
    counts = Counter(subject_sampling_rate(run.q, m) for m in top)
    return tuple((rate, n * run.rounds * run.local_steps) for rate, n in sorted(counts.items(), reverse=True))


def composed_epsilon(composition: Composition, sigma: float, delta: float, *, accountant: str = "rdp",
                     conversion: str = "improved", orders="default") -> float:
    """Epsilon of the sequential composition of Poisson-subsampled Gaussians (rate, steps)."""
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got {accountant!r}")
    parts = [(rate, steps) for rate, steps in composition if steps > 0]
    if not parts:
        return 0.0
    if accountant == "pld":
        if len(parts) == 1:  # one mechanism: the shared accountant, identical to `uldp account`
            rate, steps = parts[0]
            return record_level(SubsampledGaussian(sigma, rate, steps), delta, "pld").epsilon
        return _pld_epsilon(parts, sigma, delta)
    # Lemma 1: the RDP curves of the holders' mechanisms add up
    return rdp_epsilon([(sigma, rate, steps) for rate, steps in parts], delta, conversion, orders)


def _pld_epsilon(parts: list[tuple[float, int]], sigma: float, delta: float) -> float:
    """dp-accounting's PLD accountant (pessimistic, add-or-remove) on the composed events."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    events = [dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(sigma)), steps)
        for rate, steps in parts]
    accountant = pld_privacy_accountant.PLDAccountant()
    accountant.compose(dp_accounting.ComposedDpEvent(events))
    return float(accountant.get_epsilon(delta))


@dataclass(frozen=True)
class SubjectGuarantee:
    holding: tuple[int, ...]   # item counts at the members holding the subject
    local_epsilon: float
    federation_epsilon: float
    members_composed: int      # min(s, k): holders taking part in one round, worst case


def subject_guarantee(run: FederationRun, holding: Sequence[int], delta: float,
                      **accounting) -> SubjectGuarantee:
    """Local and federation-wide epsilon of one subject with this holding."""
    holding = tuple(sorted(holding, reverse=True))
    return SubjectGuarantee(
        holding,
        composed_epsilon(local_composition(run, holding), run.sigma, delta, **accounting),
        composed_epsilon(federation_composition(run, holding), run.sigma, delta, **accounting),
        min(run.per_round, len(holding)))


def max_rounds(run: FederationRun, holding: Sequence[int], budget: float, delta: float, *,
               federation: bool = True, **accounting) -> int:
    """The most rounds whose local (or federation-wide) epsilon stays within `budget`; 0 if none."""
    compose = federation_composition if federation else local_composition

    def epsilon_of(rounds: int) -> float:
        return composed_epsilon(compose(run.with_rounds(rounds), holding), run.sigma, delta, **accounting)

    if epsilon_of(1) > budget:
        return 0
    return int(calibrate_steps(epsilon_of, budget).value)


@dataclass(frozen=True)
class RuleOfThumb:
    """Theorem 3.10's R / sqrt(s) rounds, checked against the exact horizontal composition."""

    rounds: int                  # floor(R / sqrt(s))
    federation_epsilon: float    # exact federation-wide epsilon at those rounds
    local_epsilon: float         # the local guarantee over R rounds it is meant to keep
    holds: bool                  # federation_epsilon <= local_epsilon
    matching_rounds: int         # the most rounds whose federation epsilon <= local_epsilon


def rule_of_thumb(run: FederationRun, holding: Sequence[int], delta: float, **accounting) -> RuleOfThumb:
    local = composed_epsilon(local_composition(run, holding), run.sigma, delta, **accounting)
    rounds = math.floor(run.rounds / math.sqrt(run.per_round))
    fed = composed_epsilon(federation_composition(run.with_rounds(rounds), holding), run.sigma, delta,
                           **accounting)
    matching = max_rounds(run, holding, local, delta, **accounting) if local > 0 else 0
    return RuleOfThumb(rounds, fed, local, fed <= local, matching)


@dataclass(frozen=True)
class GroupNoise:
    """LocalGroupDP (Algorithm 2): the multiplier for groups of Z items, via Corollary 3.5."""

    z: int
    sigma: float
    item_epsilon: float      # E / Z
    item_delta: float        # Delta / (Z e^{(Z-1) E / Z})
    achieved_epsilon: float  # item-level epsilon of the returned sigma at item_delta (<= item_epsilon)


def group_noise(z: int, budget: float, delta: float, q: float, steps: int, *, accountant: str = "rdp",
                conversion: str = "improved", orders="default") -> GroupNoise:
    """sigma_Z so that `steps` DP-SGD steps at rate q are (E/Z, Delta/(Z e^{(Z-1)E/Z}))-DP per item.

    Corollary 3.5 (Theorem 3.4 read backwards, Dwork & Roth Thm 2.2 group privacy): that item-level
    guarantee implies (E, Delta) for any group of Z items. Z must bound every item of a subject at
    the member (all of them may be drawn), not only those in one mini-batch.
    """
    if z < 1:
        raise ValueError(f"group size must be >= 1, got {z}")
    item_eps = budget / z
    item_delta = delta / (z * math.exp((z - 1) * budget / z))

    def epsilon_of(sigma: float) -> float:
        return record_level(SubsampledGaussian(sigma, q, steps), item_delta, accountant, conversion,
                            orders).epsilon

    found = calibrate_sigma(epsilon_of, item_eps)
    return GroupNoise(z, found.value, item_eps, item_delta, found.epsilon)


def _check_holding(run: FederationRun, holding: Sequence[int]) -> None:
    if len(holding) == 0 or min(holding) < 1:
        raise ValueError("a subject's holding needs at least one member with at least one item")
    if len(holding) > run.members:
        raise ValueError(f"a subject held by {len(holding)} members, more than N = {run.members}")



@dataclass(frozen=True)
class RoundLimits:
    budget: float
    local: int        # most rounds with the local epsilon within the budget
    federation: int   # most rounds with the federation-wide epsilon within the budget


@dataclass(frozen=True)
class SubjectReport:
    """Every subject's guarantees, and the worst subject's rule of thumb and round limits."""

    subjects: dict[str, SubjectGuarantee]
    worst_subject: str           # largest federation-wide epsilon (ties: more holders)
    local_epsilon: float         # largest local epsilon over the subjects
    rule_of_thumb: RuleOfThumb
    limits: RoundLimits | None
    group_noise: tuple[GroupNoise, ...]

    @property
    def worst(self) -> SubjectGuarantee:
        return self.subjects[self.worst_subject]


def account_subjects(run: FederationRun, holdings: dict[str, Sequence[int]], delta: float, *,
                     budget: float | None = None, group_sizes: Sequence[int] = (),
                     progress: Callable[[str], None] | None = None, **accounting) -> SubjectReport:
    """Local and federation-wide guarantees of every subject; limits and LocalGroupDP for the worst.

    Subjects whose holdings compose alike (same busiest holder, same top-s holders) are accounted once.
    """
    if not holdings:
        raise ValueError("no subject to account")
    if group_sizes and budget is None:
        raise ValueError("LocalGroupDP group sizes need a budget E")
    say = progress or (lambda text: None)
    known: dict[tuple[int, ...], SubjectGuarantee] = {}
    subjects: dict[str, SubjectGuarantee] = {}
    for name, holding in holdings.items():
        top = tuple(sorted(holding, reverse=True))
        key = top[:run.per_round]  # all that the local and federation compositions read
        if key not in known:
            say(f"subject {name}")
            known[key] = subject_guarantee(run, top, delta, **accounting)
        subjects[name] = replace(known[key], holding=top)
    worst = max(subjects, key=lambda s: (subjects[s].federation_epsilon, len(subjects[s].holding)))
    holding = subjects[worst].holding
    say("rule of thumb")
    thumb = rule_of_thumb(run, holding, delta, **accounting)
    limits = None
    if budget is not None:
        say("most rounds")
        limits = RoundLimits(budget, max_rounds(run, holding, budget, delta, federation=False, **accounting),
                             max_rounds(run, holding, budget, delta, **accounting))
    noise = []
    for z in dict.fromkeys(group_sizes):
        say(f"LocalGroupDP Z={z}")
        noise.append(group_noise(z, budget, delta, run.q, run.rounds * run.local_steps, **accounting))
    return SubjectReport(subjects, worst, max(g.local_epsilon for g in subjects.values()), thumb, limits,
                         tuple(noise))
