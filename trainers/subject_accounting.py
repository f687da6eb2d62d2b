"""Subject-level accounting of a training run (issue 16; Marathe & Kanani §3).

A subject is one of the data's users (a person), a member one of its silos. Before the run,
`prepare_subject_run` fixes what the accounting needs: the items' sampling rate q, the noise
(given, or calibrated so that the worst subject's federation-wide epsilon after R rounds meets
`--epsilon`; LocalItemDP's item-level epsilon), and for LocalGroupDP the group size Z (items of
one subject at one member beyond Z are dropped) and the per-member budget E whose Corollary 3.5
noise sigma_Z it trains with. After every round, `SubjectAccounting.row` gives the worst
subject's per-member (local) and federation-wide (horizontal composition, Theorem 3.9) epsilon
over the holdings the data actually has, by `accountants.subject.horizontal.worst_held`, the code `uldp
subject --holdings` runs; LocalItemDP and LocalGroupDP add their item-level epsilon, UserLDP its
user-level LDP (Theorem 3.3). A subject's m items at a LocalItemDP or LocalGroupDP member are
accounted as the Binomial(m, q) mixture of their draws (`horizontal.MixturePart`), whose RDP
curve is one sub-sampled Gaussian's (`rdp.curves.step_rdp`, cached per multiplier and rate): a round
costs what it did before. No torch.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass

import numpy as np

from uldp.accountants.calibrate import calibrate
from uldp.accountants.events import SubsampledGaussian
from uldp.accountants.orders import integer_orders
from uldp.accountants.plan import dp_sgd_rate
from uldp.accountants.registry import account_event
from uldp.accountants.subject.horizontal import (
    FederationRun,
    GroupNoise,
    HeldGuarantee,
    group_noise,
    user_ldp_epsilon,
    worst_held,
)
from uldp.errors import InvalidParameter, UnreachableBudget

#: The accounting every figure of a run uses (what `uldp subject` defaults to).
ACCOUNTING = {"accountant": "rdp", "conversion": "improved", "orders": "default"}


def holdings_of(data) -> dict[str, list[int]]:
    """Each subject's item counts at the members holding it (the run's training records)."""
    counts = data.user_silo_counts()  # (members, subjects)
    out = {}
    for subject in np.flatnonzero(counts.sum(axis=0)):
        column = counts[:, subject]
        out[str(subject)] = sorted((int(c) for c in column if c > 0), reverse=True)
    return out


def item_rate(data, batch_size: int) -> float:
    """q = min(1, B / the smallest member's size): every member keeps each item with this
    probability, so the smallest member's expected batch is B (one rate for all members, as
    `uldp subject --record-q` takes)."""
    sizes = np.bincount(data.silo_train, minlength=data.n_silos)
    sizes = sizes[sizes > 0]
    if sizes.size == 0:
        raise InvalidParameter("no member holds a training item")
    if batch_size < 1:
        raise InvalidParameter(f"batch size must be >= 1, got {batch_size}")
    return dp_sgd_rate(batch_size, int(sizes.min()))


def group_size(data, group_k: int | str) -> int:
    """LocalGroupDP's Z: given, or `max` (the most items one subject has at one member) or
    `median` (of the subjects' item counts at the members holding them, rounded up)."""
    if isinstance(group_k, int) and not isinstance(group_k, bool):
        if group_k < 1:
            raise InvalidParameter(f"group-k must be >= 1, got {group_k}")
        return group_k
    counts = data.user_silo_counts()
    held = counts[counts > 0]
    if group_k == "max":
        return int(held.max())
    if group_k == "median":
        return int(math.ceil(float(np.median(held))))
    raise InvalidParameter(f"group-k must be an integer >= 1, max or median, got {group_k!r}")


def cap_items(data, z: int, seed: int):
    """`data` with at most z items of each subject at each member, the kept ones drawn at random
    (`seed`, a public choice); the others are not trained on. Z then bounds every subject's
    items at a member, which Corollary 3.5 needs (all of them may be drawn)."""
    rng = np.random.default_rng([seed, 0x5A])
    key = data.silo_train * data.n_users + data.user_train
    order = rng.permutation(len(key))
    ranked = order[np.argsort(key[order], kind="stable")]  # each (member, subject) group, shuffled
    sorted_key = key[ranked]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_key)) + 1]
    position = np.arange(len(ranked)) - np.repeat(starts, np.diff(np.r_[starts, len(ranked)]))
    keep = np.sort(ranked[position < z])
    if len(keep) == len(key):
        return data
    return dataclasses.replace(
        data,
        x_train=data.x_train[keep],
        y_train=data.y_train[keep],
        user_train=data.user_train[keep],
        silo_train=data.silo_train[keep],
        record_index=None if data.record_index is None else data.record_index[keep],
        allocation={**data.allocation, "group_k": z},
    )


