"""Dropouts (Baek et al. 2021, `dp-fedavg-robust`): who drops out and where, the noise
calibration that restores the privacy lost to them, weights, and secure aggregation's threshold."""

from __future__ import annotations

from typing import Any

import click

from ...aliases import warn_old_spelling
from ...config import CONFIG_PATH
from ...option_groups import OptionGroup
from ...options import IntegerIn, Interval, PositiveFloat, PositiveInt, given_source
from ...render import format_cell
from .family import Column, Family
from .options import MAX_BATCH, MAX_SILOS, MAX_USERS
from .render import sampling_notes, user_epsilon_columns

OPTIONS = OptionGroup.of(
    "Dropout-robust algorithm",
    click.option(
        "--dropout",
        type=Interval(0.0, 1.0, low_open=False, high_open=True),
        default=None,
        help="dp-fedavg-robust: probability that a sampled participant drops out, i.i.d. per round, in "
        "[0, 1) (default: 0).",
    ),
    click.option(
        "--dropout-at",
        type=click.Choice(["upload", "calibration"]),
        default=None,
        help="dp-fedavg-robust: where --dropout's participants are lost: before their upload, or after "
        "it and before their calibration share (default: upload).",
    ),
    click.option(
        "--dropout-schedule",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="dp-fedavg-robust: replay the dropouts of a CSV with columns round,participant,at "
        "(participants are silo numbers from 0; at is upload or calibration).",
    ),
    click.option(
        "--calibration/--no-calibration",
        default=None,
        help="dp-fedavg-robust: the noise calibration step of Algorithm 2 (default: on; off shows the "
        "privacy lost to dropouts).",
    ),
    click.option(
        "--min-weight-sum",
        type=PositiveFloat(MAX_USERS),
        default=None,
        help="dp-fedavg-robust: n_0 of Algorithm 3, the least weight sum a round works with; the first "
        "noise shares are drawn for it (default: none, Algorithm 2).",
    ),
    click.option(
        "--n-max",
        type=PositiveInt(MAX_BATCH),
        default=None,
        help="dp-fedavg-robust: weights w_i = min(n_i / n_max, 1) from each participant's records "
        "(default: every weight 1).",
    ),
    click.option(
        "--threshold",
        type=IntegerIn(2, MAX_SILOS),
        default=None,
        help=f"dp-fedavg-robust --secure: Shamir's threshold k, 2 to {MAX_SILOS:,} (default: a majority "
        "of each round's sample).",
    ),
)


def check_dropouts(ctx: click.Context, options: dict[str, Any]) -> None:
    """The silos' sampling rate (`silo_rate`); one source of dropouts and the threshold with
    --secure are the library's checks (run_setup.check_pairs)."""
    silo_rate(ctx, options)


def silo_rate(ctx: click.Context, options: dict[str, Any]) -> None:
    """dp-fedavg-robust's participants are the silos (Baek et al. Algorithm 2 line 11, the server
    Poisson-samples them), so their rate is --silo-q, as rPDP-FL's; the trainer reads it as
    `TrainConfig.user_q`, the rate of whoever a round samples. --user-q, its spelling before
    issue 34, still works there with the old-spelling warning (a config file keeps working).
    The command line overrides a --config file, as for every option: `user_q:` in the file with
    --silo-q on the command line (or the reverse) is the command line's value. Both from the same
    place are refused."""
    from uldp.trainers.algorithms import get_algorithm

    if not get_algorithm(options["algo"]).observed:
        return
    user_source, silo_source = given_source(ctx, "user_q"), given_source(ctx, "silo_q")
    from_file = click.core.ParameterSource.DEFAULT_MAP
    if user_source is not None and silo_source is not None:
        if (user_source is from_file) == (silo_source is from_file):
            raise click.UsageError(
                f"give --silo-q or --user-q, not both ({options['algo']} samples silos: --silo-q)", ctx
            )
        if user_source is from_file:  # the command line's --silo-q wins
            user_source = None
        else:  # the command line's --user-q wins over the file's silo_q
            silo_source = None
    if user_source is not None:
        if user_source is from_file:
            # As config.py words an old key (it cannot: user_q is current for the other algorithms).
            warn_old_spelling(f"{ctx.meta.get(CONFIG_PATH, '--config')}: key 'user_q'", "'silo-q'")
        else:
            warn_old_spelling("--user-q", "--silo-q")
    elif silo_source is not None:
        options["user_q"] = options["silo_q"]
    options["silo_q"] = None  # TrainConfig.silo_q is rPDP-FL's


def dropout_columns(summary: dict, rows: list[dict], fmt: str) -> tuple[list[Column], list[dict]]:
    """The epsilon spent, then who was sampled and who dropped, per round (the calibration column
    only when someone dropped there). A run without a dropout summary (an observed plug-in that
    reports none) shows the user-level columns."""
    if "target_epsilon" not in summary:
        return user_epsilon_columns(summary), rows
    columns = [*user_epsilon_columns(summary), ("participants", "sampled"), ("dropped_upload", "dropped")]
    if any(r.get("dropped_calibration") for r in rows):
        columns.append(("dropped_calibration", "dropped at calibration"))
    return columns, rows


def dropout_notes(summary: dict, history: list[dict]) -> list[str]:
    """The epsilon spent against the run's target, and the rounds not released (none for a run
    that reports no target)."""
    if "target_epsilon" not in summary:
        return sampling_notes(summary)
    spent, target = summary["epsilon"], summary["target_epsilon"]
    compare = "met" if spent <= target * (1 + 1e-9) else f"EXCEEDED by {100 * (spent / target - 1):.1f}%"
    dropped = sum(r["dropped_upload"] + r["dropped_calibration"] for r in history)
    sampled = sum(r["participants"] for r in history)
    notes = [
        f"target: epsilon {format_cell(target)} after {summary['rounds']} rounds without dropouts "
        f"(`uldp dropout --dropout 0`); spent by the released model: {format_cell(spent)}, target "
        f"{compare}; {dropped} of {sampled} sampled participants dropped out"
        + ("" if summary["calibration"] else " (--no-calibration: their noise shares were not replaced)")
    ]
    skipped = [r for r in history if not r["released"]]
    if skipped:
        reasons = sorted({r["note"] for r in skipped})
        if len(reasons) > 3:  # each refusal names its own counts: the first ones say enough
            reasons = [*reasons[:3], f"and {len(reasons) - 3} more (the rows' note)"]
        notes.append(
            f"{len(skipped)} of {len(history)} rounds released nothing and spent nothing: "
            + "; ".join(reasons)
        )
    return notes


FAMILY = Family(
    name="dropouts",
    # What a round releases depends on who dropped out in it: accounted from the rounds observed.
    claims=lambda spec: spec.observed,
    options=OPTIONS,
    columns=dropout_columns,
    notes=dropout_notes,
)
