"""`uldp train`'s table, JSON and CSV: the columns and notes every run has, and those its
algorithm's family adds (`Family.columns`, `Family.notes`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...render import emit
from .options import MAX_TABLE_ROWS

if TYPE_CHECKING:
    from .family import Column, Family

#: The hyper-parameters the notes restate, when the algorithm reads them (AlgorithmSpec.options).
SETTINGS_SHOWN = (
    ("sigma", "sigma"),
    ("clip", "clip"),
    ("lr", "lr"),
    ("global_lr", "global lr"),
    ("local_epochs", "local epochs"),
)


def user_epsilon_columns(summary: dict) -> list[Column]:
    """A user-level run's epsilon; under user sampling both views (ULDP-FL Remark 1)."""
    if "server_epsilon" in summary:
        return [("epsilon", "epsilon (model)"), ("server_epsilon", "epsilon (server)")]
    return [("epsilon", "epsilon")]


def sampling_notes(summary: dict) -> list[str]:
    """What the two epsilon columns of a run under user sampling are."""
    if "server_epsilon" not in summary:
        return []
    if summary.get("private_sampling"):
        return [
            "epsilon (model) and epsilon (server) are the same: the silos drew the user sample by "
            "oblivious transfer (--private-sampling, ULDP-FL §4.1), so the server does not know it and "
            "its view is amplified as the released models'"
        ]
    return [
        "epsilon (model): the released models, amplified by user sampling; epsilon (server): "
        "against the server, which draws the sample and so gets no amplification (Remark 1)"
    ]


def render(
    result,
    data,
    family: Family,
    fmt: str,
    plot_path,
    metrics_path,
    every: int | None,
    defaulted: list[str],
    target: float | None = None,
) -> None:
    """The run's rounds and what they mean, in `fmt`; `defaulted`: the settings left to defaults;
    `target`: the user-level epsilon sigma was calibrated to (--epsilon, a plan-accounted run)."""
    metric = result.summary.get("metric", data.metric)  # your own --metric: its name
    summary = dict(result.summary)
    outputs = {"metrics": metrics_path, "plot": plot_path}
    document = {
        "command": "train",
        "summary": summary,
        "assumptions": result.assumptions,
        "outputs": {k: str(v) for k, v in outputs.items() if v},
        "history": result.history,
    }
    family_columns, rows = family.columns(summary, result.history, fmt)
    columns = [
        ("round", "round"),
        ("loss", "test loss"),
        (metric, metric.replace("_", "-")),
        *family_columns,
        ("elapsed_s", "elapsed s"),
    ]
    kind = "SYNTHETIC data" if data.synthetic else "real data"
    notes = [
        f"{summary['algo']} on {data.name} ({kind}), {summary['users']} users, {summary['silos']} "
        f"silos, model {summary['model']} ({summary['parameters']} parameters"
        + (
            f", trained {_PATHS.get(summary['training_path'], summary['training_path'])})"
            if summary.get("training_path")
            else ")"
        ),
        _settings(summary, defaulted),
        *family.notes(summary, result.history),
        *_target_note(summary, result.history, target),
        *_startup_note(summary),
    ]
    if fmt == "table":
        step = every or -(-len(rows) // MAX_TABLE_ROWS)
        if step > 1:
            rows = [r for i, r in enumerate(rows) if (i + 1) % step == 0 or i == len(rows) - 1]
            notes.append(
                f"the table shows every {_ordinal(step)} round and the last ({len(rows)} of "
                f"{len(result.history)}; --every 1 shows all); --metrics and --format json have every round"
            )
    for key, path in outputs.items():
        if path:
            notes.append(f"{key} written to {Path(path)}")
    emit(
        f"uldp train: {summary['algo']} on {data.name} ({kind})",
        columns,
        rows,
        fmt,
        assumptions=dict(result.assumptions),
        document=document,
        notes=notes,
    )


def _target_note(summary: dict, history: list[dict], target: float | None) -> list[str]:
    """How sigma was chosen, when --epsilon calibrated a plan-accounted run's noise."""
    if target is None or not history:
        return []
    from ...render import format_cell

    last = history[-1]
    note = (
        f"sigma {summary['sigma']:.6g} calibrated so that the user-level epsilon (released model, RDP) "
        f"after {summary['rounds']} rounds is at most --epsilon {target:g}: {format_cell(last['epsilon'])}"
    )
    if last.get("server_epsilon") is not None and not summary.get("private_sampling"):
        # user sampling: the server sees who was sampled
        note += (
            f"; against the server, which draws the sample: {format_cell(last['server_epsilon'])} "
            "(ULDP-FL Remark 1)"
        )
    return [note]


def _startup_note(summary: dict) -> list[str]:
    """On Flower: the engine's start-up (Ray, the silos' ClientApps, Protocol 1's keys under
    --secure), which the rounds' elapsed seconds leave out."""
    if summary.get("startup_s") is None:
        return []
    return [f"engine start-up: {summary['startup_s']:.1f} s before round 1, not counted in elapsed s"]


#: How `summary["training_path"]` reads in the notes (runner._training_path).
_PATHS = {
    "stacked": "batched (stacked weights)",
    "vmap": "batched (vmap)",
    "loop": "one at a time (the loop)",
}


def _settings(summary: dict, defaulted: list[str]) -> str:
    """The rounds and the hyper-parameters the algorithm reads, and which came from the defaults."""
    from uldp.trainers.algorithms import get_algorithm
    from uldp.trainers.algorithms.registry import TRAINING_OPTIONS

    reads = get_algorithm(summary["algo"]).options  # default has no sigma or clip to report
    settings = ", ".join(
        [f"{summary['rounds']} rounds"]
        + [
            f"{label} {summary[key]:g}"
            for key, label in SETTINGS_SHOWN
            if key in reads and summary.get(key) is not None
        ]
    )
    defaulted = [d for d in defaulted if d.replace("-", "_") not in TRAINING_OPTIONS - reads]
    if defaulted:
        settings += f" (defaults: {', '.join(defaulted)}; docs/train.md)"
    return settings


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
