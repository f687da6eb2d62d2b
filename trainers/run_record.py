"""What a training run records for `uldp report`, and reading it back.

The per-round metrics say how a run went; they do not say what was accounted. So every run with
`--metrics FILE` also writes `FILE.run.json`, and every checkpoint holds the same record under
"run": the algorithm, the settings its accounting reads (`Algorithm.plan_params`, the same dict
`runner.accounting_plan` compiles), delta, the rounds planned, and what the report's caveats
need (a fixed noise seed, user sampling, dropouts, secure weighting). It is written atomically
before round 1 and again when the run ends (then with `finished` and the assumptions), so an
interrupted run still has a record next to the rounds it completed.

`RUN_FORMAT` is the record's version: a record of another version is refused by name rather than
half understood.

Integrity: `FILE.run.json` carries the SHA-256 of its own content (`sha256`), and the record a
finished run writes last also carries the SHA-256 of the metrics file as the run wrote it
(`metrics_sha256`): `uldp report --run FILE` refuses, by name, a record or a metrics file that
no longer matches. Only a finished run's record has the metrics digest: the metrics file is
rewritten every round and the record is not, so a digest written beside the rows could name the
round before after a crash between the two writes. The rows of an interrupted run are read with
a note saying so; its checkpoint (which holds the same rows under its own digest,
`checkpoint_integrity`) is the verified copy. Files from a uldp before digests are read with a
note too.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uldp.errors import DataError
from uldp.input_files import CAPS
from uldp.input_files import read_bytes as read_input_bytes
from uldp.input_files import read_text as read_input_text

from .algorithms import TrainConfig, get_algorithm
from .metrics_file import metrics_format, write_atomic

RUN_FORMAT = 1
RECORD_SUFFIX = ".run.json"

#: The fields of a record written before records carried digests (uldp 0.1): one without a
#: digest that has any other field is a damaged record of this version, not an older one.
UNDIGESTED_KEYS = frozenset(
    (
        "format",
        "format_version",
        "uldp_version",
        "algorithm",
        "accounted_as",
        "kind",
        "plan_params",
        "delta",
        "rounds",
        "sigma",
        "user_q",
        "secure",
        "secure_capable",
        "noise_fixed",
        "dropout",
        "dropout_schedule",
        "data",
        "finished",
        "rounds_done",
        "assumptions",
    )
)

#: What a run's epsilons are: one user-level plan, per-tier, per-subject or per-round releases.
KINDS = ("plan", "personalized", "subject", "observed", "none")


def record_path(metrics_path: str | os.PathLike) -> Path:
    """Where the record of a run whose metrics go to `metrics_path` lives: `FILE.run.json`."""
    path = Path(metrics_path)
    return path.with_name(path.name + RECORD_SUFFIX)


def kind_of(algo: str) -> str:
    spec = get_algorithm(algo)
    if not spec.private:
        return "none"
    if spec.record_level:
        return "personalized"
    if spec.subject_level:
        return "subject"
    if spec.observed:
        return "observed"
    return "plan"


def _plain(value: Any) -> Any:
    """JSON-able: numpy scalars to Python, tuples to lists, inf/nan to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def run_record(
    cfg: TrainConfig,
    data,
    plan_params: dict[str, Any] | None,
    noise_fixed: bool,
    *,
    finished: bool = False,
    rounds_done: int = 0,
    assumptions: dict[str, str] | None = None,
    metrics_sha256: str | None = None,
) -> dict[str, Any]:
    """The record of a run of `cfg` on `data` (see the module docstring); `metrics_sha256`, the
    digest of the metrics file a finished run wrote last."""
    from uldp import __version__

    spec = get_algorithm(cfg.algo)
    return _plain(
        {
            "format": "uldp-run",
            "format_version": RUN_FORMAT,
            "uldp_version": __version__,
            "algorithm": cfg.algo,
            "accounted_as": spec.accounted_as or spec.name,
            "kind": kind_of(cfg.algo),
            "plan_params": plan_params,
            "delta": cfg.delta,
            "rounds": cfg.rounds,
            "sigma": cfg.sigma,
            "user_q": cfg.user_q,
            **(
                {"private_sampling": True, "sampling_slots": cfg.sampling_slots}
                if cfg.private_sampling
                else {}
            ),
            "secure": cfg.secure,
            "secure_capable": spec.secure,
            "noise_fixed": noise_fixed,
            "dropout": cfg.dropout,
            "dropout_schedule": cfg.dropout_schedule is not None,
            "data": {
                "name": data.name,
                "synthetic": bool(data.synthetic),
                "records": int(len(data.y_train)),
                "users": int(data.n_users),
                "silos": int(data.n_silos),
            },
            "finished": finished,
            "rounds_done": rounds_done,
            "assumptions": assumptions,
            **({} if metrics_sha256 is None else {"metrics_sha256": metrics_sha256}),
        }
    )


