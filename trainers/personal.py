"""Personalised budgets in training (issue 14): rates from budgets, accounting per budget tier.

Record level (rPDP-FL, slides ch. 3): every training record j has a budget epsilon_j, from a
column of the user's table, a file `uldp personalize` wrote (or any CSV of budgets by record),
or a named scenario drawn with a seed. `record_rates` turns them into sampling rates q_j with
`accountants.personalization.personalize(method="exact")`, the code path of `uldp personalize`:
the same budgets and run give the same q. sigma is calibrated so that the largest budget is
spent exactly at q = 1 by the end of the run (`accountants.personalized.calibrate_sigma`, the
reference's `prepare_fedrpdp`), or given. `unidp` gives every record one rate instead:
q = min(1, B / min_s |D_s|) with sigma calibrated to the smallest budget (the reference's
`fedavg_unidp.py`), or, with sigma given, the smallest budget's rate.

User level (ULDP-AVG / -w / ULDP-SGD with per-user budgets, PULDP-AVG of the ULDP-FL authors'
code): every user u gets its own rate q_u from `accountants.user_rates` (the same exact inverse,
over T rounds of a Poisson-subsampled Gaussian), and the server samples user u with q_u.

`PersonalAccounting` gives, after every round, the epsilon spent by each budget tier (each
distinct budget, or budget quantiles when there are many) under each view, and re-accounts
every distinct rate at the end to check that no record (user) exceeded its budget. No torch.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from uldp.errors import DataError, InvalidParameter

if TYPE_CHECKING:
    from uldp.accountants.personalized import RecordSampledFL

#: Tiers shown one per distinct budget up to this many; beyond, budget quantiles.
MAX_TIERS = 6
QUANTILES = ((0.0, "min"), (0.25, "p25"), (0.5, "median"), (0.75, "p75"), (1.0, "max"))
#: Records (users) named in an error at most.
NAMED = 5


# -- where the budgets come from ------------------------------------------------------------


@dataclass(frozen=True)
class Budgets:
    """Budgets of the training records (or of the users), and where they came from."""

    values: np.ndarray
    source: str


def check_positive(values: np.ndarray, what: str, option: str, ids: np.ndarray | None = None) -> np.ndarray:
    """`values` as floats; InvalidParameter naming `option` and the first few bad ones unless every
    value is a finite number > 0 (a budget of 0 would exclude the record from training, which a
    budget file should say by leaving the record out of the data, not by a zero)."""
    values = np.asarray(values, dtype=float)
    bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
    if bad.size:
        names = bad if ids is None else ids[bad]
        shown = ", ".join(f"{what} {n} ({values[i]!r})" for n, i in zip(names[:NAMED], bad[:NAMED]))
        more = f" and {bad.size - NAMED} more" if bad.size > NAMED else ""
        raise InvalidParameter(f"{option}: budgets must be finite numbers > 0: {shown}{more}")
    return values


def drawn_budgets(distribution: str, count: int, seed: int) -> np.ndarray:
    """`count` budgets of the `uldp personalize --distribution` preset, seeded as it seeds them."""
    from uldp.accountants.budgets import sample_budgets

    return sample_budgets(distribution, count, seed)


def record_budgets_drawn(data, distribution: str, seed: int) -> Budgets:
    """Budgets drawn for every source record (ids 1..N, as `uldp personalize --distribution D
    --records N --seed S` draws them), then the training records' own."""
    from uldp.accountants.budgets import describe

    n = _source_records(data)
    values = drawn_budgets(distribution, n, seed)[_record_index(data)]
    return Budgets(
        values,
        f"{describe(distribution)}; drawn for the {n} source records with seed {seed} (as `uldp "
        f"personalize --distribution {distribution} --records {n} --seed {seed}`), the "
        f"{len(values)} training records keep theirs",
    )


