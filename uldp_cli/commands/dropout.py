"""`uldp dropout`: the epsilon really spent when participants drop out, with and without the
noise calibration of Algorithm 2 (Baek et al. 2021, §IV-V), and the most rounds per budget."""

from __future__ import annotations

import click

from uldp.accountants.dropout import DropoutRound, participant_weights, rate_only_round, weighted_round
from uldp.accountants.dropout_accounting import PAPER_ACCOUNTING
from uldp.accountants.dropout_report import dropout_report
from uldp.accountants.orders import orders_label
from uldp.errors import UldpError

from ..config import config_option
from ..errors import library_errors
from ..options import Interval, PositiveFloat, PositiveInt, Probability, comma_list_option, format_option
from ..progress import status
from ..render import emit
from .mechanism_flags import accounting_label, mechanism_flags, uses_rdp

SETTINGS = [  # (view, calibrated, label in the table)
    ("released", False, "none, model"),
    ("server", False, "none, server"),
    ("coalition", False, "none, coalition"),
    ("released", True, "yes, model"),
    ("server", True, "yes, server"),
    ("coalition", True, "yes, coalition"),
]
VIEW_FIELDS = {  # view -> (multiplier, epsilon, most rounds) fields of a report entry
    "released": ("multiplier", "epsilon", "max_rounds"),
    "server": ("server_multiplier", "server_epsilon", "server_max_rounds"),
    "coalition": ("coalition_multiplier", "coalition_epsilon", "coalition_max_rounds"),
}
CSV_FIELDS = [
    "kind",
    "dropout",
    "calibrated",
    "view",
    "accounting",
    "multiplier",
    "rounds",
    "epsilon",
    "budget",
    "max_rounds",
]


@click.command("dropout")
@click.option("--z", "z", type=PositiveFloat(), required=True, help="Noise multiplier z (> 0).")
@click.option(
    "--q", type=Probability(), required=True, help="Participant sampling rate per round, in (0, 1]."
)
@comma_list_option(
    "--dropout",
    "dropouts",
    item_type=Interval(0.0, 1.0, low_open=False),
    required=True,
    help="Dropout rate(s): fraction of the sampled participants lost, in [0, 1).",
)
@comma_list_option(
    "--rounds", "rounds", item_type=PositiveInt(), default=None, help="Round count(s) to account."
)
@comma_list_option(
    "--budget",
    "budgets",
    item_type=PositiveFloat(),
    default=None,
    help="Epsilon budget(s): report the most rounds under each.",
)
@click.option(
    "--participants",
    type=PositiveInt(),
    default=None,
    help="Participants sampled per round, all of weight 1 (n in the paper).",
)
@comma_list_option(
    "--examples",
    "examples",
    item_type=PositiveInt(),
    default=None,
    help="Examples n_i of each sampled participant (weights w_i = min(n_i/n_max, 1)).",
)
@click.option("--n-max", type=PositiveInt(), default=None, help="Example limit n_max for --examples.")
@click.option(
    "--min-weight-sum",
    "n0",
    type=PositiveFloat(),
    default=None,
    help="n_0 of Algorithm 3: first noise shares drawn for weight sum n_0 <= n.",
)
@click.option(
    "--colluding",
    "coalition",
    type=PositiveFloat(),
    default=None,
    help="Weight sum k of colluding surviving participants: adds their view "
    "(multiplier z sqrt((n'-k)/n'), no sampling amplification).",
)
@click.option(
    "--clip",
    type=PositiveFloat(),
    default=1.0,
    show_default=True,
    help="Clipping bound C, for the calibration noise variance.",
)
@click.option(
    "--paper/--no-paper",
    "paper",
    default=True,
    show_default=True,
    help="Also account with the paper's method (TF-Privacy RDP, classic conversion).",
)
@mechanism_flags(("rdp", "pld", "prv"))
@format_option
@config_option
def command(
    z,
    q,
    dropouts,
    rounds,
    budgets,
    participants,
    examples,
    n_max,
    n0,
    coalition,
    clip,
    paper,
    delta,
    accountant,
    conversion,
    orders,
    fmt,
):
    """Epsilon spent when a fraction of the sampled participants drop out each round.

    Without calibration the survivors' noise shares no longer add up to the intended noise
    while the sensitivity grows to 2C/n'; Algorithm 2's calibration (each survivor re-draws its
    share) restores the multiplier z for the released model.

    \b
    The paper's Table 2 (50 of 5,000 users, z = 1, delta = 1e-5):
      uldp dropout --z 1 --q 0.01 --dropout 0,0.1,0.3 --participants 50 \\
        --rounds 1,10,100,1000,10000,100000 --budget 2,4,8
    """
    if not rounds and not budgets:
        raise click.UsageError("give --rounds (epsilon after those rounds) and/or --budget (most rounds)")
    dropouts = list(dict.fromkeys(dropouts))
    rounds, budgets = sorted(set(rounds or [])), sorted(set(budgets or []))
    with library_errors():
        scenarios = {r: _scenario(r, participants, examples, n_max, n0) for r in dropouts}
    if coalition is not None:
        _check_coalition(coalition, scenarios, participants, examples)
    ours = {"accountant": accountant, "conversion": conversion, "orders": orders}
    with library_errors(), status(fmt) as update:
        results, limits = dropout_report(
            z,
            q,
            scenarios,
            rounds,
            budgets,
            delta,
            accounting=ours,
            paper=PAPER_ACCOUNTING if paper else None,
            coalition=coalition,
            progress=update,
        )

    known = participants is not None or bool(examples)
    calibration = [_calibration_entry(r, rd, z, clip, known) for r, rd in scenarios.items()]
    assumptions = _assumptions(z, q, delta, ours, paper, participants, examples, n_max, n0, clip, coalition)
    notes = _notes(scenarios, n0)
    document = {
        "command": "dropout",
        "assumptions": assumptions,
        "results": results,
        "max_rounds": limits,
        "calibration": calibration,
        "notes": notes,
    }
    if fmt == "table":
        _emit_tables(results, limits, calibration, rounds, budgets, paper, assumptions, notes, coalition)
    elif fmt == "json":
        emit("uldp dropout", [], [], fmt, document=document)
    else:
        emit(
            "uldp dropout",
            [(k, k) for k in CSV_FIELDS],
            _csv_rows(results, limits, paper, ours, coalition),
            fmt,
        )


