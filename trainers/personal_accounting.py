"""Per-tier accounting of a run with personalised budgets (issue 14).

`PersonalAccounting` gives, after every round, the epsilon spent by each budget tier (each
distinct budget, or budget quantiles when there are many) in each view: at record level the two
threat models of rPDP-FL (slides ch. 3 II), at user level the released models' and the server's
(ULDP-FL Remark 1); and re-accounts every distinct rate at the end to check that no record (user)
exceeded its budget. `accounting(cfg, data, private)` rebuilds it from a run's settings and the
rates its data carries, so a resumed or deployed run gets the same. No torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .budget_sources import Budgets
from .rates import Rates

#: Tiers shown one per distinct budget up to this many; beyond, budget quantiles.
MAX_TIERS = 6
QUANTILES = ((0.0, "min"), (0.25, "p25"), (0.5, "median"), (0.75, "p75"), (1.0, "max"))


@dataclass(frozen=True)
class Tier:
    """A group of records (users) with one budget and one rate: a distinct budget, or the record
    at a budget quantile."""

    label: str
    budget: float
    q: float
    count: int | None  # records (users) with this budget; None for a quantile


def tiers(budgets: np.ndarray, q: np.ndarray, max_tiers: int = MAX_TIERS) -> list[Tier]:
    """One tier per distinct budget (at most `max_tiers`), else the budgets' quantiles."""
    distinct, inverse, counts = np.unique(budgets, return_inverse=True, return_counts=True)
    if distinct.size <= max_tiers:
        # Every record of a budget has the same q (a function of the budget); the largest is the
        # one to account should they ever differ.
        top = np.zeros(distinct.size)
        np.maximum.at(top, inverse, q)
        return [Tier(f"{b:g}", float(b), float(r), int(c)) for b, r, c in zip(distinct, top, counts)]
    order = np.argsort(budgets, kind="stable")
    out = []
    for fraction, label in QUANTILES:
        i = order[min(int(round(fraction * (budgets.size - 1))), budgets.size - 1)]
        out.append(Tier(label, float(budgets[i]), float(q[i]), None))
    return out


View = Callable[[int, np.ndarray], np.ndarray]


class PersonalAccounting:
    """Per-tier epsilons after each round, and the final re-accounting of every distinct rate.

    `views` maps a view's name to epsilon(rounds, rates): record level, "untrusted" and "server"
    (rPDP-FL slides ch. 3 II); user level, "model" (the released models, amplified by each user's
    sampling) and "server" (which draws the sample: no amplification). `checked` is the view the
    rates were computed for, the one the budgets are checked against. A non-private run has no
    views: every epsilon is infinite.
    """

    def __init__(self, rates: Rates, views: dict[str, View], checked: str | None) -> None:
        self.rates = rates
        self.views = views
        self.checked = checked
        self.tiers = tiers(rates.budgets.values, rates.q)

    @classmethod
    def for_records(cls, rates: Rates, private: bool, threat_model: str) -> PersonalAccounting:
        def view(model: str) -> View:
            return lambda rounds, qs: rates.curve(rounds, model)(qs)

        views = {"untrusted": view("untrusted"), "server": view("server")} if private else {}
        return cls(rates, views, threat_model if private else None)

    @classmethod
    def for_users(cls, rates: Rates) -> PersonalAccounting:
        from uldp.accountants.personalized import user_rates as user_level

        def server(rounds: int, qs: np.ndarray) -> np.ndarray:
            # The server draws the sample, so it knows the rounds each user took part in: no
            # amplification, the same "server view" `uldp account --user-q q_u` prints.
            return np.array(
                [user_level.server_epsilon(rates.sigma, rounds, rates.delta, q=float(q)) for q in qs]
            )

        def model(rounds: int, qs: np.ndarray) -> np.ndarray:
            # The released models are computed from what the server sees, so its bound bounds them
            # too; where its accountant (other orders) is tighter, it is the one kept.
            curve = user_level.user_curve(rates.sigma, rounds, rates.delta)(qs)
            return np.minimum(curve, server(rounds, qs))

        return cls(rates, {"model": model, "server": server}, "model")

    def row(self, rounds: int) -> dict[str, float]:
        """Flat columns for one round's row: tier i's budget and its epsilon in each view."""
        qs = np.array([t.q for t in self.tiers])
        values = {name: view(rounds, qs) for name, view in self.views.items()}
        out: dict[str, float] = {}
        for i, tier in enumerate(self.tiers, start=1):
            out[f"tier{i}_budget"] = tier.budget
            for name in self.view_names:
                out[f"tier{i}_epsilon_{name}"] = float(values[name][i - 1]) if name in values else math.inf
        return out

    @property
    def view_names(self) -> tuple[str, ...]:
        """The views every row has (a non-private run has them too, all infinite)."""
        return ("untrusted", "server") if self.rates.level == "record" else ("model", "server")

    @property
    def primary(self) -> str:
        return self.checked or ("untrusted" if self.rates.level == "record" else "model")

    def largest(self, row: dict[str, float], view: str | None = None) -> float:
        """The largest epsilon of any tier in `view` (default: the checked one)."""
        view = view or self.primary
        return max(row[f"tier{i}_epsilon_{view}"] for i in range(1, len(self.tiers) + 1))

    def headline(self, row: dict[str, float]) -> tuple[float, float | None]:
        """(epsilon, server epsilon) of the round's row, each the largest over the tiers; at user
        level the server's view too (it draws the sample), at record level None (the tiers carry
        both threat models)."""
        if self.rates.level == "user":
            return self.largest(row, "model"), self.largest(row, "server")
        return self.largest(row), None

    def check(self, rounds: int) -> dict:
        """Re-account every distinct rate after `rounds` rounds in the checked view (a fresh
        curve, not the rates' own search) and count the records (users) over their budget."""
        budgets, q = self.rates.budgets.values, self.rates.q
        distinct, inverse = np.unique(q, return_inverse=True)
        if self.checked is None:
            spent = np.full(q.size, math.inf)
        else:
            spent = self.views[self.checked](rounds, distinct)[inverse]
            spent = np.where(q > 0, spent, 0.0)  # a record never sampled spends nothing
        over = spent > budgets
        worst = int(np.argmax(spent / budgets))
        return {
            "level": self.rates.level,
            "rounds": rounds,
            "view": self.checked,
            "distinct_rates": int(distinct.size),
            "count": int(q.size),
            "over_budget": int(over.sum()),
            "largest_spent_over_budget": float(spent[worst] / budgets[worst]),
        }


