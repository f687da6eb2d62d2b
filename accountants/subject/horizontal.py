"""Subject-level accounting across federation members: local guarantee and horizontal composition.

Marathe & Kanani, "Subject Granular Differential Privacy in Federated Learning", §3.
Each member runs T local mini-batches per round (DP-SGD style, noise multiplier sigma relative to
the per-mini-batch subject sensitivity C of HiGradAvgDP, Lemma 3.7), Poisson sampling items at
rate q; s of the N members are selected per round, for R rounds.

- Local guarantee (per member, Theorem 3.8): R x T steps of a Poisson-subsampled Gaussian, at the
  subject's rate 1 - (1 - q)^m when the member holds m of its items (`holdings.subject_sampling_rate`).
  It is "locally enforced" in the paper's sense: the subject's items at one member change, every
  other member's data fixed. A member's updates carry the global model, which depends on the
  subject's items at the other members, so it is a Definition 2.3 (subject-level) bound only for
  a subject held by one member; the federation-wide guarantee is the bound for the others.
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
- Over several subjects (`account_subjects`) the round limits are the least over their holdings:
  the subject with the largest epsilon at R rounds need not bind them (RDP curves cross).
- LocalGroupDP and LocalItemDP (DP-SGD: per-item clipping, the clipped gradients summed) draw
  each of a member's m items of the subject on its own at rate q, so one mini-batch moves the
  noised sum by B C, B ~ Binomial(m, q): the group-of-k step of `accountants.tight.pld` with k = m
  (a `MixturePart`). PLD accounts that mixture exactly (`mixture_pld_epsilon`, the group PLD's
  step); RDP bounds it by m steps of a Poisson-subsampled Gaussian of multiplier sigma / sqrt(m)
  (`MixturePart`'s docstring). The older bound, multiplier sigma / m at rate 1 - (1 - q)^m (an
  m C shift whichever items are drawn), is kept as a cross-check (`sensitivity_bound`).
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from uldp.errors import InvalidParameter

from ..account import record_level
from ..calibrate import calibrate, most_steps
from ..events import Composed, SubsampledGaussian, check_tight_sigma
from ..orders import integer_orders
from ..registry import account_event
from .holdings import subject_sampling_rate

ACCOUNTANTS = ("rdp", "pld")

#: The subject-level algorithms whose release one member's mini-batch makes (§3.1-3.3), by what
#: a subject holding m items there can move one noised mini-batch sum, in units of C:
#: HiGradAvgDP averages a subject's clipped gradients (Lemma 3.7): C. UserLDP clips the whole
#: mini-batch's gradient (Lemma 3.2) and a subject's items can turn it into any other vector of
#: norm <= C: 2C (the replacement bound; Lemma 3.2 states C, which holds only against an empty
#: batch). LocalGroupDP and LocalItemDP (DP-SGD) sum per-item clipped gradients: m C, B C when B
#: of the m are drawn (`MixturePart` accounts that mixture).
MECHANISMS = ("higradavgdp", "userldp", "localgroupdp", "localitemdp")


def subject_sensitivity(mechanism: str, items: int) -> float:
    """A subject's per-mini-batch sensitivity, in units of C, at a member holding `items` of its items."""
    if mechanism == "higradavgdp":
        return 1.0
    if mechanism == "userldp":
        return 2.0
    if mechanism in ("localgroupdp", "localitemdp"):
        return float(items)
    raise InvalidParameter(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")


@dataclass(frozen=True)
class FederationRun:
    """N members, s selected per round, R rounds of T local steps at item rate q, multiplier sigma,
    each step the `mechanism` of one of the subject-level algorithms (`MECHANISMS`)."""

    members: int
    per_round: int
    rounds: int
    local_steps: int
    q: float
    sigma: float
    mechanism: str = "higradavgdp"

    def __post_init__(self) -> None:
        if self.members < 1 or self.local_steps < 1 or self.rounds < 0:
            raise InvalidParameter("members and local steps must be >= 1, rounds >= 0")
        if not 1 <= self.per_round <= self.members:
            raise InvalidParameter(
                f"members per round s = {self.per_round} must be in [1, N = {self.members}]"
            )
        if not 0 < self.q <= 1:
            raise InvalidParameter(f"q must be in (0, 1], got {self.q}")
        if not self.sigma > 0:
            raise InvalidParameter(f"sigma must be > 0, got {self.sigma}")
        subject_sensitivity(self.mechanism, 1)  # a known mechanism

    def with_rounds(self, rounds: int) -> FederationRun:
        return replace(self, rounds=rounds)


#: The mechanisms whose mini-batch sums a subject's clipped per-item gradients (DP-SGD): each of
#: its items at a member is drawn on its own, so the shift is Binomial(m, q) C (`MixturePart`).
SUMMED = ("localgroupdp", "localitemdp")


class MixturePart(NamedTuple):
    """`steps` mini-batches of a member holding `items` of the subject's items, each drawn on its
    own at rate `q` (Poisson sampling) and each moving the noised sum by at most C, the
    contributions summed (LocalGroupDP, LocalItemDP): a step's shift is B C, B ~ Binomial(items, q).

    Worst case, the clipped contributions are aligned at full norm, and a mixture of Gaussians
    with vector shifts is dominated by the one with scalar shifts of their norms (Choquette-Choo,
    Ganesh, Steinke, Thakurta 2024, arXiv 2310.15526, Cor. 4.7): MixtureOfGaussiansDpEvent(sigma,
    [0..m], Binomial(m, q).pmf), the group-of-k step of `accountants.tight.pld` with k = m, which PLD
    accounts exactly. RDP bounds it by `as_run`: the step's noise N(0, sigma^2 C^2) is the sum of
    m independent N(0, sigma^2 C^2 / m), so the step is a post-processing (the sum, plus the rest
    of the batch, which the subject does not touch) of m releases, item i's clipped gradient if
    drawn plus its own share of the noise: m Poisson-subsampled Gaussians at rate q of multiplier
    sigma / sqrt(m), composed (Lemma 1).
    """

    q: float
    steps: int
    items: int

    def as_run(self, sigma: float) -> SubsampledGaussian:
        """The RDP bound: m steps of multiplier sigma / sqrt(m) at rate q per mini-batch."""
        return SubsampledGaussian(sigma / math.sqrt(self.items), self.q, self.items * self.steps)


#: (sampling rate, steps) pairs, or (sampling rate, steps, sensitivity in units of C) where the
#: sensitivity is not 1, or `MixturePart`s (LocalGroupDP, LocalItemDP), composed sequentially.
Composition = tuple[tuple[float, ...], ...]


def local_composition(run: FederationRun, holding: Sequence[int]) -> Composition:
    """One member: the one holding most of the subject's items, over all R x T steps."""
    _check_holding(run, holding)
    return (_part(run, max(holding), run.rounds * run.local_steps),)


def federation_composition(run: FederationRun, holding: Sequence[int]) -> Composition:
    """Worst case over member selection: each round the min(s, k) holders with most items take part."""
    _check_holding(run, holding)
    top = sorted(holding, reverse=True)[: min(run.per_round, len(holding))]
    counts = Counter(top)
    return tuple(
        _part(run, m, n * run.rounds * run.local_steps) for m, n in sorted(counts.items(), reverse=True)
    )


def _part(run: FederationRun, items: int, steps: int) -> tuple[float, ...]:
    """`steps` mini-batches of a member holding `items` of the subject's items: drawn at
    1 - (1 - q)^m (Poisson sampling), moving the noised sum by the mechanism's sensitivity; for
    the mechanisms that sum per-item contributions, the Binomial(m, q) mixture (`MixturePart`)."""
    if run.mechanism in SUMMED:
        return MixturePart(run.q, steps, items)
    rate = subject_sampling_rate(run.q, items)
    sensitivity = subject_sensitivity(run.mechanism, items)
    return (rate, steps) if sensitivity == 1 else (rate, steps, sensitivity)


def composition_event(composition: Composition, sigma: float) -> Composed | None:
    """The release of a composition: one sub-sampled Gaussian per (rate, steps[, sensitivity])
    part with steps, its multiplier sigma / sensitivity; None when no part takes a step.

    A sensitivity s > 1 is the mixture argument of the Poisson-subsampled Gaussian (Mironov et
    al. 2019) with mean shifts of norm <= s C: whichever of the subject's items are drawn, the
    sum moves by at most s C, and joint quasi-convexity of the Renyi divergence over those
    mixtures leaves one sub-sampled Gaussian of multiplier sigma / s.
    """
    parts = tuple(
        part.as_run(sigma)
        if isinstance(part, MixturePart)
        else SubsampledGaussian(sigma / (part[2] if len(part) > 2 else 1.0), part[0], int(part[1]))
        for part in composition
        if part[1] > 0
    )
    return Composed(parts) if parts else None


def sensitivity_bound(composition: Composition) -> Composition:
    """The composition with each `MixturePart` bounded as before the mixture was accounted (the
    cross-check): the subject drawn at 1 - (1 - q)^m, the sum moved by m C whichever items are
    drawn (multiplier sigma / m). Valid, and loose for m > 1."""
    return tuple(
        (subject_sampling_rate(part.q, part.items), part.steps, float(part.items))
        if isinstance(part, MixturePart)
        else part
        for part in composition
    )


def user_ldp_epsilon(
    run: FederationRun,
    delta: float,
    *,
    accountant: str = "rdp",
    conversion: str = "improved",
    orders="default",
) -> float:
    """UserLDP's user-level local DP (Theorem 3.3, Definition 3.1): a member's whole data set
    replaced by another's, R x T Gaussian steps (no sub-sampling amplification: every mini-batch
    is the member's) of multiplier sigma / 2 (two clipped batch gradients differ by <= 2C).
    Theorem 3.1: it implies subject-level DP at that member for any subject."""
    if run.mechanism != "userldp":
        raise InvalidParameter(f"user-level LDP is UserLDP's guarantee, not {run.mechanism}'s")
    return composed_epsilon(
        ((1.0, run.rounds * run.local_steps, 2.0),),
        run.sigma,
        delta,
        accountant=accountant,
        conversion=conversion,
        orders=orders,
    )


def maximal_holdings(holdings: Mapping[str, Sequence[int]], per_round: int) -> dict[str, tuple[int, ...]]:
    """The holdings no other holding dominates, one subject named for each.

    Every mechanism's epsilon grows with each holder's items (a higher rate 1 - (1 - q)^m, a
    sensitivity that does not fall), so a subject whose s busiest holders hold, one by one, no
    more than another subject's spends no more, locally or federation-wide: the worst subject
    is among these. The local guarantee reads the busiest holder only, which the dominance
    keeps too (the largest count's holding is never dominated strictly).
    """
    keyed: dict[tuple[int, ...], str] = {}
    for name, holding in holdings.items():
        key = tuple(sorted(holding, reverse=True))[:per_round]
        keyed.setdefault(key, name)
    keys = sorted(keyed, key=lambda k: (-sum(k), k))
    kept: list[tuple[int, ...]] = []
    for key in keys:
        if not any(_dominates(other, key) for other in kept):
            kept.append(key)
    return {keyed[key]: key for key in kept}


def _dominates(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """a's i-th largest count >= b's for every i (missing counts are 0)."""
    return len(a) >= len(b) and all(x >= y for x, y in zip(a, b))


@dataclass(frozen=True)
class HeldGuarantee:
    """The worst subject's guarantees over the holdings actually held."""

    local_epsilon: float  # the largest local (per member) epsilon
    local_subject: str
    federation_epsilon: float  # the largest federation-wide epsilon
    federation_subject: str


def worst_held(
    run: FederationRun, holdings: Mapping[str, Sequence[int]], delta: float, **accounting
) -> HeldGuarantee:
    """The largest local and federation-wide epsilon over the subjects of `holdings` (only the
    maximal holdings are accounted: `maximal_holdings`); what `uldp train` prints each round and
    what `uldp subject --holdings` prints for the same run."""
    if not holdings:
        raise InvalidParameter("no subject to account")
    maximal = maximal_holdings(holdings, run.per_round)
    local_name = max(maximal, key=lambda name: maximal[name][0])
    local = composed_epsilon(local_composition(run, maximal[local_name]), run.sigma, delta, **accounting)
    compositions = {name: federation_composition(run, h) for name, h in maximal.items()}
    fed_name, fed = _largest(compositions, run.sigma, delta, accounting, lambda name: len(maximal[name]))
    return HeldGuarantee(local, local_name, fed, fed_name)


def _largest(
    compositions: dict[str, Composition],
    sigma: float,
    delta: float,
    accounting: dict,
    tie: Callable[[str], int],
) -> tuple[str, float]:
    """The composition with the largest epsilon, and that epsilon, exactly as `composed_epsilon`
    gives it, with few exact evaluations: with the RDP accountant and its default orders each is
    first bounded at the default set's integer orders (`orders.integer_orders`: a subset, so an
    upper bound, and fast), then evaluated exactly from the largest bound down until the next
    bound falls below the largest exact epsilon found."""
    if (
        len(compositions) == 1
        or accounting.get("accountant", "rdp") != "rdp"
        or accounting.get("orders", "default") != "default"
    ):
        exact = {name: composed_epsilon(c, sigma, delta, **accounting) for name, c in compositions.items()}
        name = max(exact, key=lambda n: (exact[n], tie(n)))
        return name, exact[name]
    subset = {**accounting, "orders": integer_orders()}  # a subset of the orders: an upper bound
    bounds = {name: _grid_epsilon(c, sigma, delta, subset) for name, c in compositions.items()}
    best_name, best = "", -1.0
    for name in sorted(bounds, key=lambda n: (-bounds[n], -tie(n))):
        if bounds[name] < best:
            break
        value = composed_epsilon(compositions[name], sigma, delta, **accounting)
        if value > best or (value == best and tie(name) > tie(best_name)):
            best_name, best = name, value
    return best_name, best


def _grid_epsilon(composition: Composition, sigma: float, delta: float, accounting: dict) -> float:
    event = composition_event(composition, sigma)
    if event is None:
        return 0.0
    return account_event(event, delta, **accounting).epsilon


def composed_epsilon(
    composition: Composition,
    sigma: float,
    delta: float,
    *,
    accountant: str = "rdp",
    conversion: str = "improved",
    orders="default",
    real_orders: bool = True,
) -> float:
    """Epsilon of the sequential composition of Poisson-subsampled Gaussians (rate, steps).

    RDP: the holders' curves add (Lemma 1); PLD: one PLD of the composed events, which for one
    holder is exactly `uldp account --accountant pld`. `MixturePart`s: by PLD the exact mixture
    (`mixture_pld_epsilon`), by RDP `MixturePart.as_run`.
    """
    _check_accountant(accountant)
    if accountant == "pld" and any(isinstance(part, MixturePart) for part in composition):
        return mixture_pld_epsilon(composition, sigma, delta)
    event = composition_event(composition, sigma)
    if event is None:
        return 0.0
    options = {} if real_orders else {"real_orders": False}  # grid orders only: a looser bound, faster
    return account_event(event, delta, accountant, conversion=conversion, orders=orders, **options).epsilon


@dataclass(frozen=True)
class SubjectGuarantee:
    holding: tuple[int, ...]  # item counts at the members holding the subject
    local_epsilon: float
    federation_epsilon: float
    members_composed: int  # min(s, k): holders taking part in one round, worst case
    # LocalGroupDP and LocalItemDP with m > 1 items at a holder: the same two figures by the older
    # sensitivity-m bound (`sensitivity_bound`), a cross-check never below them; None otherwise.
    local_cross_check: float | None = None
    federation_cross_check: float | None = None


def subject_guarantee(
    run: FederationRun, holding: Sequence[int], delta: float, **accounting
) -> SubjectGuarantee:
    """Local and federation-wide epsilon of one subject with this holding (and, where the
    mixture is accounted, the sensitivity-m cross-check of both)."""
    holding = tuple(sorted(holding, reverse=True))
    local, federation = local_composition(run, holding), federation_composition(run, holding)
    local_epsilon = composed_epsilon(local, run.sigma, delta, **accounting)
    federation_epsilon = composed_epsilon(federation, run.sigma, delta, **accounting)
    check: tuple[float | None, float | None] = (None, None)
    if run.mechanism in SUMMED and max(holding) > 1:
        try:
            check = (
                composed_epsilon(sensitivity_bound(local), run.sigma, delta, **accounting),
                composed_epsilon(sensitivity_bound(federation), run.sigma, delta, **accounting),
            )
        except InvalidParameter:
            pass  # PLD cannot resolve sigma / m (a tiny multiplier): no cross-check, the figures stand
    return SubjectGuarantee(
        holding, local_epsilon, federation_epsilon, min(run.per_round, len(holding)), *check
    )


def max_rounds(
    run: FederationRun,
    holding: Sequence[int],
    budget: float,
    delta: float,
    *,
    federation: bool = True,
    **accounting,
) -> int:
    """The most rounds whose local (or federation-wide) epsilon stays within `budget`; 0 if none."""
    compose = federation_composition if federation else local_composition
    _check_accountant(accounting.get("accountant", "rdp"))

    def spent(rounds: int) -> float:
        return composed_epsilon(compose(run.with_rounds(rounds), holding), run.sigma, delta, **accounting)

    return most_steps(spent, budget)


@dataclass(frozen=True)
class RuleOfThumb:
    """Theorem 3.10's R / sqrt(s) rounds, checked against the exact horizontal composition."""

    rounds: int  # floor(R / sqrt(s))
    federation_epsilon: float  # exact federation-wide epsilon at those rounds
    local_epsilon: float  # the local guarantee over R rounds it is meant to keep
    holds: bool  # federation_epsilon <= local_epsilon
    matching_rounds: int  # the most rounds whose federation epsilon <= local_epsilon
    subject: str | None = None  # over several subjects: the one whose matching_rounds is smallest


def rule_of_thumb(run: FederationRun, holding: Sequence[int], delta: float, **accounting) -> RuleOfThumb:
    local = composed_epsilon(local_composition(run, holding), run.sigma, delta, **accounting)
    rounds = math.floor(run.rounds / math.sqrt(run.per_round))
    fed = composed_epsilon(
        federation_composition(run.with_rounds(rounds), holding), run.sigma, delta, **accounting
    )
    matching = max_rounds(run, holding, local, delta, **accounting) if local > 0 else 0
    return RuleOfThumb(rounds, fed, local, fed <= local, matching)


@dataclass(frozen=True)
class GroupNoise:
    """LocalGroupDP (Algorithm 2): the multiplier for groups of Z items, via Corollary 3.5."""

    z: int
    sigma: float
    item_epsilon: float  # E / Z
    item_delta: float  # Delta / (Z e^{(Z-1) E / Z})
    achieved_epsilon: float  # item-level epsilon of the returned sigma at item_delta (<= item_epsilon)


def group_noise(
    z: int,
    budget: float,
    delta: float,
    q: float,
    steps: int,
    *,
    accountant: str = "rdp",
    conversion: str = "improved",
    orders="default",
) -> GroupNoise:
    """sigma_Z so that `steps` DP-SGD steps at rate q are (E/Z, Delta/(Z e^{(Z-1)E/Z}))-DP per item.

    Corollary 3.5 (Theorem 3.4 read backwards, Dwork & Roth Thm 2.2 group privacy): that item-level
    guarantee implies (E, Delta) for any group of Z items. Z must bound every item of a subject at
    the member (all of them may be drawn), not only those in one mini-batch.
    """
    if z < 1:
        raise InvalidParameter(f"group size must be >= 1, got {z}")
    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    item_eps = budget / z
    # In logs: e^((Z-1)E/Z) overflows a float for a large E long before the item delta underflows.
    log_item_delta = math.log(delta) - math.log(z) - (z - 1) * budget / z
    item_delta = math.exp(log_item_delta)
    if item_delta < sys.float_info.min:
        raise InvalidParameter(
            f"--epsilon {budget:g} with --k {z}: LocalGroupDP's item delta "
            f"Delta / (Z e^((Z-1)E/Z)) = e^{log_item_delta:.6g} underflows a float; "
            "use a smaller --epsilon or group size"
        )

    def epsilon_of(sigma: float) -> float:
        return record_level(
            SubsampledGaussian(sigma, q, steps), item_delta, accountant, conversion, orders
        ).epsilon

    found = calibrate(epsilon_of, item_eps, "sigma")
    return GroupNoise(z, found.value, item_eps, item_delta, found.epsilon)


def mixture_pld_epsilon(composition: Composition, sigma: float, delta: float) -> float:
    """Epsilon at `delta` of a composition with `MixturePart`s by PLD: each part the exact
    Binomial(m, q) mixture of Gaussians (the group-of-k step of `accountants.tight.pld` with k = m,
    pessimistic, both directions of add-or-remove), self-composed over its steps, the parts
    composed on one grid (adaptive composition of dominating pairs).

    The grid is the finest of the parts' `pld._default_discretization` (the group PLD's rule),
    rounded down to a power of 2 so that the local and federation-wide figures, and the parts,
    share their step PLDs (a finer grid is only more accurate).
    """
    from ..events import MAX_PLD_GROUP_K
    from ..tight.pld import MAX_STEPS, _default_discretization, _unit_pld

    if not 0 < delta < 1:
        raise InvalidParameter(f"delta must be in (0, 1), got {delta}")
    parts = [_as_mixture(part) for part in composition if part[1] > 0]
    if not parts:
        return 0.0
    check_tight_sigma([SubsampledGaussian(sigma, parts[0].q, 1)], "pld")
    most = max(part.items for part in parts)
    if most > MAX_PLD_GROUP_K:
        raise InvalidParameter(
            f"the PLD accountant serves subjects with up to {MAX_PLD_GROUP_K} items at one member, "
            f"got {most}; use --accountant rdp"
        )
    if sum(part.steps for part in parts) > MAX_STEPS:
        raise InvalidParameter(f"the PLD accountant handles up to {MAX_STEPS:.0e} steps; use 'rdp'")
    finest = min(
        _default_discretization(SubsampledGaussian(sigma, part.q, part.steps), (part.items,))
        for part in parts
    )
    grid = 2.0 ** math.floor(math.log2(finest))
    composed = None
    try:
        for part in parts:
            run = _unit_pld(SubsampledGaussian(sigma, part.q, part.steps), part.items, grid)
            composed = run if composed is None else composed.compose(run)
    except OverflowError:
        # dp-accounting's mixture PLD exponentiates the loss, about m^2 / (2 sigma^2).
        raise InvalidParameter(
            f"the PLD accountant overflows for a subject with {most} items at one member at "
            f"sigma = {sigma:g}; use --accountant rdp"
        ) from None
    assert composed is not None  # `parts` is not empty
    return float(composed.get_epsilon_for_delta(delta))


def _as_mixture(part: tuple[float, ...]) -> MixturePart:
    if isinstance(part, MixturePart):
        return part
    raise InvalidParameter("a PLD mixture composition takes MixtureParts only")  # one mechanism per run


def _check_accountant(accountant: str) -> None:
    """Only accountants that compose holders' runs (prv accounts one run at a time)."""
    if accountant not in ACCOUNTANTS:
        raise InvalidParameter(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got {accountant!r}")


def _check_holding(run: FederationRun, holding: Sequence[int]) -> None:
    if len(holding) == 0 or min(holding) < 1:
        raise InvalidParameter("a subject's holding needs at least one member with at least one item")
    if len(holding) > run.members:
        raise InvalidParameter(f"a subject held by {len(holding)} members, more than N = {run.members}")


@dataclass(frozen=True)
class RoundLimits:
    """The most rounds within a budget, for every subject: the minimum over their holdings."""

    budget: float
    local: int  # most rounds with every subject's local epsilon within the budget
    federation: int  # most rounds with every subject's federation-wide epsilon within it
    local_subject: str  # a subject whose local limit is `local`
    federation_subject: str  # a subject whose federation-wide limit is `federation`


@dataclass(frozen=True)
class SubjectReport:
    """Every subject's guarantees; the round limits and rule of thumb hold for all of them."""

    subjects: dict[str, SubjectGuarantee]
    worst_subject: str  # largest federation-wide epsilon at R (ties: more holders)
    local_subject: str  # largest local epsilon at R (ties: more items at one member)
    rule_of_thumb: RuleOfThumb  # the subject with the fewest rounds keeping its own local epsilon
    limits: RoundLimits | None
    group_noise: tuple[GroupNoise, ...]

    @property
    def worst(self) -> SubjectGuarantee:
        return self.subjects[self.worst_subject]

    @property
    def local_epsilon(self) -> float:
        """The largest local epsilon over the subjects."""
        return self.subjects[self.local_subject].local_epsilon

    @property
    def max_items(self) -> int:
        """The most items one subject has at one member (LocalGroupDP's Z must reach it)."""
        return max(self.subjects[self.local_subject].holding)


def account_subjects(
    run: FederationRun,
    holdings: dict[str, Sequence[int]],
    delta: float,
    *,
    budget: float | None = None,
    group_sizes: Sequence[int] = (),
    progress: Callable[[str], None] | None = None,
    **accounting,
) -> SubjectReport:
    """Local and federation-wide guarantees of every subject; round limits and rule of thumb for all.

    Subjects whose holdings compose alike (same busiest holder, same top-s holders) are accounted
    once. The subject with the largest epsilon at R rounds need not bind the round limits: another
    subject's local epsilon can be larger, and RDP curves of different holdings cross as the
    rounds change. So each limit is the minimum over the distinct holdings (local: of the local
    limits; federation-wide: of the federation-wide limits), and the rule of thumb is read for the
    subject with the fewest rounds keeping its own local epsilon: R / sqrt(s) keeps every
    subject's local epsilon exactly when it keeps that subject's.
    """
    if not holdings:
        raise InvalidParameter("no subject to account")
    if group_sizes and budget is None:
        raise InvalidParameter("LocalGroupDP group sizes need a budget E")
    say = progress or (lambda text: None)
    known: dict[tuple[int, ...], SubjectGuarantee] = {}
    first: dict[tuple[int, ...], str] = {}  # one subject named for each distinct holding
    subjects: dict[str, SubjectGuarantee] = {}
    for name, holding in holdings.items():
        top = tuple(sorted(holding, reverse=True))
        key = top[: run.per_round]  # all that the local and federation compositions read
        if key not in known:
            say(f"subject {name}")
            known[key] = subject_guarantee(run, top, delta, **accounting)
            first[key] = name
        subjects[name] = replace(known[key], holding=top)
    worst = max(subjects, key=lambda s: (subjects[s].federation_epsilon, len(subjects[s].holding)))
    busiest = max(subjects, key=lambda s: (subjects[s].local_epsilon, max(subjects[s].holding)))
    distinct = [(first[key], g) for key, g in known.items()]
    say("rule of thumb")
    thumb = _binding_rule_of_thumb(run, distinct, delta, accounting)
    limits = None
    if budget is not None:
        say("most rounds")
        local, local_name = _binding_limit(run, distinct, budget, delta, False, accounting)
        fed, fed_name = _binding_limit(run, distinct, budget, delta, True, accounting)
        limits = RoundLimits(budget, local, fed, local_name, fed_name)
    noise = []
    for z in dict.fromkeys(group_sizes):
        assert budget is not None  # checked above: group sizes need a budget
        say(f"LocalGroupDP Z={z}")
        noise.append(group_noise(z, budget, delta, run.q, run.rounds * run.local_steps, **accounting))
    return SubjectReport(subjects, worst, busiest, thumb, limits, tuple(noise))


def _binding_limit(
    run: FederationRun,
    distinct: list[tuple[str, SubjectGuarantee]],
    budget: float,
    delta: float,
    federation: bool,
    accounting: dict,
) -> tuple[int, str]:
    """The least max_rounds over the holdings, and a subject that has it.

    Epsilon grows with the rounds, so a holding within the budget at the least limit found so far
    has a limit at least as large and needs no search (one evaluation instead of a bisection).
    Starting from the largest epsilon at R makes that the common case.
    """
    compose = federation_composition if federation else local_composition
    at_r = (lambda g: g.federation_epsilon) if federation else (lambda g: g.local_epsilon)
    best: int | None = None
    name = ""
    for subject, g in sorted(distinct, key=lambda item: -at_r(item[1])):
        if (
            best is not None
            and composed_epsilon(compose(run.with_rounds(best), g.holding), run.sigma, delta, **accounting)
            <= budget
        ):
            continue
        rounds = max_rounds(run, g.holding, budget, delta, federation=federation, **accounting)
        if best is None or rounds < best:
            best, name = rounds, subject
    assert best is not None  # `distinct` holds at least one holding
    return best, name


def _binding_rule_of_thumb(
    run: FederationRun, distinct: list[tuple[str, SubjectGuarantee]], delta: float, accounting: dict
) -> RuleOfThumb:
    """Theorem 3.10's check for the subject with the fewest rounds keeping its own local epsilon.

    A holding keeps its local epsilon (at R rounds) for r rounds iff r <= its matching_rounds, so
    R / sqrt(s) keeps every subject's iff it keeps this subject's. Each subject is compared with
    its own local epsilon; a subject's federation epsilon is never judged against another's.
    """
    best: int | None = None
    by_ratio = sorted(
        distinct,
        key=lambda item: (
            -(item[1].federation_epsilon / item[1].local_epsilon if item[1].local_epsilon > 0 else 0.0)
        ),
    )
    for subject, g in by_ratio:
        if (
            best is not None
            and composed_epsilon(
                federation_composition(run.with_rounds(best), g.holding), run.sigma, delta, **accounting
            )
            <= g.local_epsilon
        ):
            continue  # keeps its local epsilon for at least `best` rounds
        rounds = (
            max_rounds(run, g.holding, g.local_epsilon, delta, **accounting) if g.local_epsilon > 0 else 0
        )
        if best is None or rounds < best:
            best, name, binding = rounds, subject, g
    assert best is not None and binding is not None  # `distinct` holds at least one holding
    thumb_rounds = math.floor(run.rounds / math.sqrt(run.per_round))
    fed = composed_epsilon(
        federation_composition(run.with_rounds(thumb_rounds), binding.holding), run.sigma, delta, **accounting
    )
    return RuleOfThumb(thumb_rounds, fed, binding.local_epsilon, fed <= binding.local_epsilon, best, name)