def _check_coalition(coalition: float, scenarios: dict[float, DropoutRound], participants, examples) -> None:
    if participants is None and not examples:
        raise click.UsageError("--colluding needs the participants: give --participants or --examples")
    for dropout, rd in scenarios.items():
        if coalition >= rd.alive_weight_sum:
            raise click.BadParameter(
                f"coalition weight {coalition:g} must be below the surviving weight sum "
                f"n' = {rd.alive_weight_sum:g} (dropout {dropout:g})",
                param_hint="'--colluding'",
            )


def _scenario(dropout: float, participants, examples, n_max, n0) -> DropoutRound:
    if participants is not None and examples:
        raise click.UsageError("give --participants (all of weight 1) or --examples with --n-max, not both")
    if examples and n_max is None:
        raise click.UsageError("--examples needs --n-max (w_i = min(n_i / n_max, 1))")
    if n_max is not None and not examples:
        raise click.UsageError("--n-max is used only with --examples")
    if participants is None and not examples:
        if n0 is not None:
            raise click.UsageError(
                "--min-weight-sum needs the participants: give --participants or --examples"
            )
        return rate_only_round(dropout)
    weights = participant_weights(examples, n_max) if examples else [1.0] * participants
    try:
        return weighted_round(weights, dropout, n0)
    except UldpError as err:
        option = "--min-weight-sum" if "n_0" in str(err) else "--dropout"
        raise click.BadParameter(str(err), param_hint=f"'{option}'") from None


def _calibration_entry(dropout: float, rd: DropoutRound, z: float, clip: float, known: bool) -> dict:
    """Variances need the real weight sums (`known`); the ratio needs only n'/n."""
    return {
        "dropout": dropout,
        "weight_sum": rd.weight_sum if known else None,
        "alive_weight_sum": rd.alive_weight_sum if known else None,
        "reference_weight_sum": rd.reference if known else None,
        "alive_fraction": rd.alive_weight_sum / rd.weight_sum,
        "share_variance": rd.share_variance(z, clip) if known else None,
        "calibration_variance": rd.calibration_variance(z, clip) if known else None,
        "variance_ratio": rd.reference / rd.alive_weight_sum,
    }


