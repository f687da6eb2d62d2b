"""What an algorithm family adds to `uldp train`: its options, their checks, its table columns and
its notes (one `Family` per module: `uldp_fl`, `rpdp_fl`, `dropouts`, `subject_level`).

The trainers' registry says what each algorithm is (`AlgorithmSpec`: record level, observed,
subject level); a family claims the algorithms of its kind, so an algorithm registered later (a
plug-in, a test's) has a family too, and the command renders a run by asking the family of its
algorithm rather than by testing the algorithm's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from ...option_groups import OptionGroup

if TYPE_CHECKING:
    from uldp.trainers.algorithms.registry import AlgorithmSpec

#: A table column: the row's key, the header.
Column = tuple[str, str]
#: (summary, rows, format) -> the run's epsilon columns and the family's own, and the rows to show.
Columns = Callable[[dict, list[dict], str], tuple[list[Column], list[dict]]]
#: (summary, history) -> the family's lines below the table.
Notes = Callable[[dict, list[dict]], list[str]]
#: (context, options) -> None: refuses (exit 2) what its options cannot mean together, and may
#: resolve an option in `options` (the subject level's sigma from --epsilon, say).
Check = Callable[[click.Context, dict[str, Any]], None]
#: (data, options, chosen settings) -> the data prepared before round 1, and the TrainConfig
#: fields that preparation sets (`options` and `chosen` updated where it resolves them).
Prepare = Callable[[Any, dict[str, Any], dict[str, Any]], tuple[Any, dict[str, Any]]]


@dataclass(frozen=True)
class Family:
    """One algorithm family of `uldp train`.

    `claims`: whether an algorithm's spec is of this family (exactly one family claims each).
    `options`: its options, listed under their heading in `--help`. `check` runs
    on every run, whatever the algorithm: an option read from --config that the algorithm
    ignores must still make sense with the others. `prepare` runs before round 1 on this
    family's runs only.
    """

    name: str
    claims: Callable[[AlgorithmSpec], bool]
    options: OptionGroup
    columns: Columns
    notes: Notes
    check: Check | None = None
    prepare: Prepare | None = None

    @property
    def heading(self) -> str:
        return self.options.heading