def record_budgets_from_file(
    data, path: str | Path, budget_column: str = "epsilon", id_column: str = "id"
) -> Budgets:
    """Budgets from a CSV with a header (what `uldp personalize --out` writes): `budget_column`
    per record, the records named by `id_column` (row numbers 1..N of the source table or
    built-in set), or, without that column, one row per source record in order.

    Every training record needs one: DataError naming the missing ids otherwise.
    """
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.reader(handle))
    except OSError as error:
        raise DataError(f"--epsilon-csv: cannot read {path} ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise DataError(f"--epsilon-csv: {path} is not a UTF-8 CSV file") from None
    if not rows:
        raise DataError(f"--epsilon-csv: {path} is empty; expected a header naming {budget_column!r}")
    header = [name.strip() for name in rows[0]]
    if budget_column not in header:
        raise DataError(
            f"--epsilon-csv: {path} has no column {budget_column!r} (its columns: {', '.join(header[:12])})"
        )
    column = header.index(budget_column)
    ids_at = header.index(id_column) if id_column in header else None
    body = rows[1:]
    n = _source_records(data)
    by_row = np.full(n, np.nan)
    for line, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise DataError(
                f"--epsilon-csv: {path} line {line} has {len(row)} fields, the header {len(header)}"
            )
        try:
            value = float(row[column])
        except ValueError:
            raise DataError(
                f"--epsilon-csv: {path} line {line}: {budget_column} {row[column]!r} is not a number"
            ) from None
        if ids_at is None:
            record = line - 2
        else:
            try:
                record = int(row[ids_at]) - 1
            except ValueError:
                raise DataError(
                    f"--epsilon-csv: {path} line {line}: {id_column} {row[ids_at]!r} is not a record "
                    f"number (1 to {n})"
                ) from None
        if not 0 <= record < n:
            raise DataError(
                f"--epsilon-csv: {path} line {line}: record {record + 1} does not exist (the data has "
                f"records 1 to {n})"
            )
        by_row[record] = value
    index = _record_index(data)
    values = by_row[index]
    missing = np.flatnonzero(np.isnan(values))
    if missing.size:
        shown = ", ".join(str(int(i) + 1) for i in index[missing[:NAMED]])
        raise DataError(
            f"--epsilon-csv: {path} has no budget for {missing.size} training record(s) (records "
            f"{shown}{', ...' if missing.size > NAMED else ''}); give one per record"
        )
    check_positive(values, "record", "--epsilon-csv", index + 1)
    named = f"column {budget_column!r}" + ("" if ids_at is None else f", records by {id_column!r}")
    return Budgets(values, f"file {path} ({named})")


def user_budgets(n_users: int, source: str, seed: int) -> Budgets:
    """Per-user budgets: a preset name (drawn for users 0..|U|-1 with `seed`) or a CSV file with
    columns `user` (0..|U|-1, the user ids of the run) and `epsilon`."""
    from uldp.accountants.budgets import DISTRIBUTIONS, describe

    if source in DISTRIBUTIONS:
        values = drawn_budgets(source, n_users, seed)
        return Budgets(
            values,
            f"{describe(source)}; drawn for the {n_users} users with seed {seed} (as `uldp "
            f"personalize --level user --distribution {source} --records {n_users} --seed {seed}`)",
        )
    path = Path(source)
    if not path.is_file():
        raise InvalidParameter(
            f"--user-budgets: {source!r} is neither a file nor one of {', '.join(DISTRIBUTIONS)}"
        )
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"--user-budgets: cannot read {path} ({error})") from None
    header = [name.strip() for name in rows[0]] if rows else []
    if "user" not in header or "epsilon" not in header:
        raise DataError(f"--user-budgets: {path} needs a header with columns user and epsilon")
    at_user, at_eps = header.index("user"), header.index("epsilon")
    values = np.full(n_users, np.nan)
    for line, row in enumerate(rows[1:], start=2):
        try:
            user, value = int(row[at_user]), float(row[at_eps])
        except (ValueError, IndexError):
            raise DataError(f"--user-budgets: {path} line {line}: user and epsilon must be numbers") from None
        if not 0 <= user < n_users:
            raise DataError(f"--user-budgets: {path} line {line}: user {user} is not in 0..{n_users - 1}")
        values[user] = value
    missing = np.flatnonzero(np.isnan(values))
    if missing.size:
        raise DataError(
            f"--user-budgets: {path} has no budget for {missing.size} user(s) (users "
            f"{', '.join(map(str, missing[:NAMED]))}{', ...' if missing.size > NAMED else ''})"
        )
    check_positive(values, "user", "--user-budgets", np.arange(n_users))
    return Budgets(values, f"file {path}")