def accounting(cfg, data, private: bool) -> PersonalAccounting | None:
    """The per-tier accounting of a run of `cfg` on `data`, from what `with_rates` attached (the
    run's settings and the data are all it needs, so a resumed or deployed run rebuilds it);
    None when the data carries no budgets."""
    from uldp.accountants.personalized.record_spend import RecordSampledFL

    if data.record_budget is not None:
        q = data.record_q if data.record_q is not None else np.zeros(len(data.record_budget))
        run = RecordSampledFL(cfg.sigma, cfg.local_steps, cfg.rounds, cfg.silo_q, cfg.threat_model)
        rates = Rates("record", Budgets(data.record_budget, ""), q, cfg.sigma, run, cfg.delta, "")
        return PersonalAccounting.for_records(rates, private and data.record_q is not None, cfg.threat_model)
    if data.user_q is not None:
        rates = Rates("user", Budgets(data.user_budget, ""), data.user_q, cfg.sigma, None, cfg.delta, "")
        return PersonalAccounting.for_users(rates)
    return None


def describe_run(cfg, personal: PersonalAccounting, records: int, users: int) -> dict[str, str]:
    """The assumptions of a personalised run's epsilons, for `uldp train`'s assumptions block."""
    rates = personal.rates
    q = rates.q
    used = q[q > 0]
    spread = f"{used.min():.4g}..{used.max():.4g}" if used.size else "none"
    if rates.level == "user":
        from uldp.accountants.personalized import user_rates as user_level

        out = dict(user_level.user_curve(cfg.sigma, cfg.rounds, cfg.delta).assumptions())
        out["rates"] = f"{users} users, q_u in {spread}, mean {q.mean():.4g} (the server step divides by it)"
        out["tiers"] = _tier_text(personal, "user")
        out["server view"] = (
            "the server draws the sample, so it knows the rounds each user took part in: per tier "
            "the RDP of that known participation (as `uldp account --user-q q_u` prints it), no "
            "amplification"
        )
        out["check"] = (
            "after the last round every distinct q_u is re-accounted (a fresh curve) against its "
            "users' budgets, in the released models' view (the budgets are met there; the server's "
            "view spends more)"
        )
        return out
    if personal.checked is None:
        return {
            "privacy": f"none: {cfg.algo} is not private; every record's epsilon is unbounded (JSON null)",
            "tiers": _tier_text(personal, "record"),
        }
    run_curve = rates.curve(cfg.rounds, cfg.threat_model)
    out = dict(run_curve.assumptions())
    out["threat models"] = (
        "both printed per tier: untrusted clients or third parties, and the honest-but-curious "
        "server; with Poisson client sampling the server sees which rounds a silo joined, and the "
        "exact RDP of that participation is the untrusted formula, so the two coincide (the "
        "slides' lambda T tau rho is its expectation, not a bound, and is not used)"
    )
    out["rates"] = f"{records} records, q in {spread} (expected batch per silo: sum of its q)"
    out["tiers"] = _tier_text(personal, "record")
    out["check"] = (
        f"after the last round every distinct q is re-accounted (a fresh curve) against its "
        f"records' budgets, threat model {cfg.threat_model}; `uldp personalize` with the same "
        "budgets and run gives the same q"
    )
    return out


def _tier_text(personal: PersonalAccounting, what: str) -> str:
    if personal.tiers and personal.tiers[0].count is not None:
        return f"one per distinct budget ({len(personal.tiers)}); each tier's {what}s share one rate"
    return (
        f"the budgets are many: tiers are the {what}s at the budget quantiles (min, p25, median, "
        "p75, max), each with its own rate"
    )
