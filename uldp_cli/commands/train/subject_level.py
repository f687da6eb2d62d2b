"""Subject-level DP (Marathe & Kanani: userldp, localgroupdp, higradavgdp, localitemdp): the noise
calibrated to a federation-wide target before round 1 (the library's `run_setup.prepare_subject`),
and the worst subject's epsilon per round."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from ...option_groups import OptionGroup
from ...options import given_source
from ...render import format_cell
from .family import Column, Family
from .render import sampling_notes, user_epsilon_columns

# Its one option, --epsilon, is read by the plan-accounted uldp-* algorithms too: it is listed
# under Privacy (options.py), so the family adds no heading of its own.
OPTIONS = OptionGroup.of("Subject-level algorithms")


def check_subject(ctx: click.Context, algo, sigma, epsilon, allocation, alpha):
    """(subject level?, sigma, epsilon): the subject-level and the plan-accounted (uldp-*)
    algorithms' noise comes from --sigma or --epsilon, not both (one on the command line
    overrides the other from --config); --alpha belongs to --allocation power."""
    from uldp.trainers.algorithms import get_algorithm
    from uldp.trainers.run_setup import plan_calibrated

    if (allocation == "power") != (alpha is not None):
        raise click.UsageError(
            "--allocation power needs --alpha" if alpha is None else "--alpha applies to --allocation power"
        )
    spec = get_algorithm(algo)
    if not (spec.subject_level or plan_calibrated(algo)):
        return False, sigma, epsilon
    if sigma is not None and epsilon is not None:
        from_config = {
            name for name in ("sigma", "epsilon") if given_source(ctx, name) is ParameterSource.DEFAULT_MAP
        }
        if from_config == {"epsilon"}:
            epsilon = None  # the command line's --sigma overrides the config's epsilon
        elif from_config == {"sigma"}:
            sigma = None
        else:
            raise click.UsageError("give --sigma or --epsilon (a target to calibrate sigma to), not both")
    if algo == "localgroupdp" and epsilon is None:
        raise click.UsageError(
            "localgroupdp's noise sigma_Z comes from its budget (Corollary 3.5): give --epsilon"
        )
    return spec.subject_level, sigma, epsilon


def check_subject_options(ctx: click.Context, options: dict[str, Any]) -> None:
    """`check_subject` on the command's options, resolving sigma, epsilon and Z in them."""
    subject_level, options["sigma"], options["epsilon"] = check_subject(
        ctx, options["algo"], options["sigma"], options["epsilon"], options["allocation"], options["alpha"]
    )
    if subject_level and given_source(ctx, "group_k") is None:
        options["group_k"] = "max"  # LocalGroupDP: Z bounds every subject's items at a member, none dropped


def subject_columns(summary: dict, rows: list[dict], fmt: str) -> tuple[list[Column], list[dict]]:
    """The subject-level run's epsilons: the worst subject's at its busiest member and across the
    federation, and the algorithm's own (item level, user-level LDP). A run that reports no
    subject-level figures (a plug-in) shows the user-level columns."""
    if summary.get("level") != "subject":
        return user_epsilon_columns(summary), rows
    algo = summary["algo"]
    columns = [
        ("subject_epsilon_member", "eps subject (member)"),
        ("subject_epsilon_federation", "eps subject (federation)"),
    ]
    if algo in ("localitemdp", "localgroupdp"):
        columns.append(("item_epsilon", "eps item"))
    if algo == "userldp":
        columns.append(("user_ldp_epsilon", "eps user LDP"))
    return columns, rows


def subject_notes(summary: dict, history: list[dict]) -> list[str]:
    """What the subject-level figures are for, the target, and the mini-batches' make-up (none
    for a run that reports no subject-level figures)."""
    if summary.get("level") != "subject":
        return sampling_notes(summary)
    algo = summary["algo"]
    level = "item-level" if algo == "localitemdp" else "worst subject's federation-wide"
    notes = [
        f"{summary['subjects']} subjects (the data's users) over {summary['silos']} members (silos); "
        f"items sampled at q = {summary['item_q']:.4g} per mini-batch, {summary['local_steps']} "
        "mini-batches per member per round; eps subject: the worst subject's (member: at its busiest "
        "member; federation: horizontal composition, Theorem 3.9)"
        + (
            f"; subjects {summary['member_subject']} and {summary['federation_subject']}"
            if "member_subject" in summary
            else ""
        )
    ]
    if summary.get("epsilon_target") is not None and history:
        spent = history[-1]["epsilon"]
        notes.append(
            f"sigma {summary['sigma']:.6g} calibrated so that the {level} epsilon after "
            f"{len(history)} rounds is at most --epsilon {summary['epsilon_target']:g}: "
            f"{format_cell(spent)}"
        )
    if algo == "localgroupdp":
        notes.append(
            f"LocalGroupDP: Z = {summary['group_size']} items per subject and member (--group-k), "
            f"sigma_Z for the per-member budget E = {summary['group_budget']:.4g} (Corollary 3.5)"
        )
    if algo == "localitemdp":
        notes.append(
            "localitemdp's epsilon is item level (its guarantee); its eps subject columns bound a "
            "subject with m items at a member (sensitivity m C)"
        )
    for key, what in (
        ("batch_z", "largest subject group per mini-batch (Z, Fig. 1(c))"),
        ("batch_subjects", "distinct subjects per mini-batch (Fig. 1(d))"),
    ):
        seen = summary.get(key)
        if seen:
            notes.append(f"{what}: " + _histogram_text(seen))
    return notes


def _histogram_text(seen: dict) -> str:
    """'value: count' pairs, the mean first; long ones shortened to their quartiles."""
    values = [(int(v), n) for v, n in seen.items()]
    total = sum(n for _, n in values)
    mean = sum(v * n for v, n in values) / total
    if len(values) <= 8:
        return f"mean {mean:.2f} over {total} mini-batches; " + ", ".join(f"{v}: {n}" for v, n in values)
    spread = []
    for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
        count = 0
        for v, n in values:
            count += n
            if count >= fraction * total:
                spread.append(v)
                break
    return f"mean {mean:.1f} over {total} mini-batches; min/quartiles/max " + "/".join(map(str, spread))


FAMILY = Family(
    name="subject-level",
    # Subjects whose items several members hold: accounted per subject over the data's holdings.
    claims=lambda spec: spec.subject_level,
    options=OPTIONS,
    columns=subject_columns,
    notes=subject_notes,
)
