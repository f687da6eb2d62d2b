"""What `uldp train` records for `uldp report` (issue 17): the record beside the metrics and in the
checkpoint, read back whole, and every damaged or foreign file refused with one line."""

from __future__ import annotations

import json

import pytest

from tests.cli.invoke import command_runner
from uldp.errors import DataError
from uldp.trainers.run_record import RUN_FORMAT, read_run, record_path

train, _ = command_runner("train")

RUN = (
    "--algo",
    "uldp-avg",
    "--dataset",
    "heart-disease",
    "--user-q",
    "0.5",
    "--rounds",
    "3",
    "--noise-seed",
    "0",
)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 3-round run with its metrics (JSON lines and CSV) and checkpoint."""
    where = tmp_path_factory.mktemp("run")
    result = train(*RUN, "--metrics", str(where / "m.jsonl"), "--checkpoint", str(where / "ck"))
    assert result.exit_code == 0, result.output
    result = train(*RUN, "--metrics", str(where / "m.csv"))
    assert result.exit_code == 0, result.output
    return where


def test_the_record_holds_what_the_accounting_reads(finished):
    record = json.loads(record_path(finished / "m.jsonl").read_text())
    assert record["format_version"] == RUN_FORMAT and record["finished"] and record["rounds_done"] == 3
    assert record["kind"] == "plan" and record["accounted_as"] == "uldp-avg"
    assert record["plan_params"]["user_q"] == 0.5 and record["plan_params"]["sigma"] == 5.0
    assert record["noise_fixed"] is True
    assert record["assumptions"]["data"].startswith("heart-disease")


@pytest.mark.parametrize("name", ["m.jsonl", "m.csv", "ck"])
def test_every_form_of_a_run_reads_back_the_same_rounds(finished, name):
    run = read_run(finished / name)
    assert run.rounds_done == 3 and [r["round"] for r in run.rows] == [1, 2, 3]
    reference = read_run(finished / "m.jsonl")
    assert run.record["plan_params"] == reference.record["plan_params"]
    assert [r["epsilon"] for r in run.rows] == pytest.approx(
        [r["epsilon"] for r in reference.rows], rel=1e-12
    )


def _copy(finished, tmp_path, edit_rows=None, edit_record=None):
    rows = (finished / "m.jsonl").read_text()
    record = json.loads(record_path(finished / "m.jsonl").read_text())
    path = tmp_path / "m.jsonl"
    path.write_text(edit_rows(rows) if edit_rows else rows)
    record_path(path).write_text(json.dumps(edit_record(record) if edit_record else record))
    return path


def test_a_truncated_metrics_file_is_named(finished, tmp_path):
    path = _copy(finished, tmp_path, edit_rows=lambda text: text[: len(text) - 40])
    with pytest.raises(DataError, match=r"truncated or damaged at line 3"):
        read_run(path)


def test_a_finished_run_missing_rounds_is_truncated(finished, tmp_path):
    path = _copy(finished, tmp_path, edit_rows=lambda text: "".join(text.splitlines(True)[:2]))
    with pytest.raises(DataError, match=r"holds 2 rounds, but its run record says the run finished 3"):
        read_run(path)


def test_a_record_of_another_version_is_refused_by_version(finished, tmp_path):
    path = _copy(finished, tmp_path, edit_record=lambda r: {**r, "format_version": 99, "uldp_version": "9.0"})
    with pytest.raises(
        DataError, match=r"written by uldp 9.0 \(run record format 99\); this uldp reads format 1"
    ):
        read_run(path)


def test_a_metrics_file_without_its_record(tmp_path, finished):
    path = tmp_path / "m.jsonl"
    path.write_text((finished / "m.jsonl").read_text())
    with pytest.raises(DataError, match=r"no run record beside .*m.jsonl.run.json"):
        read_run(path)


def test_rows_out_of_order_are_damaged(finished, tmp_path):
    def swap(text):
        lines = text.splitlines(True)
        return lines[1] + lines[0] + lines[2]

    with pytest.raises(DataError, match=r"row 1 is not round 1"):
        read_run(_copy(finished, tmp_path, edit_rows=swap))


def test_a_file_that_is_no_checkpoint(tmp_path):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(DataError, match=r"--run: .* is truncated or not a checkpoint"):
        read_run(tmp_path / "ck")
