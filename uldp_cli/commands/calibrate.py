"""`uldp calibrate`: the smallest sigma, or the most steps, that fit an (epsilon, delta) budget."""

from __future__ import annotations

import click

from uldp.accountants.account import account_plan
from uldp.accountants.assumptions import accounting_assumptions
from uldp.accountants.calibrate import calibrate, most_steps

from ..accounting_options import accounting_options, algorithm_options, build_plan
from ..config import config_option
from ..errors import library_errors
from ..options import PositiveFloat, Probability, format_option
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


@click.command("calibrate")
@click.option("--epsilon", "budget", type=PositiveFloat(), required=True, help="Epsilon budget (> 0).")
@click.option("--q", type=Probability(), default=None, help="Poisson sampling rate per step, in (0, 1].")
@click.option("--steps", type=click.IntRange(min=1), default=None, help="Steps T: solve for sigma.")
@click.option("--sigma", type=PositiveFloat(), default=None, help="Noise multiplier: solve for steps.")
@accounting_options(many=False)
@algorithm_options(many=False)
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
    rounds,
    user_q,
    silos,
    silo_sizes,
    batch_size,
    record_q,
    local_epochs,
    fmt,
):
    """The smallest noise multiplier, or the most steps, that keep epsilon within a budget.

    \b
      uldp calibrate --epsilon 3 --q 0.01 --steps 100000          # solve for sigma
      uldp calibrate --epsilon 3 --q 0.01 --sigma 5               # solve for steps
      uldp calibrate --epsilon 2 --algo uldp-avg --user-q 0.5 --rounds 100
    """
    length = rounds if algo else steps
    if (length is None) == (sigma is None):
        raise click.UsageError(
            f"give exactly one of --{'rounds' if algo else 'steps'} (solve for sigma) "
            "or --sigma (solve for steps)"
        )
    group_k = k if algo == "uldp-group" else None
    effective_k = 1 if algo and algo != "uldp-group" else k

    def plan(s: float, t: int):
        return build_plan(
            algo,
            sigma=s,
            q=None if algo else q,
            steps=None if algo else t,
            rounds=t if algo else None,
            user_q=user_q,
            silos=silos,
            silo_sizes=silo_sizes,
            batch_size=batch_size,
            record_q=record_q,
            local_epochs=local_epochs,
            k=group_k,
        )

    def epsilon(s: float, t: int, accountant: str = accountant, method: str = method) -> float:
        return account_plan(
            plan(s, t),
            delta=delta,
            accountants=(accountant,),
            ks=(effective_k,),
            methods=(method,),
            conversion=conversion,
            orders=orders,
            server_view=False,
        )[0].epsilon

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
    with library_errors(), status(fmt, "calibrating") as update:
        if sigma is None:
            found = calibrate(
                lambda s: epsilon(s, length), budget, "sigma", progress=lambda n: update(f"evaluation {n}")
            )
            sigma_out, steps_out, solved = found.value, length, "sigma"
        else:
            solved = "rounds" if algo else "steps"
            found = calibrate(
                lambda t: epsilon(sigma, t),
                budget,
                solved,
                start=_rdp_hint(sigma, budget),
                progress=lambda n: update(f"evaluation {n}"),
            )
            sigma_out, steps_out = sigma, int(found.value)
    final = plan(sigma_out, steps_out)
    q_out = q if not algo else (record_q if algo == "uldp-group" else user_q)
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
    group = (
        [("group", f"budget must hold for groups of k = {effective_k} ({method})")] if effective_k > 1 else []
    )
    assumptions = accounting_assumptions(
        [final], delta=delta, accountants=[used], conversion=conversion, orders=orders, extra=group
    ).as_dict()
    emit(
        "uldp calibrate",
        COLUMNS,
        [row],
        fmt,
        assumptions=assumptions,
        document={"command": "calibrate", "assumptions": assumptions, **row},
        notes=[f"re-accounted: epsilon {found.epsilon:.6g} <= budget {budget:g} at the returned setting"],
    )