def _source_records(data) -> int:
    return int(data.source_records or len(data.y_train))


def _record_index(data) -> np.ndarray:
    if data.record_index is None:
        return np.arange(len(data.y_train))
    return np.asarray(data.record_index)


# -- from budgets to rates -------------------------------------------------------------------


@dataclass(frozen=True)
class Rates:
    """Every record's (user's) rate and what the rates were computed for."""

    level: str  # "record" or "user"
    budgets: Budgets
    q: np.ndarray
    sigma: float
    calibrated: bool
    run: RecordSampledFL | None  # the run the rates were made for (record level)
    delta: float
    note: str  # how the rates and sigma were chosen, for the assumptions

    def curve(self, rounds: int, threat_model: str | None = None, refine: bool = True):
        """epsilon*(q) of the first `rounds` rounds of this run under `threat_model`."""
        from uldp.accountants.personalized import EpsilonCurve

        if self.run is None:
            raise ValueError("user-level rates have no record-level run")
        run = dataclasses.replace(self.run, rounds=rounds)
        if threat_model is not None:
            run = dataclasses.replace(run, threat_model=threat_model)
        return EpsilonCurve(run, self.delta, refine=refine)


def record_rates(
    budgets: Budgets,
    *,
    uniform: bool,
    sigma: float | None,
    local_steps: int,
    rounds: int,
    silo_q: float,
    delta: float,
    threat_model: str = "untrusted",
    batch_size: int | None = None,
    silo_sizes: list[int] | None = None,
    ids: np.ndarray | None = None,
) -> Rates:
    """Every record's q for rpdp (`uniform` False) or unidp (True); see the module docstring.

    A budget that no rate q >= 1e-6 meets at this sigma is refused: InvalidParameter naming the
    first records (by `ids`, the source row numbers) and the smallest budget reachable.
    """
    from uldp.accountants.personalization import personalize
    from uldp.accountants.personalized import EpsilonCurve, RecordSampledFL, calibrate_sigma

    values = check_positive(budgets.values, "record", "budgets", ids)
    probe = RecordSampledFL(sigma or 1.0, local_steps, rounds, silo_q, threat_model)
    if uniform:
        sizes = [n for n in (silo_sizes or []) if n > 0]
        if not sizes or batch_size is None:
            raise InvalidParameter("unidp needs --batch-size and silos with records")
        cap = min(1.0, batch_size / min(sizes))
        smallest = float(values.min())
        if sigma is None:
            calibration = calibrate_sigma(probe, delta, smallest, q_cap=cap)
            sigma, q = calibration.value, cap
            note = (
                f"unidp: every record at q = min(1, B / min_s |D_s|) = min(1, {batch_size} / "
                f"{min(sizes)}) = {cap:.6g}; sigma calibrated so that this q spends the smallest "
                f"budget {smallest:.6g} (rPDP-FL's UniDP / StrongForAll)"
            )
        else:
            run = dataclasses.replace(probe, sigma=sigma)
            one = personalize(np.array([smallest]), EpsilonCurve(run, delta), q_cap=cap)
            _refuse_low(one, np.array([smallest]), None, sigma)
            q = float(one.q[0])
            note = (
                f"unidp: every record at q = {q:.6g}, the rate of the smallest budget {smallest:.6g} at "
                f"sigma {sigma:g} (at most min(1, B / min_s |D_s|) = {cap:.6g})"
            )
        run = dataclasses.replace(probe, sigma=sigma)
        return Rates(
            "record", budgets, np.full(values.size, q), sigma, "calibrated" in note, run, delta, note
        )
    calibrated = sigma is None
    if sigma is None:
        sigma = calibrate_sigma(probe, delta, float(values.max()), q_cap=1.0).value
    run = dataclasses.replace(probe, sigma=sigma)
    result = personalize(values, EpsilonCurve(run, delta), method="exact")
    _refuse_low(result, values, ids, sigma)
    note = (
        "rpdp: each record the largest q (geometric grid, ratio 1.001) with epsilon*(q) <= its budget, "
        "the exact inverse of `uldp personalize`"
        + (
            f"; sigma calibrated so that the largest budget {values.max():.6g} is spent at q = 1 "
            "by the end of the run (rPDP-FL's prepare_fedrpdp)"
            if calibrated
            else f"; sigma {sigma:g} given"
        )
    )
    return Rates("record", budgets, result.q, sigma, calibrated, run, delta, note)


