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
from typing import TYPE_CHECKING

from ...option_groups import OptionGroup

if TYPE_CHECKING:
    from uldp.trainers.algorithms.registry import AlgorithmSpec

#: A table column: the row's key, the header.
Column = tuple[str, str]
#: (summary, rows, format) -> the run's epsilon columns and the family's own, and the rows to show.
Columns = Callable[[dict, list[dict], str], tuple[list[Column], list[dict]]]
#: (summary, history) -> the family's lines below the table.
Notes = Callable[[dict, list[dict]], list[str]]


@dataclass(frozen=True)
class Family:
    """One algorithm family of `uldp train`.

    `claims`: whether an algorithm's spec is of this family (exactly one family claims each).
    `options`: its options, listed under their heading in `--help` (options several families
    read sit under the common headings of options.py). Its options' checks live in its module
    and run in the order checks.py writes down. What a family prepares before round 1 is the
    library's (uldp.trainers.run_setup, chosen from the same registry entry), shared with
    `uldp.train`.
    """

    name: str
    claims: Callable[[AlgorithmSpec], bool]
    options: OptionGroup
    columns: Columns
    notes: Notes

    @property
    def heading(self) -> str:
        return self.options.heading
