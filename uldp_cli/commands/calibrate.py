"""`uldp calibrate`: the smallest sigma, or the most steps, that fit an (epsilon, delta) budget.

With user sampling (`--user-q` < 1) two epsilons describe a run: the released model's (amplified
by the sampling) and the server's, which draws the sample (ULDP-FL Remark 1). Both are printed;
`--view` says which one the budget is for. With `--private-sampling` (ULDP-FL §4.1) the silos draw
the sample by oblivious transfer: the two views are the same number, so either `--view` gives the
released model's sigma.
"""

from __future__ import annotations

from collections.abc import Callable

import click

from uldp.accounting import calibration_problem, search

from ..account_plot import draw_calibration_plot
from ..accounting_options import (
    accounted_as,
    accounted_as_note,
    accounting_options,
    algorithm_options,
    check_group_sizes,
    option_spelling,
    private_sampling_options,
    private_sampling_rate,
    refuse_unread_rdp_options,
    refuse_unused,
    schedule_options,
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
@schedule_options
@accounting_options(many=False)
@algorithm_options(many=False)
@private_sampling_options
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
    epochs,
    dataset_size,
    delta,
    k,
    method,
    accountant,
    conversion,
    orders,
    algo,
    private_sampling,
    sampling_slots,
    view,
    plot,
    fmt,
    **flags,
):
    """The smallest noise multiplier, or the most steps, that keep epsilon within a budget.

    \b
      uldp calibrate --epsilon 3 --q 0.01 --steps 100000          # solve for sigma
      uldp calibrate --epsilon 3 --q 0.01 --sigma 5               # solve for steps
      uldp calibrate --epsilon 3 --q 0.01 --epochs 10             # Opacus' get_noise_multiplier
      uldp calibrate --epsilon 2 --algo uldp-avg --user-q 0.5 --rounds 100
      uldp calibrate --epsilon 2 --algo uldp-avg-w --user-q 0.5 --rounds 100 --private-sampling
    """
    ctx = click.get_current_context()
    largest = max(k, flags["group_k"] or 1)  # the group the budget holds for
    refuse_unused(ctx, [algo], group=largest > 1)
    check_group_sizes([largest], [method])
    rate = private_sampling_rate(
        ctx, [algo], flags["user_q"], private_sampling=private_sampling, sampling_slots=sampling_slots
    )
    with library_errors():
        problem = calibration_problem(
            delta=delta,
            q=q,
            steps=steps,
            epochs=epochs,
            dataset_size=dataset_size,
            algo=algo,
            k=k,
            group_method=method,
            accountant=accountant,
            conversion=conversion,
            orders=orders,
            private_sampling=rate,
            spell=option_spelling,
            **flags,
        )
    length = problem.schedule.steps
    if (length is None) == (sigma is None):
        raise click.UsageError(
            f"give exactly one of --{'rounds' if algo else 'steps (or --epochs)'} (solve for sigma) "
            f"or --sigma (solve for {'rounds' if algo else 'steps'})"
        )
    if view == "server" and not problem.sampled:
        raise click.BadParameter(
            "the server's view differs from the model's only with user sampling: give --algo "
            "that samples users (not uldp-group) with --user-q < 1, or leave --view at model",
            param_hint="'--view'",
        )
    # An RDP bound gives the number with the RDP accountant, a group bound by Lemma 5 or 6, and
    # the server's view of user sampling (accountants/rdp/participation.py).
    refuse_unread_rdp_options(ctx, problem.reads_rdp)

    with library_errors(), status(fmt, "calibrating") as update:
        # On a terminal only (stderr; silent for json/csv and when piped): what the search tried
        # last, so a long search (a PLD group bound: seconds per evaluation) shows it moves.
        found = search(problem, budget, sigma=sigma, view=view, progress=update, spell=option_spelling)
        curve = None
        if plot is not None:
            update("drawing the plot")
            curve = _curve(
                lambda x: problem.epsilons(x, length) if sigma is None else problem.epsilons(sigma, int(x)),
                found.sigma if sigma is None else found.steps,
                integer=sigma is not None,
            )
    final = problem.plan(found.sigma, found.steps)
    document = found.as_dict()
    assumptions = document.pop("assumptions")
    views = {key: document.pop(key) for key in ("view", "epsilon_model", "epsilon_server") if key in document}
    row = dict(document)
    base = accounted_as(algo)
    if base is not None:
        row["note"] = f"accounted as {base}"
    row.update(views)
    sampled, final_views = problem.sampled, found.views
    sigma_out, steps_out, solved = found.sigma, found.steps, found.solved_for
    columns = COLUMNS
    if sampled:
        at = COLUMNS.index(("epsilon", "epsilon"))
        columns = COLUMNS[:at] + VIEW_COLUMNS[view] + COLUMNS[at + 1 :]
    notes = [f"re-accounted: epsilon {found.epsilon:.6g} <= budget {budget:g} at the returned setting"]
    weights_note = accounted_as_note(algo)
    if weights_note is not None:
        notes.append(weights_note)
    if found.epsilon == 0 or 0 in final_views.values():
        notes.append(zero_epsilon_note(delta))
    if rate is not None:
        notes.append(
            "private sampling (ULDP-FL §4.1): the server does not learn the user sample, so its "
            "epsilon is the released model's (either --view gives this sigma)"
        )
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
        document={
            "command": "calibrate",
            "assumptions": assumptions,
            **row,
            **({} if rate is None else {"private_sampling": rate.as_dict()}),
        },
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