def user_rates(
    budgets: Budgets, *, sigma: float | None, rounds: int, delta: float, ids: np.ndarray | None = None
) -> Rates:
    """Every user's q_u for ULDP-AVG / -w / ULDP-SGD with per-user budgets (module docstring)."""
    from uldp.accountants import user_rates as user_level

    values = check_positive(budgets.values, "user", "--user-budgets", ids)
    calibrated = sigma is None
    if sigma is None:
        sigma = user_level.calibrate_user_sigma(float(values.max()), rounds, delta).value
    curve = user_level.user_curve(sigma, rounds, delta)
    result = user_level.user_rates(values, curve)
    _refuse_low(result, values, ids, sigma, what="user", option="--user-budgets")
    note = (
        "each user u sampled with its own q_u, the largest q (geometric grid, ratio 1.001) with "
        "epsilon*(q) <= its budget over T rounds of a Poisson-subsampled Gaussian (ULDP-FL "
        "Theorem 3, Algorithm 4; `uldp personalize --level user`)"
        + (
            f"; sigma calibrated so that the largest budget {values.max():.6g} is spent at q_u = 1"
            if calibrated
            else f"; sigma {sigma:g} given"
        )
    )
    return Rates("user", budgets, result.q, sigma, calibrated, curve.run, delta, note)


def _refuse_low(
    result,
    values: np.ndarray,
    ids: np.ndarray | None,
    sigma: float,
    what: str = "record",
    option: str = "budgets",
) -> None:
    """InvalidParameter if some budget is below epsilon*(q_min): no usable rate meets it."""
    feasible = result.feasible
    low = np.flatnonzero(values < feasible.epsilon_min)
    if low.size:
        names = low if ids is None else ids[low]
        shown = ", ".join(f"{what} {n} ({values[i]:.4g})" for n, i in zip(names[:NAMED], low[:NAMED]))
        more = f" and {low.size - NAMED} more" if low.size > NAMED else ""
        raise InvalidParameter(
            f"{option}: {low.size} budget(s) below the smallest reachable epsilon "
            f"{feasible.epsilon_min:.4g} (at q = {feasible.q_min:g}, sigma {sigma:g}): {shown}{more}; "
            "raise those budgets, raise --sigma, or train fewer --rounds"
        )


def rates_digest(data) -> str:
    """A digest of the rates attached to `data` (checkpoints and partitions of a run refuse
    another run's rates)."""
    h = hashlib.sha256()
    for name in ("record_q", "user_q"):
        values = getattr(data, name, None)
        if values is not None:
            h.update(name.encode() + np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]


