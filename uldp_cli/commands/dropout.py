"""`uldp dropout`: the epsilon really spent when participants drop out, with and without the
noise calibration of Algorithm 2 (Baek et al. 2021, §IV-V), and the most rounds per budget."""

from __future__ import annotations

import click

from uldp.accountants.assumptions import accounting_label
from uldp.accountants.dropout.accounting import PAPER_ACCOUNTING, dropout_epsilon
from uldp.accountants.dropout.assumptions import dropout_assumptions
from uldp.accountants.dropout.rounds import DropoutRound, participant_weights, rate_only_round, weighted_round
from uldp.accountants.dropout.tables import dropout_report
from uldp.errors import UldpError

from ..accounting_options import refuse_unread_rdp_options
from ..aliases import AliasedOption
from ..config import config_option
from ..dropout_plot import draw_dropout_plot
from ..errors import library_errors
from ..options import (
    COUNT_MAX,
    EpsilonBudget,
    Interval,
    NoiseMultiplier,
    OutputFile,
    PositiveFloat,
    PositiveInt,
    Probability,
    comma_list_option,
    format_option,
    zero_epsilon_note,
)
from ..progress import status
from ..render import emit
from .mechanism_flags import mechanism_flags

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


#: --silos-per-round, --min-weight-sum, --colluding: n and weight sums up to 1e6 participants a round.
#: The worst-case dropout is found over one weight per participant (1e9 took 215 s and 23 GB).
PARTICIPANTS_MAX = 10**6
#: --examples, --n-max: example counts.
EXAMPLES_MAX = 10**12
#: --clip: C enters the calibration noise variance as z^2 C^2; a bound above 1e6 (in units of
#: the update norm) clips nothing.
CLIP_MAX = 1e6


@click.command("dropout")
@click.option(
    "--sigma",
    cls=AliasedOption,
    aliases=("--z",),
    type=NoiseMultiplier(),
    required=True,
    help="Noise multiplier (z in the paper), in [1e-6, 1e6].",
)
@click.option(
    "--silo-q",
    "user_q",
    cls=AliasedOption,
    aliases=("--user-q", "--q"),
    type=Probability(),
    required=True,
    help="Silo (participant) sampling rate q per round, in (0, 1].",
)
@comma_list_option(
    "--dropout",
    "dropouts",
    item_type=Interval(0.0, 1.0, low_open=False),
    required=True,
    help="Dropout rate(s): fraction of the sampled participants lost, in [0, 1).",
)
@comma_list_option(
    "--rounds",
    "rounds",
    item_type=PositiveInt(COUNT_MAX),
    default=None,
    help="Round count(s) T to account, each in [1, 1e12].",
)
@comma_list_option(
    "--epsilon",
    "epsilons",
    cls=AliasedOption,
    aliases=("--budget",),
    item_type=EpsilonBudget(),
    default=None,
    help="Epsilon budget(s), each in [1e-6, 1e6]: report the most rounds within each.",
)
@click.option(
    "--silos-per-round",
    "participants",
    cls=AliasedOption,
    aliases=("--participants",),
    type=PositiveInt(PARTICIPANTS_MAX),
    default=None,
    help="Silos (participants) sampled per round, all of weight 1 (n in the paper), in [1, 1e6].",
)
@comma_list_option(
    "--examples",
    "examples",
    item_type=PositiveInt(EXAMPLES_MAX),
    default=None,
    help="Examples n_i of each sampled participant (weights w_i = min(n_i/n_max, 1)), each in [1, 1e12].",
)
@click.option(
    "--n-max",
    type=PositiveInt(EXAMPLES_MAX),
    default=None,
    help="Example limit n_max for --examples, in [1, 1e12].",
)
@click.option(
    "--min-weight-sum",
    "n0",
    type=PositiveFloat(PARTICIPANTS_MAX),
    default=None,
    help="n_0 of Algorithm 3: first noise shares drawn for weight sum n_0 <= n (at most 1e6).",
)
@click.option(
    "--colluding",
    "coalition",
    type=PositiveFloat(PARTICIPANTS_MAX),
    default=None,
    help="Weight sum k of colluding surviving participants (at most 1e6): adds their view "
    "(multiplier z sqrt((n'-k)/n'), no sampling amplification).",
)
@click.option(
    "--clip",
    type=PositiveFloat(CLIP_MAX),
    default=1.0,
    show_default=True,
    help="Clipping bound C, for the calibration noise variance, in (0, 1e6].",
)
@click.option(
    "--paper/--no-paper",
    "paper",
    default=True,
    show_default=True,
    help="Also account with the paper's method (TF-Privacy RDP, classic conversion).",
)
@click.option(
    "--plot",
    type=OutputFile(),
    default=None,
    help="Draw the released model's epsilon against rounds, with and without dropouts, to this PNG.",
)
@click.option(
    "--verbose",
    is_flag=True,
    default=False,
    help="Under the tables, print every assumption, not only the ones that matter first. For the "
    "table only: --format json always has them all (csv has none), so there it changes nothing.",
)
@mechanism_flags(("rdp", "pld", "prv"))
@format_option
@config_option
def command(
    sigma,
    user_q,
    dropouts,
    rounds,
    epsilons,
    participants,
    examples,
    n_max,
    n0,
    coalition,
    clip,
    paper,
    plot,
    verbose,
    delta,
    accountant,
    conversion,
    orders,
    fmt,
):
    """Epsilon spent when a fraction of the sampled participants drop out each round.

    Without calibration the survivors' noise shares no longer add up to the intended noise
    while the sensitivity grows to 2C/n'; Algorithm 2's calibration (each survivor re-draws its
    share) restores the noise multiplier sigma (the paper's z) for the released model.

    \b
    The paper's Table 2 (50 of 5,000 users, z = sigma = 1, delta = 1e-5):
      uldp dropout --sigma 1 --silo-q 0.01 --dropout 0,0.1,0.3 --silos-per-round 50 \\
        --rounds 1,10,100,1000,10000,100000 --epsilon 2,4,8
    """
    z, q = sigma, user_q  # the paper's names, used below
    if not rounds and not epsilons:
        raise click.UsageError("give --rounds (epsilon after those rounds) and/or --epsilon (most rounds)")
    dropouts = list(dict.fromkeys(dropouts))
    rounds, budgets = sorted(set(rounds or [])), sorted(set(epsilons or []))
    with library_errors():
        scenarios = {r: _scenario(r, participants, examples, n_max, n0) for r in dropouts}
    if coalition is not None:
        _check_coalition(coalition, scenarios, participants, examples)
    # --paper brings its own conversion and orders (PAPER_ACCOUNTING): only ours reads the user's.
    refuse_unread_rdp_options(click.get_current_context(), accountant == "rdp")
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

        if plot is not None:
            update("drawing")
            _plot(plot, z, q, delta, scenarios, rounds, budgets, limits, ours)

    known = participants is not None or bool(examples)
    calibration = [_calibration_entry(r, rd, z, clip, known) for r, rd in scenarios.items()]
    lines = dropout_assumptions(
        z,
        q,
        delta,
        **ours,
        paper=paper,
        participants=participants,
        examples=len(examples) if examples else 0,
        n_max=n_max,
        n0=n0,
        clip=clip,
        coalition=coalition,
    )
    assumptions = lines.as_dict()
    notes = _notes(scenarios, n0)
    if any(value == 0 for row in results for key, value in row.items() if key.endswith("epsilon")):
        notes.append(zero_epsilon_note(delta))
    if plot is not None:
        notes.append(f"plot written to {plot}")
    document = {
        "command": "dropout",
        "assumptions": assumptions,
        "results": results,
        "max_rounds": limits,
        "calibration": calibration,
        "notes": notes,
    }
    if fmt == "table":
        shown = lines.shown(verbose)
        _emit_tables(results, limits, calibration, rounds, budgets, paper, shown, notes, coalition)
    elif fmt == "json":
        emit("uldp dropout", [], [], fmt, document=document)
    else:
        emit(
            "uldp dropout",
            [(k, k) for k in CSV_FIELDS],
            _csv_rows(results, limits, paper, ours, coalition, exact=q >= 1),
            fmt,
        )


