"""Who drops out of a round of dp-fedavg-robust, and where (Baek et al. 2021, §V-B, §VI-A-2).

A sampled participant may be lost before its upload (the local update, Algorithm 2 lines 13-16)
or after it, before its calibration share (lines 21-22); the paper distinguishes the two and its
analysis covers the first. Two sources, both decided by the server's simulation of the network,
never by the data (the accounting assumes dropouts do not depend on it):

- a rate r: each sampled participant drops with probability r, independently, at one phase
  (`--dropout R --dropout-at upload|calibration`);
- a schedule file, for exact replays: a CSV with the columns `round,participant,at`, one row per
  dropout (`at` is `upload` or `calibration`; participants are silo numbers from 0). A listed
  participant that was not sampled in that round is simply absent.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from uldp.errors import DataError
from uldp.input_files import CAPS, open_text

STAYS, AT_UPLOAD, AT_CALIBRATION = 0, 1, 2
PHASE_CODES = {"upload": AT_UPLOAD, "calibration": AT_CALIBRATION}
SCHEDULE_COLUMNS = ("round", "participant", "at")


@dataclass(frozen=True)
class DropoutSchedule:
    """The dropouts of a schedule file: (round, participant) -> where it drops."""

    path: str
    drops: dict[tuple[int, int], int]

    def of_round(self, round: int, n_participants: int) -> np.ndarray:
        """Where each participant drops in `round` (STAYS, AT_UPLOAD or AT_CALIBRATION)."""
        out = np.full(n_participants, STAYS, dtype=np.int8)
        for (t, participant), code in self.drops.items():
            if t == round:
                out[participant] = code
        return out


def read_schedule(path: str | Path, n_participants: int, rounds: int | None = None) -> DropoutSchedule:
    """The schedule in CSV file `path`; `DataError` naming the file, the row and the problem.

    `rounds`: the run's round count; a row for a later round would be ignored without a word,
    so it is refused (issue 32).
    """
    where = f"--dropout-schedule {path}"
    try:
        # utf-8-sig, as every table reader: a spreadsheet's byte-order mark is not part of `round`.
        with open_text(path, "--dropout-schedule", cap=CAPS["table"], encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames is None or tuple(f.strip() for f in reader.fieldnames) != SCHEDULE_COLUMNS:
                raise DataError(
                    f"{where}: the header must be {','.join(SCHEDULE_COLUMNS)}, got "
                    f"{','.join(reader.fieldnames or []) or 'nothing'}"
                )
            drops: dict[tuple[int, int], int] = {}
            for line, row in enumerate(reader, start=2):
                t, participant, at = (str(row.get(c) or "").strip() for c in SCHEDULE_COLUMNS)
                if not (t.isdecimal() and int(t) >= 1):
                    raise DataError(f"{where}, line {line}: round must be an integer >= 1, got {t!r}")
                if rounds is not None and int(t) > rounds:
                    raise DataError(
                        f"{where}, line {line}: round {int(t)} is past the run's last round, {rounds} "
                        "(--rounds); drop the row or train longer"
                    )
                if not (participant.isdecimal() and int(participant) < n_participants):
                    raise DataError(
                        f"{where}, line {line}: participant must be a silo number in [0, "
                        f"{n_participants - 1}], got {participant!r}"
                    )
                if at not in PHASE_CODES:
                    raise DataError(f"{where}, line {line}: at must be upload or calibration, got {at!r}")
                key = (int(t), int(participant))
                if key in drops:
                    raise DataError(
                        f"{where}, line {line}: participant {participant} drops twice in round {t}"
                    )
                drops[key] = PHASE_CODES[at]
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise DataError(f"{where}: cannot be read ({error})") from None
    return DropoutSchedule(str(path), drops)


def draw_dropouts(sampled: np.ndarray, rate: float, at: str, rng: np.random.Generator) -> np.ndarray:
    """Each sampled participant drops with probability `rate`, independently, at phase `at`."""
    out = np.full(len(sampled), STAYS, dtype=np.int8)
    if rate > 0:
        lost = sampled & (rng.random(len(sampled)) < rate)
        out[lost] = PHASE_CODES[at]
    return out
