"""`uldp personalize`: per-record sampling probabilities from per-record budgets (rPDP-FL)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import click
import numpy as np

from uldp.accountants.conversion import CONVERSIONS
from uldp.accountants.personalized.budgets import DISTRIBUTIONS, describe, sample_budgets
from uldp.accountants.personalized.rate_search import BISECT_TOLERANCE, fit_scf
from uldp.accountants.personalized.record_rates import (
    CAP_BUDGET_RTOL,
    DEFAULT_Q_MIN,
    INFEASIBLE,
    METHODS,
    STATUSES,
    Personalization,
    personalization_assumptions,
    personalize,
)
from uldp.accountants.personalized.record_spend import THREAT_MODELS, EpsilonCurve, RecordSampledFL
from uldp.accountants.personalized.record_spend import calibrate_sigma as calibrate_noise
from uldp.accountants.personalized.user_rates import (
    calibrate_user_sigma,
    server_epsilon,
    user_assumptions,
    user_run,
)

from ..aliases import AliasedOption
from ..config import config_option
from ..errors import library_errors, one_line
from ..options import (
    SEED_MAX,
    Interval,
    OutputFile,
    PositiveFloat,
    PositiveInt,
    Probability,
    delta_option,
    format_option,
    given_source,
)
from ..personalize_io import OUTPUT_COLUMNS, Budgets, draw_plot, read_budgets, write_rates
from ..progress import status
from ..render import emit

METHOD_COLUMNS = [
    ("method", "method"),
    ("seconds", "seconds"),
    ("q", "q: min / median / max"),
    ("unused", "unused eps"),
    ("overspent", "overspent"),
    ("overspend_max", "max overspend"),
    ("r2", "R^2"),
]
CSV_FIELDS = [
    "method",
    "records",
    "in_range",
    "q_min",
    "q_median",
    "q_max",
    "spent_max",
    "spent_over_budget_mean",
    "unused_mean",
    "unused_max",
    "overspent",
    "overspent_up_to",
    "overspend_max",
    "overspend_max_relative",
    "overspent_budget_max",
    "seconds",
    "check_seconds",
    "evaluations",
    "r2",
    "tolerance",
    "grid_points",
    "search",
]
BUDGET_COLUMNS = [
    ("row", "which"),
    ("count", "records"),
    ("budget", "budget"),
    ("q", "q"),
    ("spent", "epsilon spent"),
    ("status", "status"),
]
#: --records at most: 1e7 records take about 1 GB with every method (docs/performance.md).
MAX_RECORDS = 10**7
#: --sigma at least: at 0.001 epsilon*(q) is above 5e5 at every rate, so no smaller sigma can
#: meet a budget; far below it 1 / sigma^2 overflows a double.
MIN_SIGMA = 1e-3
#: --sigma at most: sigma^2 overflows a double near 1.3e154 (an OverflowError); 1e6 is far past
#: any noise in use (at tau = T = 50, sigma = 1e3 already gives epsilon*(1) = 0.18).
MAX_SIGMA = 1e6
#: --local-steps and --rounds at most: their product stays an exact double (< 2^53).
MAX_STEPS = 10**7
#: --tolerance at most: a coarser absolute tolerance would hand q_min to every budget below
#: about 0.01 of the range.
MAX_TOLERANCE = 0.01
#: Distinct budgets --method bisect serves at most: each costs about 15 evaluations of
#: epsilon*(q) (0.5 ms each), so 10,000 take about a minute; exact serves any number.
MAX_BISECT_BUDGETS = 10_000


class SeedInt(click.IntRange):
    """An integer seed in a range; named "integer" (Click's "integer range" reads oddly in
    "'1e26' is not a valid integer range")."""

    name = "integer"


# Budget sets with at most this many distinct values are listed value by value; larger ones
# by quantiles.
LISTED_BUDGETS = 12
QUANTILES = (0, 1, 10, 50, 90, 99, 100)


#: --level: whose budgets they are. record: rPDP-FL (slides ch. 3); user: ULDP-AVG / ULDP-SGD with
#: per-user sampling (ULDP-FL Theorem 3, Algorithm 4; PULDP-AVG), `accountants.personalized.user_rates`.
LEVELS = ("record", "user")


@click.command("personalize")
@click.option(
    "--level",
    type=click.Choice(LEVELS),
    default="record",
    show_default=True,
    help="Whose budgets: records (rPDP-FL) or users (ULDP-AVG / ULDP-SGD, each user sampled "
    "with its own q_u).",
)
@click.option(
    "--epsilon-csv",
    "budgets_path",
    cls=AliasedOption,
    aliases=("--budgets",),
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="CSV file of per-record (per-user with --level user) epsilon budgets, with a header line.",
)
@click.option(
    "--epsilon-column",
    "budget_column",
    cls=AliasedOption,
    aliases=("--budget-column",),
    default="epsilon",
    show_default=True,
    help="Column of --epsilon-csv holding each record's epsilon budget.",
)
@click.option(
    "--id-column",
    default=None,
    help="Column of --epsilon-csv naming the records or users [default: id, else row numbers].",
)
@click.option(
    "--distribution",
    type=click.Choice(list(DISTRIBUTIONS)),
    default=None,
    help="Draw the budgets from an rPDP-FL preset instead of --epsilon-csv.",
)
@click.option(
    "--records",
    type=PositiveInt(high=MAX_RECORDS),
    default=1000,
    show_default=True,
    help="Number of records (users with --level user) drawn with --distribution, in [1, 10^7].",
)
@click.option(
    "--seed",
    type=SeedInt(0, SEED_MAX),
    default=0,
    show_default=True,
    help="Seed of --distribution.",
)
@click.option(
    "--sigma",
    type=Interval(MIN_SIGMA, MAX_SIGMA, low_open=False, high_open=False),
    default=None,
    help="Noise multiplier of DP-SGD (of each round's Gaussian with --level user), in [0.001, 1e6].",
)
@click.option(
    "--calibrate-sigma",
    is_flag=True,
    help="Choose sigma so that the largest budget is reached at q = --q-cap.",
)
@click.option(
    "--local-steps",
    "tau",
    cls=AliasedOption,
    aliases=("--tau",),
    type=PositiveInt(high=MAX_STEPS),
    default=None,
    help="Local DP-SGD steps tau per round, in [1, 10^7]; required with --level record.",
)
@click.option(
    "--rounds",
    type=PositiveInt(high=MAX_STEPS),
    required=True,
    help="Federated rounds T, in [1, 10^7].",
)
@click.option(
    "--silo-q",
    "client_rate",
    cls=AliasedOption,
    aliases=("--client-rate",),
    type=Probability(),
    default=1.0,
    show_default=True,
    help="Silo (client) sampling rate lambda per round, in (0, 1].",
)
@delta_option
@click.option(
    "--threat-model",
    type=click.Choice(THREAT_MODELS),
    default="untrusted",
    show_default=True,
    help="untrusted clients / third parties, or an honest-but-curious server.",
)
@click.option(
    "--fixed-schedule",
    is_flag=True,
    help="Server model only: every client takes part in exactly round(lambda T) rounds "
    "fixed in advance (no client sampling); then rho_FL = k tau rho.",
)
@click.option(
    "--conversion",
    type=click.Choice(CONVERSIONS),
    default="improved",
    show_default=True,
    help="RDP to DP: improved (Lemma 2) or classic (the slides').",
)
@click.option(
    "--method",
    type=click.Choice(METHODS),
    default="exact",
    show_default=True,
    help="exact (never over budget, within 0.1% of the best q), scf or bisect.",
)
@click.option("--compare", is_flag=True, help="Also run the other two methods and compare them.")
@click.option(
    "--q-cap",
    type=Probability(),
    default=1.0,
    show_default=True,
    help="Largest sampling probability handed out, in (0, 1].",
)
@click.option(
    "--q-min",
    type=Probability(),
    default=DEFAULT_Q_MIN,
    show_default=True,
    help="Smallest usable sampling probability, in (0, 1] and <= --q-cap; lower budgets are infeasible.",
)
@click.option(
    "--infeasible",
    type=click.Choice(INFEASIBLE),
    default="clamp",
    show_default=True,
    help="Budgets above epsilon*(q-cap) / below epsilon*(q-min): clamp (q = cap / "
    "q = 0), exclude (q = 0), or fail.",
)
@click.option(
    "--tolerance",
    type=PositiveFloat(high=MAX_TOLERANCE),
    default=BISECT_TOLERANCE,
    show_default=True,
    help=f"Absolute tolerance in q of --method bisect (or --compare), in (0, {MAX_TOLERANCE:g}].",
)
@click.option(
    "--out",
    type=OutputFile(),
    default=None,
    help="Write every record's id, budget, q, epsilon spent and status to this CSV.",
)
@click.option(
    "--plot",
    type=OutputFile(),
    default=None,
    help="Draw epsilon*(q), the SCF fit and the records' (q, budget) to this PNG.",
)
@format_option
@config_option
def command(
    level,
    budgets_path,
    budget_column,
    id_column,
    distribution,
    records,
    seed,
    sigma,
    calibrate_sigma,
    tau,
    rounds,
    client_rate,
    delta,
    threat_model,
    fixed_schedule,
    conversion,
    method,
    compare,
    q_cap,
    q_min,
    infeasible,
    tolerance,
    out,
    plot,
    fmt,
):
    """Per-record sampling probabilities q from per-record budgets (rPDP-FL, slides ch. 3).

    Each record gets the largest q whose epsilon*(q), over T rounds of tau DP-SGD steps with
    silo (client) sampling lambda, stays within its budget.

    \b
      uldp personalize --distribution group-3 --sigma 1.2 --local-steps 10 --rounds 50
      uldp personalize --epsilon-csv budgets.csv --calibrate-sigma --local-steps 10 --rounds 50 \\
          --out q.csv
      uldp personalize --distribution individual-1000 --calibrate-sigma --local-steps 10 \\
          --rounds 50 --compare --plot curve.png

    With --level user the budgets are per user and each user gets its own user-level sampling
    probability q_u for ULDP-AVG / ULDP-SGD (ULDP-FL Theorem 3, Algorithm 4):

    \b
      uldp personalize --level user --distribution group-3 --records 100 --sigma 5 --rounds 100
    """
    if (budgets_path is None) == (distribution is None):
        raise click.UsageError("give exactly one of --epsilon-csv FILE.csv or --distribution NAME")
    ctx = click.get_current_context()
    _refuse_ignored(ctx, budgets_path is not None, method, compare)
    if level == "user":
        _refuse_record_options(ctx)
    elif tau is None:
        raise click.UsageError("Missing option '--local-steps' (required with --level record).")
    if (sigma is None) == (not calibrate_sigma):
        raise click.UsageError("give exactly one of --sigma or --calibrate-sigma")
    if q_min > q_cap:
        raise click.BadParameter(f"{q_min:g} is above --q-cap {q_cap:g}", param_hint="'--q-min'")
    if fixed_schedule and threat_model != "server":
        raise click.BadParameter("applies to --threat-model server only", param_hint="'--fixed-schedule'")
    if fixed_schedule and client_rate * rounds < 0.5:
        raise click.BadParameter(
            f"needs round(--silo-q x --rounds) >= 1 rounds, got round({client_rate:g} x {rounds}) = 0",
            param_hint="'--fixed-schedule'",
        )
    budgets = _budgets(budgets_path, budget_column, id_column, distribution, records, seed, level)
    run = (
        user_run(sigma or 1.0, rounds)
        if level == "user"
        else RecordSampledFL(sigma or 1.0, tau, rounds, client_rate, threat_model, fixed_schedule)
    )
    methods = [method] + [m for m in METHODS if m != method] if compare else [method]
    if "bisect" in methods:
        _refuse_large_bisect(budgets.values, compare)
    if calibrate_sigma and not budgets.values.max() > 0:
        raise click.BadParameter(
            "every budget is 0: no noise meets it; give budgets > 0 or --sigma",
            param_hint="'--calibrate-sigma'",
        )
    with library_errors(), status(fmt, "personalizing") as update:
        calibration = None
        largest = float(budgets.values.max())
        if calibrate_sigma:
            update("calibrating sigma")
            calibration = (
                calibrate_user_sigma(largest, rounds, delta, q_cap, conversion)
                if level == "user"
                else calibrate_noise(run, delta, largest, q_cap, conversion)
            )
            run = replace(run, sigma=calibration.value)
        curve = EpsilonCurve(run, delta, conversion)
        results = []
        for name in methods:
            update(f"method {name}")
            results.append(
                personalize(
                    budgets.values,
                    curve,
                    method=name,
                    q_min=q_min,
                    q_cap=q_cap,
                    infeasible=infeasible,
                    tolerance=tolerance,
                    cap_budget=_spent_exactly(calibration, largest),
                )
            )
        chosen = results[0]
        if out is not None:
            update("writing the rates")
            with _writing(out, "--out"):
                write_rates(out, budgets, chosen)
        if plot is not None:
            update("drawing")
            with _writing(plot, "--plot"):
                _plot(plot, curve, chosen, run, delta, level)
    _render(fmt, level, budgets, run, curve, calibration, results, infeasible, out, plot)


# Options that only one input or method reads: (option's parameter name, its flag, when it is
# read, what reads it). A value the user gave (on the command line or in --config) that nothing
# reads is refused, so that no one believes it changed the result.
_READ_ONLY_WITH = (
    ("records", "--records", "distribution", "--distribution"),
    ("seed", "--seed", "distribution", "--distribution"),
    ("budget_column", "--epsilon-column", "file", "--epsilon-csv"),
    ("id_column", "--id-column", "file", "--epsilon-csv"),
    ("tolerance", "--tolerance", "bisect", "--method bisect (or --compare)"),
)


def _refuse_ignored(ctx: click.Context, from_file: bool, method: str, compare: bool) -> None:
    """Refuse an option the chosen input or method ignores, naming it and what reads it."""
    read = {"distribution": not from_file, "file": from_file, "bisect": method == "bisect" or compare}
    for name, flag, when, reader in _READ_ONLY_WITH:
        if given_source(ctx, name) is not None and not read[when]:
            raise click.BadParameter(f"it is read only with {reader}; leave it out", param_hint=f"'{flag}'")


# Options that describe only the record-level run (rPDP-FL's DP-SGD steps, silo sampling and
# threat models): the user-level run has one Gaussian per round over every silo.
_RECORD_ONLY = (
    ("tau", "--local-steps"),
    ("client_rate", "--silo-q"),
    ("threat_model", "--threat-model"),
    ("fixed_schedule", "--fixed-schedule"),
)


def _refuse_record_options(ctx: click.Context) -> None:
    """Refuse, in one line naming them all, the record-level options given with --level user."""
    given = [flag for name, flag in _RECORD_ONLY if given_source(ctx, name) is not None]
    if given:
        raise click.BadParameter(
            "read only with --level record (the user-level run is one Gaussian per round over "
            f"every silo); leave {'them' if len(given) > 1 else 'it'} out",
            param_hint=", ".join(f"'{flag}'" for flag in given),
        )


def _spent_exactly(calibration, largest: float) -> float | None:
    """The budget sigma was calibrated to spend at q_cap, for `personalize` to mark spent
    exactly; None without a calibration, or where it stopped short of the budget (at the end of
    its sigma range: that budget is left unspent, capped)."""
    if calibration is None or largest > calibration.epsilon * (1 + CAP_BUDGET_RTOL):
        return None
    return largest


def _refuse_large_bisect(values: np.ndarray, compare: bool) -> None:
    """Refuse bisection on more distinct budgets than it serves in about a minute, before any
    work (it evaluates epsilon*(q) about 15 times per distinct budget)."""
    distinct = np.unique(values).size
    if distinct > MAX_BISECT_BUDGETS:
        raise click.BadParameter(
            f"bisect serves at most {MAX_BISECT_BUDGETS} distinct budgets (about 15 evaluations "
            f"of epsilon*(q) each), got {distinct}; use --method exact (any number of budgets, "
            "never over budget)" + (" without --compare" if compare else ""),
            param_hint="'--compare'" if compare else "'--method'",
        )


@contextmanager
def _writing(path: Path, option: str) -> Iterator[None]:
    try:
        yield
    except OSError as error:
        raise click.BadParameter(
            f"{path}: cannot write it ({one_line(error)})", param_hint=f"'{option}'"
        ) from error


def _budgets(path, budget_column, id_column, distribution, records, seed, level) -> Budgets:
    if path is not None:
        return read_budgets(path, budget_column, id_column or "id", id_column is not None)
    values = sample_budgets(distribution, records, seed)
    return Budgets(
        np.arange(1, records + 1),  # row numbers from 1, as a file without ids gets them
        "id",
        "epsilon",
        values,
        f"{describe(distribution)}; {records} {_unit(level)}, seed {seed}",
    )


def _unit(level: str) -> str:
    """Whom the budgets belong to, in the output's words."""
    return "users" if level == "user" else "records"


