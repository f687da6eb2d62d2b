"""Per-round metrics on disk, JSON lines or CSV by the file's extension.

The whole file is rewritten after every round through a temporary file and `os.replace`, so a
reader (or a crash) never sees half a line, and a resumed run rewrites exactly the rounds its
checkpoint holds before adding new ones.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
from pathlib import Path

from uldp.errors import DataError

from .atomic import atomic_write_bytes

FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}


def metrics_format(path: str | os.PathLike) -> str:
    """jsonl or csv from the extension; ValueError for anything else."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise DataError(f"--metrics must end in .jsonl or .csv, got {Path(path).name!r}")
    return FORMATS[suffix]


def _json_value(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def render(rows: list[dict], fmt: str) -> str:
    """Rows as JSON lines (inf/nan as null) or CSV (header from the first row)."""
    if fmt == "jsonl":
        return "".join(json.dumps({k: _json_value(v) for k, v in row.items()}) + "\n" for row in rows)
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Replace `path` by `data` in one rename (temporary file in the same directory, fsynced)."""
    atomic_write_bytes(path, data, mode=0o644)


class MetricsFile:
    """Appends a round by rewriting the file atomically with every round so far."""

    def __init__(self, path: str | os.PathLike, rows: list[dict] | None = None) -> None:
        self.path = Path(path)
        self.fmt = metrics_format(self.path)
        self.rows: list[dict] = list(rows or [])
        #: SHA-256 of the file as last written (None before the first write): the run record of
        #: a finished run carries it (run_record.py), so a reader can tell the rows were not changed.
        self.sha256: str | None = None
        if rows is not None:
            self._flush()

    def append(self, row: dict) -> None:
        self.rows.append(row)
        self._flush()

    def _flush(self) -> None:
        data = render(self.rows, self.fmt).encode("utf-8")
        write_atomic(self.path, data)
        self.sha256 = hashlib.sha256(data).hexdigest()