@dataclass(frozen=True)
class SubjectSetup:
    """What `prepare_subject_run` fixed: the noise, the rate, and LocalGroupDP's Z and E."""

    sigma: float
    item_q: float
    target: float | None  # --epsilon the noise was calibrated for; None: --sigma given
    z: int | None = None  # LocalGroupDP
    group: GroupNoise | None = None  # LocalGroupDP: Corollary 3.5's (E/Z, Delta/(Z e^((Z-1)E/Z))) and sigma_Z
    dropped: int = 0  # LocalGroupDP: items beyond Z not trained on


def federation_run(
    algo: str, data, *, sigma: float, item_q: float, rounds: int, local_steps: int
) -> FederationRun:
    """The run as `accountants.subject.horizontal` describes it: every member every round."""
    return FederationRun(data.n_silos, data.n_silos, rounds, local_steps, item_q, sigma, algo)


#: What the calibrations search with: the default grid's integer orders only (RDP at an integer
#: order is a closed sum, at a fractional one a slow series: a search tries ~20 sigmas for every
#: distinct holder's rate). It bounds the printed figure from above (that one also tries the
#: fractional and real orders), so a sigma found meets the target; the few percent of budget
#: left unspent are shown by the run's own epsilon.
SEARCH = {**ACCOUNTING, "orders": integer_orders()}


def headline_epsilon(algo: str, run: FederationRun, holdings: dict, delta: float, accounting=None) -> float:
    """The figure `--epsilon` targets: the worst subject's federation-wide epsilon; LocalItemDP's
    item-level epsilon (its own guarantee, the paper's baseline)."""
    accounting = accounting or ACCOUNTING
    if algo == "localitemdp":
        return item_epsilon(run, delta, accounting)
    return worst_held(run, holdings, delta, **accounting).federation_epsilon


def item_epsilon(run: FederationRun, delta: float, accounting=None) -> float:
    """Item-level epsilon of one member's R x T DP-SGD steps at q (members hold disjoint items,
    so this is also the federation's)."""
    if run.rounds == 0:
        return 0.0
    event = SubsampledGaussian(run.sigma, run.q, run.rounds * run.local_steps)
    return account_event(event, delta, **(accounting or ACCOUNTING)).epsilon


def prepare_subject_run(
    data,
    algo: str,
    *,
    epsilon: float | None,
    sigma: float | None,
    group_k: int | str,
    batch_size: int,
    local_steps: int,
    rounds: int,
    delta: float,
    seed: int,
):
    """(data, SubjectSetup): LocalGroupDP's data capped at Z items per subject and member; the
    noise given, or calibrated to `epsilon` (the smallest sigma meeting it, re-accounted)."""
    if epsilon is not None and not epsilon > 0:
        raise InvalidParameter(f"--epsilon must be > 0, got {epsilon:g}")
    if (epsilon is None) == (sigma is None):
        raise InvalidParameter(f"{algo} needs one of --sigma or --epsilon (a target to calibrate sigma to)")
    z = None
    dropped = 0
    if algo == "localgroupdp":
        if epsilon is None:
            raise InvalidParameter(
                "localgroupdp's noise sigma_Z comes from its budget (Corollary 3.5): give --epsilon, "
                "not --sigma"
            )
        z = group_size(data, group_k)
        before = len(data.y_train)
        data = cap_items(data, z, seed)
        dropped = before - len(data.y_train)
    q = item_rate(data, batch_size)
    holdings = holdings_of(data)

    def run_at(s: float) -> FederationRun:
        return federation_run(algo, data, sigma=s, item_q=q, rounds=rounds, local_steps=local_steps)

    if epsilon is None:
        assert sigma is not None
        return data, SubjectSetup(sigma, q, None)

    def spent(s: float, accounting=SEARCH) -> float:
        return headline_epsilon(algo, run_at(s), holdings, delta, accounting)

    found = calibrate(spent, epsilon, "sigma")
    if algo != "localgroupdp":
        return data, SubjectSetup(found.value, q, epsilon)
    assert z is not None
    group = group_budget(found.value, z, delta, q, rounds * local_steps)
    for _ in range(200):  # sigma_Z is calibrated to 1e-4: make sure the target still holds
        if spent(group.sigma) <= epsilon:
            break
        group = group_noise(z, group.item_epsilon * z * 0.995, delta, q, rounds * local_steps, **ACCOUNTING)
    return data, SubjectSetup(group.sigma, q, epsilon, z, group, dropped)