def _plot(
    path: Path, curve: EpsilonCurve, chosen: Personalization, run: RecordSampledFL, delta: float, level: str
) -> None:
    feasible = chosen.feasible
    qs = np.geomspace(feasible.q_min, feasible.q_cap, 400)
    if level == "user":
        title = (
            f"ULDP-AVG / ULDP-SGD, per-user sampling q_u (user level)\nsigma = {run.sigma:g}, "
            f"T = {run.rounds} rounds, delta = {delta:g}"
        )
    else:
        model = run.threat_model + (", fixed schedule" if run.fixed_schedule else "")
        title = (
            f"rPDP-FL, {model}\nsigma = {run.sigma:g}, local steps tau = {run.local_steps}, "
            f"T = {run.rounds} rounds, silo-q lambda = {run.client_rate:g}, delta = {delta:g}"
        )
    draw_plot(path, qs, curve(qs), fit_scf(curve, feasible.q_cap), chosen, title, _unit(level))


def _render(fmt, level, budgets: Budgets, run, curve, calibration, results, infeasible, out, plot) -> None:
    chosen = results[0]
    feasible = chosen.feasible
    off = chosen.outside
    summaries = [r.summary() for r in results]
    if level == "user":
        lines = user_assumptions(chosen, curve, budgets.source, calibration=calibration)
    else:
        lines = personalization_assumptions(chosen, curve, budgets.source, run.sigma, calibration=calibration)
    assumptions = lines.as_dict()
    unit = _unit(level)
    notes = _notes(summaries, off, feasible, infeasible, out, plot, budgets, unit)
    budget_rows = _budget_rows(chosen)
    document = {
        "command": "personalize",
        "level": level,
        "assumptions": assumptions,
        "sigma": run.sigma,
        "calibrated_sigma": calibration is not None,
        # The server draws the user sample: its epsilon for the user sampled most (the largest
        # q_u), a bound for every user (user level only; the assumptions list it per rate).
        "server_epsilon": (
            server_epsilon(run.sigma, run.rounds, curve.delta, curve.conversion, float(chosen.q.max()))
            if level == "user"
            else None
        ),
        "feasible": vars(feasible),
        "infeasible": {
            "policy": infeasible,
            "below": off.low,
            "below_range": off.low_range,
            "above": off.high,
            "above_range": off.high_range,
        },
        "methods": summaries,
        "budgets": budget_rows,
        "out": str(out) if out else None,
        "plot": str(plot) if plot else None,
        "notes": notes,
    }
    if fmt == "table":
        columns_of = [(key, unit if key == "count" else title) for key, title in BUDGET_COLUMNS]
        shown = [c for c in columns_of if any(row[c[0]] is not None for row in budget_rows)]
        emit("budgets against epsilon spent (" + chosen.method + ")", shown, budget_rows, fmt)
    rows, columns = [_table_row(summary) for summary in summaries], METHOD_COLUMNS
    if fmt == "csv":
        rows, columns = summaries, [(key, key) for key in CSV_FIELDS]
    emit("uldp personalize", columns, rows, fmt, assumptions=assumptions, document=document, notes=notes)


