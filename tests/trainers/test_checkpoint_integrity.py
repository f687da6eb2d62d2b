"""A damaged checkpoint, metrics file or run record is refused by name (issue 32, item 2).

Before: torch's zip format verifies no checksum, so a flipped bit in a weight resumed silently
(212 of 250 single-bit flips loaded; one resumed with loss 6.6e9 instead of 3.19), and 99 of
1,500 mutated files escaped `read_checkpoint` as IndexError/KeyError/TypeError ("internal
error", exit 1). Now every checkpoint holds the SHA-256 of its content, a finished run's record
that of its metrics file and of itself, and every failure to read one is a `DataError`.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
from pathlib import Path

import pytest
import torch

from tests.cli.fuzz import assert_contract
from tests.cli.invoke import command_runner
from uldp.errors import DataError
from uldp.trainers.checkpoint_file import CHECKPOINT_NAME, read_checkpoint
from uldp.trainers.checkpoint_integrity import DIGEST_KEY, content_sha256
from uldp.trainers.run_record import read_run, record_path, record_sha256

train, _ = command_runner("train")
report, _ = command_runner("report")

RUN = (
    "--algo",
    "uldp-avg",
    "--dataset",
    "heart-disease",
    "--users",
    "8",
    "--user-q",
    "0.5",
    "--noise-seed",
    "0",
)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 2-round run: its checkpoint and its metrics with the run record."""
    where = tmp_path_factory.mktemp("run")
    result = train(
        *RUN,
        "--rounds",
        "2",
        "--metrics",
        str(where / "m.jsonl"),
        "--checkpoint",
        str(where / "ck"),
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    return where


def _copy(finished: Path, tmp_path: Path) -> Path:
    shutil.copytree(finished, tmp_path / "run")
    return tmp_path / "run"


def _one_error(result, *words: str) -> str:
    assert_contract(result, [])
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert line.startswith("Error: ") and "\n" not in line, line
    for word in words:
        assert word in line, line
    return line


def _flip_weight_exponent(checkpoint: Path) -> None:
    """Flip the top exponent bit of the first weight, in the file's bytes (a disk's bit rot)."""
    state = torch.load(checkpoint, weights_only=True)
    first = next(iter(state["params"].values())).reshape(-1)[:4].numpy().tobytes()
    data = bytearray(checkpoint.read_bytes())
    at = data.find(first)
    assert at > 0 and data.find(first, at + 1) < 0  # the tensor's bytes, stored once
    data[at + 3] ^= 0x40  # float32, little-endian: byte 3 holds the sign and 7 exponent bits
    checkpoint.write_bytes(bytes(data))
    damaged = torch.load(checkpoint, weights_only=True)  # torch itself notices nothing
    value = next(iter(damaged["params"].values())).reshape(-1)[0].item()
    assert value != next(iter(state["params"].values())).reshape(-1)[0].item()


def test_the_checkpoint_holds_the_digest_of_its_content(finished: Path) -> None:
    state = read_checkpoint(finished / "ck" / CHECKPOINT_NAME)
    assert state[DIGEST_KEY] == content_sha256(state)
    assert [row["round"] for row in state["history"]] == [1, 2] and state["run"]["rounds_done"] == 2
    record = json.loads(record_path(finished / "m.jsonl").read_text())
    assert record["finished"] and len(record["sha256"]) == 64 and len(record["metrics_sha256"]) == 64


def test_a_flipped_exponent_bit_in_a_weight_is_refused_on_resume(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    checkpoint = run / "ck" / CHECKPOINT_NAME
    _flip_weight_exponent(checkpoint)
    result = train(*RUN, "--rounds", "3", "--checkpoint", str(run / "ck"), "--resume")
    _one_error(result, "--checkpoint", str(checkpoint), "digest")
    assert "Traceback" not in result.output
    # uldp report --run reads the same file, and refuses it the same way.
    _one_error(report("--run", str(run / "ck")), "--run", str(checkpoint), "digest")


def test_a_changed_epsilon_in_a_finished_runs_metrics_is_refused(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    metrics = run / "m.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    rows[-1]["epsilon"] /= 2  # still a well-formed row: only the digest tells
    metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(DataError, match=r"m\.jsonl is damaged or edited: it does not match the SHA-256"):
        read_run(metrics)
    _one_error(report("--run", str(metrics)), "--run", "m.jsonl", "SHA-256")


def test_a_changed_delta_in_the_run_record_is_refused(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    side = record_path(run / "m.jsonl")
    record = json.loads(side.read_text())
    side.write_text(json.dumps({**record, "delta": 1e-3}))
    with pytest.raises(DataError, match=r"m\.jsonl\.run\.json is damaged or edited"):
        read_run(run / "m.jsonl")


def test_damaged_structure_is_refused_by_name(finished: Path, tmp_path: Path) -> None:
    original = read_checkpoint(finished / "ck" / CHECKPOINT_NAME)
    path = tmp_path / CHECKPOINT_NAME
    path.write_bytes((finished / "ck" / CHECKPOINT_NAME).read_bytes()[:-100])
    with pytest.raises(DataError, match=rf"^--checkpoint: {path} is truncated or not a checkpoint"):
        read_checkpoint(path)
    broken = [
        ({"history": 5}, "its history does not hold the 2 rounds"),
        ({"history": [1, 2]}, "its history.s row 1 is not round 1"),
        ({"params": {"w": [1.0]}}, "its parameters are not a dictionary of floating-point tensors"),
        ({"torch_rng": torch.zeros(3, dtype=torch.uint8)}, "its torch RNG state is not one torch can"),
        ({"round": "2"}, "its round is not a positive integer"),
        ({"run": None}, "its run is not a dictionary"),
    ]
    for change, message in broken:
        # With a digest recomputed (an edit, not bit rot) and without one (an older checkpoint).
        for digest in (True, False):
            state = {k: v for k, v in {**original, **change}.items() if k != DIGEST_KEY}
            torch.save({**state, DIGEST_KEY: content_sha256(state)} if digest else state, path)
            with pytest.raises(DataError, match=rf"^--checkpoint: {path} is damaged: {message}"):
                read_checkpoint(path)
    torch.save({**original, "sha257": original[DIGEST_KEY]}, path)  # a damaged key is no older file
    with pytest.raises(DataError, match="not a uldp train checkpoint of this version .*unknown sha257"):
        read_checkpoint(path)


def test_a_checkpoint_from_before_digests_resumes_with_a_note(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    checkpoint = run / "ck" / CHECKPOINT_NAME
    state = read_checkpoint(checkpoint)
    del state[DIGEST_KEY]
    torch.save(state, checkpoint)
    assert DIGEST_KEY not in read_checkpoint(checkpoint)
    statement = report("--run", str(run / "ck"), "--accountant", "rdp", "--format", "json")
    assert statement.exit_code == 0, statement.output
    assert any("could not be verified" in line for line in json.loads(statement.stdout)["caveats"])
    result = train(*RUN, "--rounds", "3", "--checkpoint", str(run / "ck"), "--resume", "--format", "json")
    assert result.exit_code == 0, result.output
    assert "could not be verified" in json.loads(result.stdout)["assumptions"]["resumed from"]
    resumed = read_checkpoint(checkpoint)  # written by this version: with its digest
    assert resumed["round"] == 3 and resumed[DIGEST_KEY] == content_sha256(resumed)


def test_an_interrupted_runs_metrics_are_read_with_a_note(finished: Path, tmp_path: Path) -> None:
    """Before it ends, a run's record has no metrics digest (the rows change every round and the
    record does not): its rows are read, and the report says they could not be verified."""
    run = _copy(finished, tmp_path)
    side = record_path(run / "m.jsonl")
    record = json.loads(side.read_text())
    record = {k: v for k, v in record.items() if k not in ("sha256", "metrics_sha256")}
    record = {**record, "finished": False, "assumptions": None}
    side.write_text(json.dumps({**record, "sha256": record_sha256(record)}))
    files = read_run(run / "m.jsonl")
    assert files.rounds_done == 2 and "did not finish" in (files.unverified or "")
    statement = report("--run", str(run / "m.jsonl"), "--accountant", "rdp", "--format", "json")
    assert statement.exit_code == 0, statement.output
    assert any("could not be verified" in line for line in json.loads(statement.stdout)["caveats"])


# --- fuzz: a few hundred mutated files, only DataError escapes, no changed content is accepted ----


def _mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    at = rng.randrange(len(out))
    kind = rng.randrange(5)
    if kind == 0:
        out[at] ^= 1 << rng.randrange(8)
    elif kind == 1:
        out[at] = rng.randrange(256)
    elif kind == 2:
        del out[at:]
    elif kind == 3:
        del out[at]
    else:
        out.insert(at, rng.randrange(256))
    return bytes(out)


def test_fuzz_mutated_checkpoints_are_refused_or_unchanged(finished: Path, tmp_path: Path) -> None:
    source = (finished / "ck" / CHECKPOINT_NAME).read_bytes()
    digest = read_checkpoint(finished / "ck" / CHECKPOINT_NAME)[DIGEST_KEY]
    rng, path, refused = random.Random(32), tmp_path / CHECKPOINT_NAME, 0
    for _ in range(300):
        path.write_bytes(_mutate(source, rng))
        try:
            state = read_checkpoint(path, option="--run")
        except DataError as error:
            assert str(error).startswith(f"--run: {path} ") and "\n" not in str(error)
            refused += 1
            continue
        # Accepted: then the mutation hit no content (zip padding, an unused header field).
        assert content_sha256(state) == digest == state[DIGEST_KEY]
    assert refused > 250


def test_fuzz_mutated_metrics_and_records_are_refused_or_unchanged(finished: Path, tmp_path: Path) -> None:
    reference = read_run(finished / "m.jsonl")
    rows_bytes = (finished / "m.jsonl").read_bytes()
    record_bytes = record_path(finished / "m.jsonl").read_bytes()
    rng, metrics = random.Random(6), tmp_path / "m.jsonl"
    for trial in range(300):
        mutate_record = trial % 2 == 1
        metrics.write_bytes(rows_bytes if mutate_record else _mutate(rows_bytes, rng))
        record_path(metrics).write_bytes(_mutate(record_bytes, rng) if mutate_record else record_bytes)
        try:
            run = read_run(metrics)
        except DataError as error:
            assert str(error).startswith("--run: ") and "\n" not in str(error)
            continue
        # Accepted: only whitespace can change without changing what the files say (JSON
        # whitespace of the record; the metrics' final newline, cut: its length varies with the
        # rows' timings, so which trial cuts it varied from run to run, and the test with it).
        assert run.record == reference.record and run.rows == reference.rows


def test_a_float_that_is_no_checkpoints_is_still_digested_exactly() -> None:
    """Distinct contents never share a digest: a float's bits, a bool against an int, a list's length."""
    base = {"a": 1.0, "b": [1, 2], "c": True}
    neighbours = [
        {"a": struct.unpack("<d", struct.pack("<Q", struct.unpack("<Q", struct.pack("<d", 1.0))[0] ^ 1))[0]},
        {"b": [12]},
        {"b": (1, 2)},
        {"c": 1},
    ]
    digests = {content_sha256({**base, **change}) for change in neighbours}
    assert len(digests | {content_sha256(base)}) == len(neighbours) + 1


def test_fuzz_report_run_on_mutated_checkpoints_keeps_the_cli_contract(
    finished: Path, tmp_path: Path
) -> None:
    """Through the CLI: exit 0 (the content was untouched) or one `Error:` line and exit 2."""
    source = (finished / "ck" / CHECKPOINT_NAME).read_bytes()
    rng, folder = random.Random(9), tmp_path / "ck"
    folder.mkdir()
    for _ in range(20):
        (folder / CHECKPOINT_NAME).write_bytes(_mutate(source, rng))
        args = ("report", "--run", str(folder), "--accountant", "rdp")
        assert_contract(report(*args[1:]), args)