def _pivot(
    entries: list[dict], which: list[str], field: int, paper_field: str, column: str, coalition: float | None
) -> list[dict]:
    """One row per (dropout, calibration setting, accounting), one column per `column` value.

    `field` indexes VIEW_FIELDS (1: epsilon, 2: most rounds); `paper_field` is read for the paper.
    """
    rows = []
    for r in dict.fromkeys(e["dropout"] for e in entries):
        for view, calibrated, text in SETTINGS:
            if view == "coalition" and coalition is None:
                continue
            for w in which:
                if view != "released" and w == "paper":
                    continue  # the paper accounts the released model only
                chosen = [e for e in entries if e["dropout"] == r and e["calibrated"] == calibrated]
                name = paper_field if w == "paper" else VIEW_FIELDS[view][field]
                row = {"dropout": r, "setting": text, "accounting": w}
                row.update({f"{column}{e[column]}": e[name] for e in chosen})
                rows.append(row)
    return rows


def _emit_tables(results, limits, calibration, rounds, budgets, paper, assumptions, notes, coalition) -> None:
    which = ["ours", "paper"] if paper else ["ours"]
    leading = [("dropout", "dropout"), ("setting", "calibration"), ("accounting", "accounting")]
    if rounds:
        rows = _pivot(results, which, 1, "paper_epsilon", "rounds", coalition)
        columns = leading + [(f"rounds{t}", f"T={t:g}") for t in rounds]
        emit("uldp dropout: epsilon after T rounds", columns, rows, "table")
    if budgets:
        rows = _pivot(limits, which, 2, "paper_max_rounds", "budget", coalition)
        columns = leading + [(f"budget{b}", f"eps <= {b:g}") for b in budgets]
        emit("uldp dropout: most rounds within budget", columns, rows, "table")
    columns = [
        ("dropout", "dropout"),
        ("alive_fraction", "n'/n"),
        ("share_variance", "first share (l.15)"),
        ("calibration_variance", "fresh share (l.22)"),
        ("variance_ratio", "ratio"),
    ]
    emit(
        "Calibration noise per surviving participant of weight 1",
        columns,
        calibration,
        "table",
        assumptions=assumptions,
        notes=notes,
    )


def _csv_rows(results, limits, paper, ours, coalition) -> list[dict]:
    rows = []
    views = [("ours", "released"), ("ours", "server")]
    if coalition is not None:
        views.append(("ours", "coalition"))
    if paper:
        views.append(("paper", "released"))
    for kind, entries in (("epsilon", results), ("max_rounds", limits)):
        for e in entries:
            for which, view in views:
                multiplier, eps_field, rounds_field = VIEW_FIELDS[view]
                if which == "paper":
                    eps_field, rounds_field = "paper_epsilon", "paper_max_rounds"
                row = {
                    "kind": kind,
                    "dropout": e["dropout"],
                    "calibrated": e["calibrated"],
                    "view": view,
                    "accounting": "paper" if which == "paper" else accounting_label(**ours),
                    "multiplier": e[multiplier],
                }
                if kind == "epsilon":
                    row.update(rounds=e["rounds"], epsilon=e[eps_field])
                else:
                    row.update(budget=e["budget"], max_rounds=e[rounds_field])
                rows.append(row)
    return rows