def _table_row(s: dict) -> dict:
    q = f"{s['q_min']:.4g} / {s['q_median']:.4g} / {s['q_max']:.4g}" if s["q_min"] is not None else None
    return {
        "method": s["method"],
        "seconds": s["seconds"] + s["check_seconds"],
        "q": q,
        "unused": s["unused_mean"],
        "overspent": _overspent_text(s),
        "overspend_max": s["overspend_max"],
        "r2": f"{s['r2']:.6f}" if s.get("r2") is not None else None,
    }


def _overspent_text(s: dict) -> int | str:
    if s["overspent_up_to"] == s["overspent"]:
        return s["overspent"]
    return f"at least {s['overspent']} / up to {s['overspent_up_to']}"


def _budget_rows(result: Personalization) -> list[dict]:
    budgets = result.budgets
    picks: list[tuple[str, int | None, int]]
    if result.distinct <= LISTED_BUDGETS:
        values, first, counts = np.unique(budgets, return_index=True, return_counts=True)
        picks = [(f"budget {value:g}", int(count), int(i)) for value, i, count in zip(values, first, counts)]
    else:
        n = budgets.size
        ranks = [min(n - 1, int(round(p / 100 * (n - 1)))) for p in QUANTILES]
        order = np.argpartition(budgets, ranks)  # the records at those ranks, without a full sort
        picks = [(f"p{p}", None, int(order[r])) for p, r in zip(QUANTILES, ranks)]
    return [
        {
            "row": label,
            "count": count,
            "budget": float(budgets[i]),
            "q": float(result.q[i]),
            "spent": float(result.spent[i]),
            "status": STATUSES[result.status[i]],
        }
        for label, count, i in picks
    ]


