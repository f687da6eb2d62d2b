"""`uldp train`: run a ULDP-FL algorithm on a data set, with utility and epsilon per round.

`command` is the Click command (command.py); its options are grouped in `--help` by what they
are about: the common ones (options.py) and each algorithm family's own (uldp_fl.py, rpdp_fl.py,
dropouts.py, subject_level.py: options, checks, table columns and notes; families.py registers
them). checks.py refuses what a run cannot use, run.py runs it, render.py prints it. `uldp audit`
builds its run from the same checks (check_ignored, check_subject) and the library's preparation
(uldp.trainers.run_setup: load_data, train_config), which `uldp.train` shares.
"""

from __future__ import annotations

from uldp.trainers.run_setup import ALGORITHM_OPTIONS

from .checks import check_ignored
from .command import command
from .options import CHECKPOINT_FILE, MAX_GROUP_K, GroupK
from .rpdp_fl import BUDGET_DISTRIBUTIONS
from .subject_level import check_subject

__all__ = [
    "ALGORITHM_OPTIONS",
    "BUDGET_DISTRIBUTIONS",
    "CHECKPOINT_FILE",
    "MAX_GROUP_K",
    "GroupK",
    "check_ignored",
    "check_subject",
    "command",
]