def _assumptions(z, q, delta, ours, paper, participants, examples, n_max, n0, clip, coalition=None) -> dict:
    server_accounting = (
        "RDP T/(a-1) ln(1 - q + q e^{(a-1) a/(2 m^2)}), converted as ours"
        if uses_rdp(ours["accountant"])
        else "exact delta(eps) = E_K[delta_Gauss(eps; sqrt(K)/m)], K ~ Bin(T, q), inverted by "
        "bisection (no PLD/PRV discretisation needed)"
    )
    out = {
        "mechanism": (
            f"each round every participant is sampled with probability q = {q:g} "
            f"(Poisson), intended noise multiplier z = {z:g}; the same dropout rate in every round"
        ),
        "neighbouring": (
            "one participant's update replaced by another of the same weight, weight sum public "
            "(Propositions 1-2): sensitivity 2C/n' of the weighted average, weights <= 1; "
            "accounted as the add/remove pair with shift 2C/n' (the replace pair has both "
            "shifts |a|, |b| <= C/n')"
        ),
        "released model (model rows)": (
            "one Poisson-subsampled Gaussian step per round at rate q: subsampling "
            "amplification holds only for observers who do not know the sample "
            "U^t (outsiders who see the released models)"
        ),
        "server view (server rows)": (
            "no amplification: the server draws U^t itself (Algorithm 2 line 11, "
            "Algorithm 3 line 16), so it sees a plain Gaussian of multiplier m in "
            "the K ~ Bin(T, q) rounds the user takes part in, K known to it; " + server_accounting
        ),
        "no calibration": "multiplier z sqrt(n'/n_ref) (shares drawn for n_ref, sensitivity 2C/n', §IV-B)",
        "calibrated, released model": (
            "multiplier z: outsiders who see the released models only (Algorithm 2 lines 21-24)"
        ),
        "calibrated, server view": (
            "multiplier z / sqrt(1 + n_ref/n'): the honest-but-curious server holds "
            "the uncalibrated aggregate (line 19) and every calibration message "
            "(line 22), two independent noisy copies of the same average"
        ),
        "colluding participants": (
            "not covered by the z figure: surviving participants of weight k know "
            "their own shares and see multiplier z sqrt((n'-k)/n') calibrated, "
            "z sqrt((n'-k)/n_ref) uncalibrated; in Algorithm 3 they also know U^t, "
            "so they are accounted like the server (no amplification); "
            + (
                f"coalition rows: k = {coalition:g}"
                if coalition is not None
                else "give --colluding K for their rows"
            )
        ),
        "dropouts": (
            "not data-dependent and not part of the sampling; the heaviest participants drop "
            "(worst case) when weights are given; no dropouts during the calibration step "
            "(lines 21-22, §V-B)"
        ),
        "delta": f"{delta:g}",
        "accounting (ours)": accounting_label(**ours),
        "calibration column": (
            "none / yes = without / with calibration; model = released model "
            "(outsiders); server = the server's view; coalition = colluding survivors"
        ),
    }
    if uses_rdp(ours["accountant"]):
        out["orders"] = orders_label(ours["orders"])
    if paper:
        out["accounting (paper)"] = (
            "as the paper's Table 2: TF-Privacy RDP, classic conversion "
            "eps = rho + log(1/delta)/(alpha-1), "
            + orders_label(PAPER_ACCOUNTING["orders"])
            + "; released model only"
        )
    if participants is not None:
        out["participants"] = f"{participants} sampled per round, weight 1 each"
    elif examples:
        out["participants"] = f"{len(examples)} sampled per round, w_i = min(n_i/{n_max}, 1)"
    else:
        out["participants"] = (
            "rates only: n'/n = 1 - dropout exactly; with N participants of weight 1 "
            "the real n'/n is floor((1 - dropout) N)/N (6/7 for 7 at 10%): give "
            "--participants for that"
        )
    out["n_ref"] = (
        f"n_0 = {n0:g} (Algorithm 3)" if n0 is not None else "n, the sampled weight sum (Algorithm 2)"
    )
    out["clip"] = f"C = {clip:g} (variances per coordinate)"
    out["bound"] = "every epsilon is an upper bound at this delta under these assumptions"
    return out


def _notes(scenarios: dict[float, DropoutRound], n0: float | None) -> list[str]:
    notes = [
        "fresh share (l.22): the noise each survivor draws anew, n' w sigma'^2 = 4 C^2 z^2 w / n' "
        "(Algorithm 2 line 22; Algorithm 3 line 34); ratio = fresh / first share variance = n_ref / n'",
        "server view: Algorithm 2 runs lines 21-22 even when nobody dropped; a round without "
        "dropouts that skips them gives the server multiplier z sqrt(n/n_ref) instead",
    ]
    if n0 is not None and any(rd.alive_weight_sum < rd.reference for rd in scenarios.values()):
        notes.append(
            "some dropout leaves n' < n_0: Algorithm 3 assumes n' >= n_0; the uncalibrated "
            "multiplier is then below z"
        )
    return notes