def _notes(summaries, off, feasible, infeasible, out, plot, budgets: Budgets, unit: str) -> list[str]:
    notes = []
    if off.low or off.high:
        if infeasible == "exclude":
            action = f"these {unit} get q = 0 (never sampled, they spend nothing)"
        else:
            action = "; ".join(
                ([f"those above get q = {feasible.q_cap:g}"] if off.high else [])
                + (["those below get q = 0 (never sampled)"] if off.low else [])
            )
        notes.append(f"outside the feasible range: {off.message(feasible)}; {action}")
    for s in summaries:
        notes.append(_method_note(s, unit))
    each = unit[:-1]  # "record" or "user"
    if out is None:
        notes.append(f"per-{each} rates were not written; add --out q.csv")
    else:
        columns = ", ".join([budgets.id_name, budgets.budget_name, *OUTPUT_COLUMNS])
        notes.append(f"per-{each} rates written to {out} ({budgets.values.size} rows: {columns})")
    if plot is not None:
        notes.append(f"plot written to {plot}")
    return notes


def _method_note(s: dict, unit: str = "records") -> str:
    """What was checked about each method's epsilon spent, in one line."""
    name, records = s["method"], s["records"]
    if name != "scf":
        # The epsilon spent is epsilon*(q) of the rate handed out, evaluated while searching and
        # compared with the budget there; nothing is re-accounted a second time.
        return (
            f"{name}: every {unit[:-1]}'s epsilon spent, epsilon*(q) evaluated at the rate it "
            "was given, is <= its budget"
        )
    how = "a fitted inverse is not a bound; every rate was re-accounted (" + s["check"] + ")"
    over, up_to = s["overspent"], s["overspent_up_to"]
    if up_to == 0:
        return f"scf: no {unit[:-1]} overspends its budget in this run; {how}"
    if over == up_to:
        count = f"{over} of {records} {unit} OVERSPEND their budget"
    else:
        count = (
            f"at least {over} / up to {up_to} of {records} {unit} OVERSPEND their budget "
            "(status overspent / possibly-overspent in --out)"
        )
    if over:
        count += f" (by up to {s['overspend_max']:.4g}, {100 * s['overspend_max_relative']:.3g}%" + (
            " where certain)" if over != up_to else ")"
        )
    return f"scf: {count}; {how}"
