"""The `uldp train` command: parse, check, load, run, render; its options are listed in `--help`
under headings (options.py: the common ones; each family's module: its own)."""

from __future__ import annotations

from typing import Any

import click

from uldp.trainers.run_setup import chosen_settings, plan_calibrated

from ...config import config_option
from ...errors import library_errors
from ...files import atomic_write_bytes
from ...option_groups import grouped_command
from ...signals import Terminated
from .checks import check_options
from .families import FAMILIES, family_of
from .options import ALGORITHM, DATA, ENGINE, MODEL, OUTPUT, PRIVACY, SECURE
from .render import render
from .run import interrupted, prepare, run_rounds, start

OPTION_GROUPS = (
    ALGORITHM,
    DATA,
    MODEL,
    PRIVACY,
    SECURE,
    *(f.options for f in FAMILIES.values()),
    ENGINE,
    OUTPUT,
)


@grouped_command("train", *OPTION_GROUPS)
@config_option
def command(**options: Any) -> None:
    """Train with a ULDP-FL algorithm; report test loss, the task metric and user-level epsilon
    after every round.

    \b
      uldp train --algo uldp-avg --dataset mnist
      uldp train --algo uldp-avg-w --dataset creditcard --data-path creditcard.csv --metrics m.jsonl
      uldp train --algo uldp-group --group-k median --dataset heart-disease --plot run.png
      uldp train --algo uldp-avg --data-path my.csv --user-column patient --label-column y
      uldp train --algo rpdp --dataset heart-disease --distribution three-levels --local-steps 10
      uldp train --algo dp-fedavg-robust --dataset mnist --silos 500 --silo-q 0.1 --dropout 0.1
      uldp train --algo higradavgdp --dataset mnist --silos 16 --epsilon 4 --local-steps 10
    """
    personal = check_options(click.get_current_context(), options)
    family = family_of(options["algo"])
    # What the user left out comes from the (data set, algorithm) defaults: trainers/defaults.py.
    chosen, defaulted = chosen_settings(options, personal)
    last: dict = {}  # the last completed round's row, for the message if interrupted
    try:
        with library_errors():
            start(options)
            from uldp.trainers.tracking import trackers

            # A missing tracking package is said before the data loads; the exit marks the run.
            with trackers(options["tensorboard"], options["mlflow"]) as tracker:
                data, cfg = prepare(options, chosen, personal)
                result = run_rounds(data, cfg, options, chosen, last, tracker)
    except KeyboardInterrupt:
        interrupted(last, chosen["rounds"], options["checkpoint_dir"], options["resume"])
    except Terminated as signal_exit:  # SIGTERM, SIGHUP: the same report, status 128 + signum
        interrupted(
            last, chosen["rounds"], options["checkpoint_dir"], options["resume"], status=signal_exit.code
        )
    if options["plot_path"]:
        _plot(result, data, options)
    render(
        result,
        data,
        family,
        options["fmt"],
        options["plot_path"],
        options["metrics_path"],
        options["every"],
        defaulted,
        target=options["epsilon"] if plan_calibrated(options["algo"]) else None,
    )


def _plot(result, data, options: dict[str, Any]) -> None:
    """Utility, loss and epsilon against the rounds, to --plot's PNG."""
    from uldp.trainers.plot import plot_runs

    algo, kind = options["algo"], "synthetic" if data.synthetic else "real"
    atomic_write_bytes(
        options["plot_path"],
        plot_runs(
            {algo: result.history},
            result.summary.get("metric", data.metric),
            title=f"{algo} on {data.name} ({kind} data): {result.summary['users']} users, "
            f"sigma {result.summary['sigma']:g}, delta {options['delta']:g}",
        ),
    )