def record_sha256(record: dict[str, Any]) -> str:
    """SHA-256 of a record's content (its own `sha256` left out), whatever its layout on disk."""
    content = {k: v for k, v in record.items() if k != "sha256"}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def write_record(metrics_path: str | os.PathLike, record: dict[str, Any]) -> None:
    record = {**record, "sha256": record_sha256(record)}
    write_atomic(record_path(metrics_path), (json.dumps(record, indent=1) + "\n").encode("utf-8"))


@dataclass(frozen=True)
class RunFiles:
    """A run as its files hold it: the record and the rows of the rounds it completed."""

    record: dict[str, Any]
    rows: list[dict[str, Any]]
    where: str  # the path the user gave, for messages
    unverified: str | None = None  # why the files' content could not be checked, if it could not

    @property
    def rounds_done(self) -> int:
        return int(self.rows[-1]["round"]) if self.rows else 0


def check_record(record: Any, where: str) -> dict[str, Any]:
    """`record` if it is a run record this version reads, else DataError naming the problem."""
    if not isinstance(record, dict) or record.get("format") != "uldp-run":
        raise DataError(f"--run: {where} holds no uldp run record")
    version = record.get("format_version")
    if version != RUN_FORMAT:
        raise DataError(
            f"--run: {where} was written by uldp {record.get('uldp_version', '?')} (run record format "
            f"{version}); this uldp reads format {RUN_FORMAT}: report it with the uldp that wrote it"
        )
    missing = {"algorithm", "kind", "plan_params", "delta", "rounds", "noise_fixed", "data"} - set(record)
    if missing:
        raise DataError(f"--run: {where}'s run record is incomplete (missing {', '.join(sorted(missing))})")
    problem = _record_problem(record)
    if problem:
        raise DataError(f"--run: {where}'s run record is damaged: {problem}")
    return record


def _record_problem(record: dict[str, Any]) -> str | None:
    """What is wrong with the types of a record's fields that a report reads, or None."""
    if not isinstance(record["kind"], str) or record["kind"] not in KINDS:
        return f"kind is not one of {', '.join(KINDS)}"
    if not isinstance(record["algorithm"], str):
        return "algorithm is not a name"
    delta = record["delta"]
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 <= delta < 1:
        return "delta is not a number in [0, 1)"
    rounds = record["rounds"]
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        return "rounds is not a whole number"
    if not isinstance(record["noise_fixed"], bool):
        return "noise_fixed is not true or false"
    if record["plan_params"] is not None and not isinstance(record["plan_params"], dict):
        return "plan_params is not a dictionary"
    if not isinstance(record["data"], dict) or not isinstance(record["data"].get("name"), str):
        return "data does not name a data set"
    if record.get("assumptions") is not None and not isinstance(record["assumptions"], dict):
        return "assumptions is not a dictionary"
    return _private_sampling_problem(record)


def _private_sampling_problem(record: dict[str, Any]) -> str | None:
    """What is wrong with a record's private sampling keys (`uldp train --private-sampling`,
    ULDP-FL §4.1: `private_sampling` true, `sampling_slots` P, `user_q` the rate m/P), or None."""
    if "private_sampling" not in record:
        return None
    if not isinstance(record["private_sampling"], bool):
        return "private_sampling is not true or false"
    if not record["private_sampling"]:
        return None
    from uldp.accountants.private_sampling import private_rate

    slots, q = record.get("sampling_slots"), record.get("user_q")
    if isinstance(slots, bool) or not isinstance(slots, int):
        return "sampling_slots is not a whole number"
    if isinstance(q, bool) or not isinstance(q, (int, float)):
        return "user_q is not a number"
    try:
        rate = private_rate(float(q), slots)
    except ValueError:
        return f"user_q {q!r} is not a private sampling rate m/P with P = {slots}"
    if rate.q != q:
        return f"user_q {q!r} is not a private sampling rate m/P with P = {slots}"
    return None


