"""From budgets to sampling rates, for a training run (issue 14).

Record level (rPDP-FL, slides ch. 3): `record_rates` gives every record the largest q with
epsilon*(q) <= its budget, by `accountants.personalized.record_rates.personalize(method="exact")`, the code
path of `uldp personalize` (the same budgets and run give the same q). sigma is calibrated so
that the largest budget is spent exactly at q = 1 by the end of the run
(`accountants.personalized.record_spend.calibrate_sigma`, the reference's `prepare_fedrpdp`), or given.
`unidp` gives every record one rate instead: q = min(1, B / min_s |D_s|) with sigma calibrated to
the smallest budget (the reference's `fedavg_unidp.py`), or, with sigma given, the smallest
budget's rate.

User level (ULDP-AVG / -w / ULDP-SGD with per-user budgets, PULDP-AVG of the ULDP-FL authors'
code): `user_rates` gives every user its own q_u from `accountants.personalized.user_rates` (the same exact
inverse, over T rounds of a Poisson-subsampled Gaussian); the server samples user u with q_u.

`personalize_data` attaches the rates to a run's data (`FederatedData.record_q` / `user_q`), which
is all the round loop and the silos need. No torch.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from uldp.errors import InvalidParameter

from .budget_sources import (
    NAMED,
    Budgets,
    _record_index,
    check_positive,
    record_budgets_drawn,
    user_budgets,
)

if TYPE_CHECKING:
    from uldp.accountants.personalized.record_spend import RecordSampledFL


@dataclass(frozen=True)
class Rates:
    """Every record's (user's) rate and what the rates were computed for."""

    level: str  # "record" or "user"
    budgets: Budgets
    q: np.ndarray
    sigma: float
    run: RecordSampledFL | None  # the run the rates were made for (record level)
    delta: float
    note: str  # how the rates and sigma were chosen, for the assumptions

    def curve(self, rounds: int, threat_model: str | None = None, refine: bool = True):
        """epsilon*(q) of the first `rounds` rounds of this run under `threat_model`."""
        from uldp.accountants.personalized.record_spend import EpsilonCurve

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
    from uldp.accountants.personalized.record_rates import personalize
    from uldp.accountants.personalized.record_spend import EpsilonCurve, RecordSampledFL, calibrate_sigma

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
        return Rates("record", budgets, np.full(values.size, q), sigma, run, delta, note)
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
    return Rates("record", budgets, result.q, sigma, run, delta, note)


def user_rates(
    budgets: Budgets, *, sigma: float | None, rounds: int, delta: float, ids: np.ndarray | None = None
) -> Rates:
    """Every user's q_u for ULDP-AVG / -w / ULDP-SGD with per-user budgets (module docstring)."""
    from uldp.accountants.personalized import user_rates as user_level

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
    return Rates("user", budgets, result.q, sigma, curve.run, delta, note)


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


def personalize_data(
    data,
    *,
    algo: str,
    record_level: bool,
    record_budgets: Budgets | None = None,
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

    Record budgets come from `record_budgets` (a file's, `budget_sources.record_budgets_by_id`),
    `distribution`, or a budget column already loaded
    (`data.record_budget`); a non-private `algo` (default) keeps the budgets only to show that no
    budget is met. `user_budgets_from` is a preset name or a file (ULDP-AVG / -SGD).
    """
    if user_budgets_from is not None:
        budgets = user_budgets(data.n_users, user_budgets_from, seed)
        rates = user_rates(budgets, sigma=sigma, rounds=rounds, delta=delta, ids=np.arange(data.n_users))
        return with_rates(data, rates), rates.sigma
    if record_budgets is not None:
        budgets = record_budgets
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