def _plot(path, z, q, delta, scenarios, rounds, budgets, limits, ours) -> None:
    """Epsilon against rounds up to the largest round count asked for or, with budgets only, a
    little past the most rounds any budget allows."""
    if rounds:
        largest = max(*rounds, 10)  # a curve, even when the table asks for one round count
    else:
        reached = [e["max_rounds"] for e in limits if e["max_rounds"]]
        largest = max(10, int(1.5 * max(reached))) if reached else 10
    label = "exact Gaussian (q = 1)" if q >= 1 else accounting_label(**ours)
    title = f"uldp dropout: sigma = {z:g}, silo-q = {q:g}, delta = {delta:g}; {label}"
    draw_dropout_plot(
        path,
        z,
        scenarios,
        largest,
        rounds,
        budgets,
        lambda multiplier, t: dropout_epsilon(multiplier, q, t, delta, **ours),
        ours["accountant"],
        title,
    )


def _check_coalition(coalition: float, scenarios: dict[float, DropoutRound], participants, examples) -> None:
    if participants is None and not examples:
        raise click.UsageError("--colluding needs the participants: give --silos-per-round or --examples")
    for dropout, rd in scenarios.items():
        if coalition >= rd.alive_weight_sum:
            raise click.BadParameter(
                f"coalition weight {coalition:g} must be below the surviving weight sum "
                f"n' = {rd.alive_weight_sum:g} (dropout {dropout:g})",
                param_hint="'--colluding'",
            )


def _scenario(dropout: float, participants, examples, n_max, n0) -> DropoutRound:
    if participants is not None and examples:
        raise click.UsageError(
            "give --silos-per-round (all of weight 1) or --examples with --n-max, not both"
        )
    if examples and n_max is None:
        raise click.UsageError("--examples needs --n-max (w_i = min(n_i / n_max, 1))")
    if n_max is not None and not examples:
        raise click.UsageError("--n-max is used only with --examples")
    if participants is None and not examples:
        if n0 is not None:
            raise click.UsageError(
                "--min-weight-sum needs the participants: give --silos-per-round or --examples"
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
        emit("uldp dropout: epsilon after T rounds", columns, rows, "table", labels=len(leading))
    if budgets:
        rows = _pivot(limits, which, 2, "paper_max_rounds", "budget", coalition)
        columns = leading + [(f"budget{b}", f"eps <= {b:g}") for b in budgets]
        emit("uldp dropout: most rounds within budget", columns, rows, "table", labels=len(leading))
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


def _csv_rows(results, limits, paper, ours, coalition, *, exact: bool = False) -> list[dict]:
    """`exact`: q = 1, where our figures are the exact Gaussian composition, not the accountant's."""
    label = "exact gaussian (q = 1)" if exact else accounting_label(**ours)
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
                    "accounting": "paper" if which == "paper" else label,
                    "multiplier": e[multiplier],
                }
                if kind == "epsilon":
                    row.update(rounds=e["rounds"], epsilon=e[eps_field])
                else:
                    row.update(budget=e["budget"], max_rounds=e[rounds_field])
                rows.append(row)
    return rows


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