def group_budget(sigma_needed: float, z: int, delta: float, q: float, steps: int) -> GroupNoise:
    """LocalGroupDP (Algorithm 2, Corollary 3.5): the per-member budget E whose sigma_Z is
    `sigma_needed`, and that sigma_Z, which it trains with; InvalidParameter naming the largest
    group size that fits when no E gives this Z that noise (`_group_noise_for`)."""
    found = _group_noise_for(sigma_needed, z, delta, q, steps)
    if found is not None:
        return found
    largest = next(
        (
            smaller
            for smaller in range(z - 1, 0, -1)
            if _group_noise_for(sigma_needed, smaller, delta, q, steps)
        ),
        0,
    )
    raise InvalidParameter(
        f"--group-k {z}: no LocalGroupDP budget E makes sigma_Z reach {sigma_needed:.4g} for groups "
        f"of {z} items" + (f"; the largest Z that fits is {largest}" if largest else "")
    )


def _group_noise_for(sigma_needed: float, z: int, delta: float, q: float, steps: int) -> GroupNoise | None:
    """sigma_Z(E) is the smallest sigma whose item-level epsilon at Delta / (Z e^((Z-1)E/Z)) is at
    most E / Z; so E is where the item-level epsilon of `sigma_needed` at that delta crosses E / Z
    (it falls as E grows, E / Z rises): a bisection on log E over one RDP curve, cheap. The exact
    sigma_Z of that E is then computed by `group_noise`, the code `uldp subject --k` runs. None
    when no E in the search range reaches `sigma_needed` or Corollary 3.5's noise cannot be computed.
    """
    event = SubsampledGaussian(sigma_needed, q, steps)
    log_floor = math.log(sys.float_info.min)

    def gap(budget: float) -> float:
        log_item_delta = math.log(delta) - math.log(z) - (z - 1) * budget / z
        if log_item_delta <= log_floor:
            return -math.inf  # the item delta underflows: E too large for this Z
        spent = account_event(event, math.exp(log_item_delta), **ACCOUNTING).epsilon
        return spent - budget / z

    lo, hi = 1e-6, 1.0
    while gap(hi) > 0 and hi < 1e6:
        lo, hi = hi, hi * 4
    if gap(lo) <= 0:
        return None
    for _ in range(60):
        if hi / lo < 1 + 1e-5:
            break
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if gap(mid) > 0 else (lo, mid)
    try:
        return group_noise(z, lo, delta, q, steps, **ACCOUNTING)
    except (InvalidParameter, UnreachableBudget):
        return None