def read_metrics_run(path: Path) -> RunFiles:
    """A metrics file (JSON lines or CSV) and the record beside it."""
    where = str(path)
    side = record_path(path)
    if not side.exists():
        raise DataError(
            f"--run: no run record beside {where} (expected {side.name}): the run was made by a uldp "
            "before 0.2, or the file was moved without it"
        )
    try:
        record = json.loads(read_input_text(side, "--run", cap=CAPS["json"], encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise DataError(f"--run: {side} is truncated or not JSON") from None
    record = check_record(record, str(side))
    unverified = None
    if "sha256" not in record:
        if not set(record) <= UNDIGESTED_KEYS:  # a digest's key damaged, not an older record
            raise DataError(f"--run: {side} is damaged or edited: its SHA-256 digest is missing")
        unverified = (
            f"{side.name} was written by a uldp that stored no digests: the run's files could not be verified"
        )
    elif not _same_digest(record):
        raise DataError(f"--run: {side} is damaged or edited: its content does not match its SHA-256 digest")
    try:
        data = read_input_bytes(path, "--run", cap=CAPS["table"])
    except OSError as error:
        raise DataError(f"--run: {path} cannot be read ({type(error).__name__})") from None
    # Rows first: a truncated or reordered file gets the message that says what is wrong with it.
    rows = _read_rows(path, metrics_format(path), data)
    _check_rows(rows, record, where)
    if record.get("metrics_sha256") is not None:
        if hashlib.sha256(data).hexdigest() != record["metrics_sha256"]:
            raise DataError(
                f"--run: {where} is damaged or edited: it does not match the SHA-256 digest its run "
                f"record ({side.name}) holds"
            )
    elif unverified is None:
        unverified = (
            f"the run did not finish, so {path.name} carries no digest (a finished run's record has "
            "one): its rows could not be verified; its --checkpoint DIR holds them verified"
        )
    return RunFiles(record, rows, where, unverified)


def _same_digest(record: dict[str, Any]) -> bool:
    try:
        return record_sha256(record) == record["sha256"]
    except ValueError:  # a number JSON cannot hold (NaN, Infinity): not what was written
        return False


def _read_rows(path: Path, fmt: str, data: bytes) -> list[dict[str, Any]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"--run: {path} cannot be read ({type(error).__name__})") from None
    if fmt == "jsonl":
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                raise DataError(f"--run: {path} is truncated or damaged at line {number}") from None
            if not isinstance(row, dict):
                raise DataError(f"--run: {path} line {number} is not a metrics row")
            rows.append({k: (math.inf if v is None and "epsilon" in k else v) for k, v in row.items()})
        return rows
    reader = csv.DictReader(text.splitlines())
    out = []
    for number, row in enumerate(reader, start=2):
        if None in row or any(v is None for v in row.values()):
            raise DataError(f"--run: {path} is truncated or damaged at line {number}")
        out.append({k: _number(v) for k, v in row.items()})
    return out


def _number(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def _check_rows(rows: list[dict[str, Any]], record: dict[str, Any], where: str) -> None:
    """Rounds 1..t in order, each with an epsilon; as many as a finished run says it ran."""
    for i, row in enumerate(rows, start=1):
        if not isinstance(row, dict) or row.get("round") != i or "epsilon" not in row:
            raise DataError(f"--run: {where} row {i} is not round {i} of a uldp train run: damaged or edited")
    if record.get("finished") and len(rows) != record.get("rounds_done"):
        raise DataError(
            f"--run: {where} holds {len(rows)} rounds, but its run record says the run finished "
            f"{record.get('rounds_done')}: truncated"
        )


def read_checkpoint_run(path: Path) -> RunFiles:
    """A checkpoint directory (or file): its record and history (torch, to read the file)."""
    from .checkpoint_file import CHECKPOINT_NAME, read_checkpoint
    from .checkpoint_integrity import DIGEST_KEY, UNVERIFIED

    checkpoint = path / CHECKPOINT_NAME if path.is_dir() else path
    if not checkpoint.exists():
        raise DataError(f"--run: {path} holds no {CHECKPOINT_NAME}")
    state = read_checkpoint(checkpoint, option="--run")
    record = check_record(state.get("run"), str(checkpoint))
    rows = list(state["history"])
    _check_rows(rows, {**record, "finished": False}, str(checkpoint))
    unverified = None if DIGEST_KEY in state else f"{checkpoint.name} was {UNVERIFIED}"
    return RunFiles(record, rows, str(checkpoint), unverified)


def read_run(path: str | os.PathLike) -> RunFiles:
    """A run from its metrics file (with its record) or its checkpoint directory."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"--run: {path} does not exist")
    if path.is_dir() or path.suffix == ".pt":
        return read_checkpoint_run(path)
    return read_metrics_run(path)
