"""Where per-record and per-user privacy budgets come from (issue 14; rPDP-FL slides ch. 3).

Record budgets: a scenario of `uldp personalize --distribution`, drawn with a seed for every
source record (the training records keep theirs), a CSV of budgets by record number (what `uldp
personalize --out` writes), or a column of the user's own table (`data.tabular.load_table`).
User budgets: a scenario drawn for the users, or a CSV of (user, epsilon). Every budget must be
a finite number > 0; a problem is one error naming the option, and the records or users. No torch.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from uldp.errors import DataError, InvalidParameter
from uldp.input_files import CAPS, open_text

#: Records (users) named in an error at most.
NAMED = 5


@dataclass(frozen=True)
class Budgets:
    """Budgets of the training records (or of the users), and where they came from."""

    values: np.ndarray
    source: str


def check_positive(values: np.ndarray, what: str, option: str, ids: np.ndarray | None = None) -> np.ndarray:
    """`values` as floats; InvalidParameter naming `option` and the first few bad ones unless every
    value is a finite number > 0 (a budget of 0 would exclude the record from training, which a
    budget file should say by leaving the record out of the data, not by a zero)."""
    values = np.asarray(values, dtype=float)
    bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
    if bad.size:
        names = bad if ids is None else ids[bad]
        shown = ", ".join(f"{what} {n} ({values[i]!r})" for n, i in zip(names[:NAMED], bad[:NAMED]))
        more = f" and {bad.size - NAMED} more" if bad.size > NAMED else ""
        raise InvalidParameter(f"{option}: budgets must be finite numbers > 0: {shown}{more}")
    return values


def drawn_budgets(distribution: str, count: int, seed: int) -> np.ndarray:
    """`count` budgets of the `uldp personalize --distribution` preset, seeded as it seeds them."""
    from uldp.accountants.personalized.budgets import sample_budgets

    return sample_budgets(distribution, count, seed)


def record_budgets_drawn(data, distribution: str, seed: int) -> Budgets:
    """Budgets drawn for every source record (ids 1..N, as `uldp personalize --distribution D
    --records N --seed S` draws them), then the training records' own."""
    from uldp.accountants.personalized.budgets import describe

    n = _source_records(data)
    values = drawn_budgets(distribution, n, seed)[_record_index(data)]
    return Budgets(
        values,
        f"{describe(distribution)}; drawn for the {n} source records with seed {seed} (as `uldp "
        f"personalize --distribution {distribution} --records {n} --seed {seed}`), the "
        f"{len(values)} training records keep theirs",
    )


def record_budgets_by_id(data, ids: np.ndarray | None, values: np.ndarray, source: str) -> Budgets:
    """The training records' budgets from a file's rows (read by `uldp personalize`'s reader,
    `uldp.cli.personalize_io.read_budgets`): `ids` are the data's record numbers, 1..N of the source
    table or built-in set (what `uldp personalize --out` writes), or None for one row per source
    record in order.

    Every training record needs one: DataError naming the missing ones otherwise.
    """
    n = _source_records(data)
    if ids is None:
        numbers = np.arange(1, len(values) + 1)
    else:
        try:
            numbers = np.array([int(str(i)) for i in ids], dtype=np.int64)
        except ValueError:
            bad = next(str(i) for i in ids if not str(i).strip().lstrip("-").isdigit())
            raise DataError(f"--epsilon-csv: id {bad!r} is not a record number (1 to {n})") from None
    outside = np.flatnonzero((numbers < 1) | (numbers > n))
    if outside.size:
        raise DataError(
            f"--epsilon-csv: record {numbers[outside[0]]} does not exist (the data has records 1 to {n})"
        )
    by_row = np.full(n, np.nan)
    by_row[numbers - 1] = values
    index = _record_index(data)
    chosen = by_row[index]
    missing = np.flatnonzero(np.isnan(chosen))
    if missing.size:
        shown = ", ".join(str(int(i) + 1) for i in index[missing[:NAMED]])
        raise DataError(
            f"--epsilon-csv: {source} has no budget for {missing.size} training record(s) (records "
            f"{shown}{', ...' if missing.size > NAMED else ''}); give one per record"
        )
    check_positive(chosen, "record", "--epsilon-csv", index + 1)
    return Budgets(chosen, f"file {source}")


def user_budgets(n_users: int, source: str, seed: int) -> Budgets:
    """Per-user budgets: a preset name (drawn for users 0..|U|-1 with `seed`) or a CSV file with
    columns `user` (0..|U|-1, the user ids of the run) and `epsilon`."""
    from uldp.accountants.personalized.budgets import DISTRIBUTIONS, describe

    if source in DISTRIBUTIONS:
        values = drawn_budgets(source, n_users, seed)
        return Budgets(
            values,
            f"{describe(source)}; drawn for the {n_users} users with seed {seed} (as `uldp "
            f"personalize --level user --distribution {source} --records {n_users} --seed {seed}`)",
        )
    path = Path(source)
    if not path.is_file():
        raise InvalidParameter(
            f"--user-budgets: {source!r} is neither a file nor one of {', '.join(DISTRIBUTIONS)}"
        )
    try:
        with open_text(path, "--user-budgets", cap=CAPS["table"]) as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(f"--user-budgets: cannot read {path} ({error})") from None
    header = [name.strip() for name in rows[0]] if rows else []
    if "user" not in header or "epsilon" not in header:
        raise DataError(f"--user-budgets: {path} needs a header with columns user and epsilon")
    repeated = next((name for name in header if header.count(name) > 1), None)
    if repeated is not None:
        # Which of two equal columns holds the budgets is a guess: refuse rather than pick one.
        raise DataError(
            f"--user-budgets: {path}: column {repeated!r} appears {header.count(repeated)} times in "
            "the header; give each column its own name"
        )
    at_user, at_eps = header.index("user"), header.index("epsilon")
    values = np.full(n_users, np.nan)
    line_of: dict[int, int] = {}
    for line, row in enumerate(rows[1:], start=2):
        try:
            user, value = int(row[at_user]), float(row[at_eps])
        except (ValueError, IndexError):
            raise DataError(f"--user-budgets: {path} line {line}: user and epsilon must be numbers") from None
        if not 0 <= user < n_users:
            raise DataError(f"--user-budgets: {path} line {line}: user {user} is not in 0..{n_users - 1}")
        if user in line_of:
            # Keeping the last row would let a budget go up without a word.
            raise DataError(
                f"--user-budgets: {path}: user {user} is listed twice (lines {line_of[user]} and "
                f"{line}); give each user one budget"
            )
        line_of[user] = line
        values[user] = value
    missing = np.flatnonzero(np.isnan(values))
    if missing.size:
        raise DataError(
            f"--user-budgets: {path} has no budget for {missing.size} user(s) (users "
            f"{', '.join(map(str, missing[:NAMED]))}{', ...' if missing.size > NAMED else ''})"
        )
    check_positive(values, "user", "--user-budgets", np.arange(n_users))
    return Budgets(values, f"file {path}")


def _source_records(data) -> int:
    return int(data.source_records or len(data.y_train))


def _record_index(data) -> np.ndarray:
    if data.record_index is None:
        return np.arange(len(data.y_train))
    return np.asarray(data.record_index)