class SubjectAccounting:
    """The epsilons of a subject-level run after each round, over the data's real holdings."""

    def __init__(self, cfg, data) -> None:
        if cfg.item_q is None:
            raise InvalidParameter(f"{cfg.algo} needs the items' sampling rate (TrainConfig.item_q)")
        self.algo = cfg.algo
        self.delta = cfg.delta
        self.holdings = holdings_of(data)
        if not self.holdings:
            raise InvalidParameter("no subject holds a training item")
        self.run = federation_run(
            cfg.algo, data, sigma=cfg.sigma, item_q=cfg.item_q, rounds=cfg.rounds, local_steps=cfg.local_steps
        )
        self._last: tuple[int, HeldGuarantee] | None = None  # the last row's rounds and subjects

    def row(self, rounds: int) -> dict[str, float]:
        """'epsilon' (the headline), the worst subject's local and federation-wide epsilon, and
        the algorithm's own (item-level, user-level LDP) after `rounds` rounds."""
        run = self.run.with_rounds(rounds)
        held = worst_held(run, self.holdings, self.delta, **ACCOUNTING)
        self._last = (rounds, held)  # the summary names these subjects
        out = {
            "subject_epsilon_member": held.local_epsilon,
            "subject_epsilon_federation": held.federation_epsilon,
        }
        if self.algo in ("localitemdp", "localgroupdp"):
            out["item_epsilon"] = item_epsilon(run, self.delta)
        if self.algo == "userldp":
            out["user_ldp_epsilon"] = user_ldp_epsilon(run, self.delta, **ACCOUNTING)
        headline = out["item_epsilon"] if self.algo == "localitemdp" else held.federation_epsilon
        return {"epsilon": headline, **out}

    def summary(self, cfg, rounds: int) -> dict[str, object]:
        """The run's setting, and the subjects its last row's figures are for, with their holdings."""
        out: dict[str, object] = {
            "level": "subject",
            "item_q": cfg.item_q,
            "local_steps": cfg.local_steps,
            "epsilon_target": cfg.target_epsilon,
            "subjects": len(self.holdings),
        }
        if self.algo == "localgroupdp":
            out["group_size"] = cfg.group_k
            out["group_budget"] = cfg.group_budget
        if rounds:
            last = self._last
            held = (
                last[1]
                if last is not None and last[0] == rounds
                else worst_held(self.run.with_rounds(rounds), self.holdings, self.delta, **ACCOUNTING)
            )
            out.update(
                {
                    "member_subject": held.local_subject,
                    "member_holding": self.holdings[held.local_subject],
                    "federation_subject": held.federation_subject,
                    "federation_holding": self.holdings[held.federation_subject],
                }
            )
        return out

    def describe_run(self, cfg, training: dict[str, str]) -> dict[str, str]:
        """What the figures rest on (`accountants.subject.horizontal`, as `uldp subject` prints them), with
        the algorithm's own `training` lines (what a member's step and the server do)."""
        run = self.run
        out = {
            "subjects": (
                f"the data's users are the subjects, its silos the members: {len(self.holdings)} "
                f"subjects over {run.members} members"
            ),
            "neighbouring": "every item of one subject added or removed, wherever held (Definition 2.3)",
            **training,
        }
        out["noise"] = (
            f"sigma = {cfg.sigma:.6g}"
            + (
                ""
                if cfg.target_epsilon is None
                else f", the smallest meeting --epsilon {cfg.target_epsilon:g} after {cfg.rounds} rounds"
            )
            + (
                f"; LocalGroupDP: sigma_Z of Corollary 3.5 for Z = {cfg.group_k} items and the per-member "
                f"budget E = {cfg.group_budget:.6g} at Delta = {cfg.delta:g} (at least that sigma)"
                if self.algo == "localgroupdp" and cfg.group_budget is not None
                else ""
            )
        )
        out["epsilon (member)"] = (
            "per member, locally enforced (Theorem 3.8 / 3.3 / 3.6): the worst subject's items at its "
            "busiest member, every other member's data fixed; a Definition 2.3 bound only for a subject "
            "held by one member"
        )
        out["epsilon (federation)"] = (
            "horizontal composition (Theorem 3.9), worst case: every member takes part every round and "
            "the worst subject's holders compose sequentially (RDP curves added), over the holdings the "
            "training data has"
        )
        if self.algo == "localitemdp":
            out["epsilon"] = (
                "LocalItemDP's headline is item level (one item added or removed): its own guarantee, "
                "not a subject-level one; the subject-level columns bound a subject with m items at a "
                "member by the Binomial(m, q) mixture of its items' draws (RDP: m sub-sampled steps of "
                "multiplier sigma / sqrt(m))"
            )
        out["accounting"] = (
            f"RDP ({ACCOUNTING['orders']} orders), {ACCOUNTING['conversion']} conversion, delta = "
            f"{cfg.delta:g}; every epsilon an upper bound after each round"
        )
        return out

    def check_command(self) -> str:
        """The `uldp subject` command that prints the final figures (with the holdings written
        as a (subject, member) CSV, e.g. by `write_holdings`)."""
        run = self.run
        return (
            f"uldp subject --algo {self.algo} --silos {run.members} --silos-per-round {run.per_round} "
            f"--rounds {run.rounds} --local-steps {run.local_steps} --record-q {run.q!r} "
            f"--sigma {run.sigma!r} --delta {self.delta!r} --holdings HOLDINGS.csv"
        )


def holdings_rows(data) -> list[tuple[str, str]]:
    """(subject, member) per training item: the file `uldp subject --holdings` reads."""
    return [(str(u), str(s)) for u, s in zip(data.user_train.tolist(), data.silo_train.tolist())]