# -- accounting per tier -----------------------------------------------------------------------


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
        from uldp.accountants import user_rates as user_level
        from uldp.accountants.participation import known_participation_epsilon

        def server(rounds: int, qs: np.ndarray) -> np.ndarray:
            # The server draws the sample, so it knows the rounds each user took part in: no
            # amplification, the same "server view" `uldp account --user-q q_u` prints.
            return np.array(
                [known_participation_epsilon(rates.sigma, float(q), rounds, rates.delta).epsilon for q in qs]
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


# -- a run's data with its rates -----------------------------------------------------------------


def with_rates(data, rates: Rates):
    """`data` (a FederatedData) carrying the rates and budgets of `rates`, and what they assume."""
    notes = {"budgets": rates.budgets.source, "rates": rates.note}
    if rates.level == "record":
        return dataclasses.replace(
            data, record_budget=rates.budgets.values, record_q=rates.q, rates_assumptions=notes
        )
    return dataclasses.replace(
        data, user_budget=rates.budgets.values, user_q=rates.q, rates_assumptions=notes
    )


def accounting(cfg, data, private: bool) -> PersonalAccounting | None:
    """The per-tier accounting of a run of `cfg` on `data`, from what `with_rates` attached (the
    run's settings and the data are all it needs, so a resumed or deployed run rebuilds it);
    None when the data carries no budgets."""
    from uldp.accountants.personalized import RecordSampledFL

    if data.record_budget is not None:
        q = data.record_q if data.record_q is not None else np.zeros(len(data.record_budget))
        run = RecordSampledFL(cfg.sigma, cfg.local_steps, cfg.rounds, cfg.silo_q, cfg.threat_model)
        rates = Rates("record", Budgets(data.record_budget, ""), q, cfg.sigma, False, run, cfg.delta, "")
        return PersonalAccounting.for_records(rates, private and data.record_q is not None, cfg.threat_model)
    if data.user_q is not None:
        rates = Rates(
            "user", Budgets(data.user_budget, ""), data.user_q, cfg.sigma, False, None, cfg.delta, ""
        )
        return PersonalAccounting.for_users(rates)
    return None


def personalize_data(
    data,
    *,
    algo: str,
    record_level: bool,
    budgets_file: str | None = None,
    budgets_column: str = "epsilon",
    distribution: str | None = None,
    user_budgets_from: str | None = None,
    seed: int = 0,
    sigma: float | None,
    local_steps: int,
    rounds: int,
    silo_q: float,
    delta: float,
    threat_model: str = "untrusted",
    batch_size: int | None = None,
) -> tuple[object, float | None]:
    """`data` with the rates of its records or users attached (`with_rates`), and the sigma to
    train with (calibrated when `sigma` is None and there are budgets).

    Record budgets come from `budgets_file`, `distribution`, or a budget column already loaded
    (`data.record_budget`); a non-private `algo` (default) keeps the budgets only to show that no
    budget is met. `user_budgets_from` is a preset name or a file (ULDP-AVG / -SGD).
    """
    if user_budgets_from is not None:
        budgets = user_budgets(data.n_users, user_budgets_from, seed)
        rates = user_rates(budgets, sigma=sigma, rounds=rounds, delta=delta, ids=np.arange(data.n_users))
        return with_rates(data, rates), rates.sigma
    if budgets_file is not None:
        budgets = record_budgets_from_file(data, budgets_file, budgets_column)
    elif distribution is not None:
        budgets = record_budgets_drawn(data, distribution, seed)
    elif data.record_budget is not None:
        budgets = Budgets(np.asarray(data.record_budget, dtype=float), "column of the table")
    else:
        if record_level:
            raise InvalidParameter(
                f"{algo} needs per-record budgets: give --distribution NAME, --epsilon-csv FILE or "
                "--epsilon-column COLUMN"
            )
        return data, sigma
    ids = _record_index(data) + 1
    if not record_level:  # default: the budgets are shown, none is met
        check_positive(budgets.values, "record", "budgets", ids)
        return dataclasses.replace(
            data,
            record_budget=budgets.values,
            rates_assumptions={
                "budgets": budgets.source,
                "rates": f"{algo} is not private: no budget is met",
            },
        ), sigma
    sizes = np.bincount(data.silo_train, minlength=data.n_silos).tolist()
    rates = record_rates(
        budgets,
        uniform=algo == "unidp",
        sigma=sigma,
        local_steps=local_steps,
        rounds=rounds,
        silo_q=silo_q,
        delta=delta,
        threat_model=threat_model,
        batch_size=batch_size,
        silo_sizes=sizes,
        ids=ids,
    )
    return with_rates(data, rates), rates.sigma


def describe_run(cfg, personal: PersonalAccounting, records: int, users: int) -> dict[str, str]:
    """The assumptions of a personalised run's epsilons, for `uldp train`'s assumptions block."""
    rates = personal.rates
    q = rates.q
    used = q[q > 0]
    spread = f"{used.min():.4g}..{used.max():.4g}" if used.size else "none"
    if rates.level == "user":
        from uldp.accountants import user_rates as user_level

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
