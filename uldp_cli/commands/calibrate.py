"""`uldp calibrate`: the smallest sigma, or the most steps, that fit an (epsilon, delta) budget.

With user sampling (`--user-q` < 1) two epsilons describe a run: the released model's (amplified
by the sampling) and the server's, which draws the sample (ULDP-FL Remark 1). Both are printed;
`--view` says which one the budget is for.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from uldp.accountants.account import account_plan
from uldp.accountants.assumptions import accounting_assumptions
from uldp.accountants.calibrate import SIGMA_RANGE, calibrate, most_steps
from uldp.accountants.events import TIGHT_SIGMA_MIN

from ..account_plot import draw_calibration_plot
from ..accounting_options import (
    accounted_as,
    accounted_as_note,
    accounting_options,
    algorithm_options,
    build_plan,
    check_group_sizes,
    plan_reads,
    refuse_unread_rdp_options,
    refuse_unused,
)
from ..config import config_option
from ..errors import library_errors
from ..options import (
    COUNT_MAX,
    EpsilonBudget,
    NoiseMultiplier,
    OutputFile,
    PositiveInt,
    Probability,
    format_option,
    zero_epsilon_note,
)
from ..progress import status
from ..render import emit

COLUMNS = [
    ("solved_for", "solved for"),
    ("sigma", "sigma"),
    ("q", "q"),
    ("steps", "steps"),
    ("epsilon", "epsilon"),
    ("budget", "budget"),
    ("delta", "delta"),
    ("meets_budget", "meets budget"),
]
# With user sampling: both views, the targeted one first.
VIEW_COLUMNS = {
    "model": [("epsilon_model", "epsilon model"), ("epsilon_server", "epsilon server")],
    "server": [("epsilon_server", "epsilon server"), ("epsilon_model", "epsilon model")],
}
VIEWS = ("model", "server")


@click.command("calibrate")
@click.option(
    "--epsilon", "budget", type=EpsilonBudget(), required=True, help="Epsilon budget, in [1e-6, 1e6]."
)
@click.option("--q", type=Probability(), default=None, help="Poisson sampling rate per step, in (0, 1].")
@click.option(
    "--steps", type=PositiveInt(COUNT_MAX), default=None, help="Steps T, in [1, 1e12]: solve for sigma."
)
@click.option(
    "--sigma", type=NoiseMultiplier(), default=None, help="Noise multiplier, in [1e-6, 1e6]: solve for steps."
)
@accounting_options(many=False)
@algorithm_options(many=False)
@click.option(
    "--view",
    type=click.Choice(VIEWS),
    default="model",
    show_default=True,
    help="With --user-q < 1, which epsilon must meet the budget: the released model's (user "
    "sampling amplifies it) or the server's, which draws the sample and gets no amplification. "
    "Both are printed.",
)
@click.option(
    "--plot",
    type=OutputFile(),
    default=None,
    help="Also draw epsilon against the solved quantity (PNG), with the budget and the answer marked.",
)
@format_option
@config_option
def command(
    budget,
    q,
    steps,
    sigma,
    delta,
    k,
    method,
    accountant,
    conversion,
    orders,
    algo,
    view,
    plot,
    fmt,
    **flags,
):
    """The smallest noise multiplier, or the most steps, that keep epsilon within a budget.

    \b
      uldp calibrate --epsilon 3 --q 0.01 --steps 100000          # solve for sigma
      uldp calibrate --epsilon 3 --q 0.01 --sigma 5               # solve for steps
      uldp calibrate --epsilon 2 --algo uldp-avg --user-q 0.5 --rounds 100
    """
    rounds, user_q, record_q = flags["rounds"], flags["user_q"], flags["record_q"]
    refuse_unused(click.get_current_context(), [algo], group=k > 1)
    check_group_sizes([k], [method])
    length = rounds if algo else steps
    if (length is None) == (sigma is None):
        raise click.UsageError(
            f"give exactly one of --{'rounds' if algo else 'steps'} (solve for sigma) "
            "or --sigma (solve for steps)"
        )
    group_k = k if algo and plan_reads(algo, "k") else None
    effective_k = 1 if algo and not plan_reads(algo, "k") else k

    def plan(s: float, t: int):
        return build_plan(
            algo,
            sigma=s,
            q=None if algo else q,
            steps=None if algo else t,
            **{**flags, "rounds": t if algo else None},
            k=group_k,
        )

    sampled = bool(algo) and plan_reads(algo, "user_q") and user_q < 1
    if view == "server" and not sampled:
        raise click.BadParameter(
            "the server's view differs from the model's only with user sampling: give --algo "
            "that samples users (not uldp-group) with --user-q < 1, or leave --view at model",
            param_hint="'--view'",
        )

    # An RDP bound gives the number with the RDP accountant, a group bound by Lemma 5 or 6, and
    # the server's view of user sampling (accountants/rdp/participation.py).
    reads_rdp = accountant == "rdp" or (effective_k > 1 and method != "pld") or sampled
    refuse_unread_rdp_options(click.get_current_context(), reads_rdp)

    def epsilons(s: float, t: int, accountant: str = accountant, method: str = method) -> dict[str, float]:
        """{view: epsilon} of the run: the model's, and with user sampling the server's."""
        found = account_plan(
            plan(s, t),
            delta=delta,
            accountants=(accountant,),
            ks=(effective_k,),
            methods=(method,),
            conversion=conversion,
            orders=orders,
            server_view=sampled,
        )
        out = {"model": found[0].epsilon}
        if sampled:
            out["server"] = next(g.epsilon for g in found if g.method == "server view")
        return out

    def epsilon(s: float, t: int, accountant: str = accountant, method: str = method) -> float:
        both = epsilons(s, t, accountant, method)
        spent = both[view]
        tried = f"{'rounds' if algo else 'steps'} {t}" if sigma is not None else f"sigma {s:.6g}"
        say(f"{tried}: epsilon {spent:.5g}")
        return spent

    # A PLD group bound uses no RDP: name the accountant that produced the number.
    used = "pld" if effective_k > 1 and method == "pld" else accountant

    def _rdp_hint(s: float, target: float) -> int | None:
        # A tight accountant costs a second or more per evaluation: start its search from the
        # answer of the RDP bound (tens of milliseconds each). It only saves evaluations, so
        # when the looser bound finds nothing (one step already over budget) there is no hint.
        if used == "rdp":
            return None
        return most_steps(lambda t: epsilon(s, t, "rdp", "normal"), target) or None

    plan(sigma or 1.0, length or 1)  # validate the algorithm's options before searching
    count = [0]

    def say(text: str) -> None:
        # On a terminal only (stderr; silent for json/csv and when piped): what the search tried
        # last, so a long search (a PLD group bound: seconds per evaluation) shows it moves.
        update(f"calibrating {'sigma' if sigma is None else 'the length'}, evaluation {count[0]}: {text}")

    def counted(n: int) -> None:
        count[0] = n

    with library_errors(), status(fmt, "calibrating") as update:
        if sigma is None:
            # PLD and PRV take sigma >= TIGHT_SIGMA_MIN (their grids fail below it): search
            # only where the chosen accountant answers.
            low = max(SIGMA_RANGE[0], TIGHT_SIGMA_MIN) if used != "rdp" else SIGMA_RANGE[0]
            found = calibrate(
                lambda s: epsilon(s, length),
                budget,
                "sigma",
                progress=counted,
                sigma_range=(low, SIGMA_RANGE[1]),
            )
            sigma_out, steps_out, solved = found.value, length, "sigma"
        else:
            solved = "rounds" if algo else "steps"
            found = calibrate(
                lambda t: epsilon(sigma, t),
                budget,
                solved,
                start=_rdp_hint(sigma, budget),
                progress=counted,
            )
            sigma_out, steps_out = sigma, int(found.value)
        final_views = epsilons(sigma_out, steps_out) if sampled else {"model": found.epsilon}
        curve = None
        if plot is not None:
            update("drawing the plot")
            curve = _curve(
                lambda x: epsilons(x, length) if sigma is None else epsilons(sigma, int(x)),
                sigma_out if sigma is None else steps_out,
                integer=sigma is not None,
            )
    final = plan(sigma_out, steps_out)
    q_out = q if not algo else (user_q if plan_reads(algo, "user_q") else record_q)
    row = {
        "solved_for": solved,
        "sigma": sigma_out,
        "q": q_out,
        "steps": steps_out,
        "epsilon": found.epsilon,
        "budget": budget,
        "delta": delta,
        "meets_budget": found.epsilon <= budget,
        "k": effective_k,
        "method": "record" if effective_k == 1 else method,
        "accountant": used,
        "conversion": conversion if accountant == "rdp" or method != "pld" else None,
        "algorithm": algo,
        "evaluations": found.evaluations,
    }
    if algo:
        row["rounds"] = steps_out
    base = accounted_as(algo)
    if base is not None:
        row["note"] = f"accounted as {base}"
    columns = COLUMNS
    if sampled:
        row["view"] = view
        row["epsilon_model"], row["epsilon_server"] = final_views["model"], final_views["server"]
        at = COLUMNS.index(("epsilon", "epsilon"))
        columns = COLUMNS[:at] + VIEW_COLUMNS[view] + COLUMNS[at + 1 :]
    group = (
        [("group", f"budget must hold for groups of k = {effective_k} ({method})")] if effective_k > 1 else []
    )
    assumptions = accounting_assumptions(
        [final], delta=delta, accountants=[used], conversion=conversion, orders=orders, extra=group
    ).as_dict()
    if sampled:
        assumptions["view"] = (
            f"the budget is for the {'released model' if view == 'model' else 'server'}'s view "
            f"(--view {view}); the {'server' if view == 'model' else 'released model'}'s "
            "epsilon is printed next to it"
        )
    notes = [f"re-accounted: epsilon {found.epsilon:.6g} <= budget {budget:g} at the returned setting"]
    weights_note = accounted_as_note(algo)
    if weights_note is not None:
        notes.append(weights_note)
    if found.epsilon == 0 or 0 in final_views.values():
        notes.append(zero_epsilon_note(delta))
    if sampled and view == "model" and final_views["server"] > budget:
        notes.append(
            f"the server, which draws the user sample, sees epsilon {final_views['server']:.4g} > "
            f"budget {budget:g}; --view server calibrates for it"
        )
    if plot is not None and curve is not None:
        draw_calibration_plot(
            plot,
            curve,
            solved=solved,
            answer=sigma_out if sigma is None else steps_out,
            budget=budget,
            view=view,
            title=f"delta = {delta:g}; "
            + final.assumptions.get("mechanism", "")
            + (f"; budget for the {'released model' if view == 'model' else 'server'}" if sampled else ""),
        )
        notes.append(f"plot written to {plot}")
    emit(
        "uldp calibrate",
        columns,
        [row],
        fmt,
        assumptions=assumptions,
        document={"command": "calibrate", "assumptions": assumptions, **row},
        notes=notes,
    )


def _curve(
    epsilons: Callable[[float], dict[str, float]], answer: float, *, integer: bool, points: int = 17
) -> list[tuple[float, dict[str, float]]]:
    """epsilon of each view at `points` values from answer / 4 to 4 x answer (log-spaced), and
    at the answer itself: the curve the plot draws."""
    import numpy as np

    xs = set(np.geomspace(answer / 4, answer * 4, points).tolist()) | {float(answer)}
    if integer:
        xs = {float(max(1, round(x))) for x in xs}
    return [(x, epsilons(x)) for x in sorted(xs)]
