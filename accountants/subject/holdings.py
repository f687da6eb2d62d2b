"""Where a subject's data items live: how many members hold them, and how many items each.

Marathe & Kanani, "Subject Granular Differential Privacy in Federated Learning", §2 (Definition
2.3: neighbouring datasets differ by every item of one subject, wherever they are held) and
§4.2 (subject items spread over members uniformly or by the power distribution
P(x; alpha) = alpha x^(alpha - 1) on [0, 1]).

A subject's holding is the list of its item counts at the members holding it; the accounting
(`accountants.subject.horizontal`) needs only that list.
"""

from __future__ import annotations

import csv
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from uldp.errors import InvalidParameter
from uldp.input_files import CAPS, read_text

#: How a subject's items are spread over the members (§4.2); budgets.DISTRIBUTIONS are record budgets.
ALLOCATIONS = ("uniform", "power")


def allocate_items(items: int, members: int, distribution: str = "uniform", alpha: float = 1.0) -> list[int]:
    """A subject's `items` spread over `members` members; the positive counts, largest first.

    Member j (0-based) receives the share F((j+1)/N) - F(j/N) of the items, F(x) = x^alpha the
    power distribution's CDF (§4.2; alpha = 1, or 'uniform', is the even spread), rounded to
    whole items by largest remainders so that the counts add up to `items`. This is the
    expected allocation under the paper's model, not a worst case: a subject's real holding
    can be spread more widely (at most min(items, N) members).
    """
    if items < 1 or members < 1:
        raise InvalidParameter("items and members must be >= 1")
    if distribution not in ALLOCATIONS:
        raise InvalidParameter(f"distribution must be one of {', '.join(ALLOCATIONS)}, got {distribution!r}")
    if distribution == "uniform":
        alpha = 1.0
    if not alpha > 0:
        raise InvalidParameter(f"alpha must be > 0, got {alpha}")
    edges = (np.arange(members + 1) / members) ** alpha
    exact = items * np.diff(edges)
    counts = np.floor(exact).astype(int)
    short = items - int(counts.sum())
    # Largest remainders first; ties go to the member with the larger share (stable order).
    order = np.lexsort((-exact, -(exact - counts)))
    counts[order[:short]] += 1
    return sorted((int(c) for c in counts if c > 0), reverse=True)


HOLDINGS_HEADER = "subject,member"


def read_holdings(path: Path, members: int | None = None) -> dict[str, list[int]]:
    """Per subject, its item counts at each member holding it, from a CSV of (subject, member) rows.

    One row per data item (a subject's item at a member). The first row is a header naming the
    columns `subject` and `member` (any order and position, any case; further columns are
    ignored). A file without a header is accepted only when its first row's first two cells are
    numbers (numeric ids, read as subject, member): text ids in the first row without those
    names are refused, as a header such as `member,subject` or `subject_id,member_id` read as
    data would silently swap the columns or add a bogus subject.

    `members`: the federation's N. Integer member ids must then be 0..N-1 (member 100 or -1 of 4
    members is a typo, not a member), and the file may name at most N members in all (issue 32).
    """
    try:
        text = read_text(path, "--holdings", cap=CAPS["table"])  # utf-8-sig: spreadsheets write a BOM
    except (OSError, UnicodeDecodeError) as err:
        raise InvalidParameter(f"--holdings: cannot read {path}: {err}") from None
    rows = [row for row in csv.reader(text.splitlines()) if row and any(cell.strip() for cell in row)]
    if not rows:
        raise InvalidParameter(f"--holdings: {path} has no (subject, member) rows")
    names = [cell.strip().lower() for cell in rows[0]]
    if "subject" in names and "member" in names:
        repeated = next((name for name in names if name and names.count(name) > 1), None)
        if repeated is not None:
            # Which of two `subject` columns names the subject is a guess: refuse, as every table reader.
            raise InvalidParameter(
                f"--holdings: column {repeated!r} appears {names.count(repeated)} times in the header "
                f"of {path}; give each column its own name"
            )
        subject_col, member_col = names.index("subject"), names.index("member")
        rows = rows[1:]
    elif len(rows[0]) >= 2 and all(_is_number(cell) for cell in rows[0][:2]):
        subject_col, member_col = 0, 1
    else:
        raise InvalidParameter(
            f"--holdings: the first row of {path} must be a header naming the columns "
            f"subject and member (e.g. {HOLDINGS_HEADER!r}), got {','.join(rows[0])!r}"
        )
    if not rows:
        raise InvalidParameter(f"--holdings: {path} has no (subject, member) rows")
    width = max(subject_col, member_col) + 1
    for number, row in enumerate(rows, start=1):
        if len(row) < width or not row[subject_col].strip() or not row[member_col].strip():
            raise InvalidParameter(f"--holdings: {path} data row {number} needs a subject id and a member id")
    pairs = [(row[subject_col].strip(), row[member_col].strip()) for row in rows]
    holdings = holdings_from_pairs(pairs)
    if members is not None:
        _check_members(path, pairs, members, most=max(len(held) for held in holdings.values()))
    return holdings


def _check_members(path: Path, pairs: list[tuple[str, str]], members: int, *, most: int) -> None:
    """InvalidParameter for a member id outside the federation of `members` members (0..N-1 when
    the ids are numbers; text ids such as `shop1` are names, only counted); `most`, the most
    members holding one subject."""
    if most > members:
        raise InvalidParameter(
            f"--holdings: a subject is held by {most} members, more than --silos {members}"
        )
    named = [member for _, member in pairs]
    for number, member in enumerate(named, start=1):
        try:
            index = int(member)
        except ValueError:
            continue
        if not 0 <= index < members:
            raise InvalidParameter(
                f"--holdings: {path} data row {number} names member {member}, but --silos {members} "
                f"numbers the members 0..{members - 1}"
            )
    distinct = len(set(named))
    if distinct > members:
        raise InvalidParameter(f"--holdings: {path} names {distinct} members, more than --silos {members}")


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def holdings_from_pairs(pairs: Iterable[tuple[str, str]]) -> dict[str, list[int]]:
    """Subject id -> its item counts per member holding it (largest first)."""
    per_subject: dict[str, Counter] = defaultdict(Counter)
    for subject, member in pairs:
        per_subject[subject][member] += 1
    return {s: sorted(c.values(), reverse=True) for s, c in per_subject.items()}


def subject_sampling_rate(q: float, items: int) -> float:
    """Probability that a mini-batch drawn by Poisson sampling at rate q holds any of `items` items.

    1 - (1 - q)^m: removing the subject changes a mini-batch only when one of its m items is
    drawn. With HiGradAvgDP (Lemma 3.7) the subject's whole contribution to that mini-batch is
    bounded by C, so one step is a Poisson-subsampled Gaussian at this rate for the subject.
    """
    if not 0 < q <= 1:
        raise InvalidParameter(f"q must be in (0, 1], got {q}")
    if items < 1:
        raise InvalidParameter(f"items must be >= 1, got {items}")
    return -math.expm1(items * math.log1p(-q)) if q < 1 else 1.0
