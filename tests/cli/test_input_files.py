"""Issue 32, item 3: a user-given input that is not a regular file, or is too large, is refused
at once with one line naming the option and the path.

Before, a FIFO given as input blocked for ever and `/dev/zero` was read until memory ran out. A
FIFO here always gets a writer after `WATCHDOG_S` (a thread opens and closes it), so code that
blocks on it fails the test instead of hanging it; the devices are made with `os.mknod` in
tmp_path from /dev/null's numbers (reading gives nothing at once), never the real ones.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from uldp.errors import DataError, UldpError
from uldp.input_files import CAPS, check_input, open_text, read_bytes, read_text

from .fuzz import assert_contract, run

#: A FIFO nobody writes gets a writer (opened and closed at once) after this long.
WATCHDOG_S = 20.0


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "input.fifo"
    os.mkfifo(path)
    done = threading.Event()

    def unblock() -> None:
        # A reader blocked in open() would wait for ever: let it see an empty file instead.
        if not done.wait(WATCHDOG_S):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    watchdog = threading.Thread(target=unblock, daemon=True)
    watchdog.start()
    yield path
    done.set()
    watchdog.join()


@pytest.fixture
def null_device(tmp_path: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("os.mknod of a character device needs root (CI runs the tests as root)")
    path = tmp_path / "null"
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return path


def test_a_fifo_is_refused_without_blocking(fifo: Path) -> None:
    start = time.monotonic()
    with pytest.raises(DataError, match=r"--holdings .*input\.fifo: is a FIFO; expected a regular file"):
        read_text(fifo, "--holdings", cap=CAPS["table"])
    assert time.monotonic() - start < WATCHDOG_S


def test_a_character_device_and_a_folder_are_refused(null_device: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match="is a character device"):
        read_bytes(null_device, "--config", cap=CAPS["config"])
    with pytest.raises(DataError, match="is a folder"):
        check_input(tmp_path, "--epsilon-csv")


def test_a_link_to_a_regular_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "budgets.csv").write_text("id,epsilon\n")
    (tmp_path / "link.csv").symlink_to("budgets.csv")
    with open_text(tmp_path / "link.csv", "--epsilon-csv", cap=CAPS["table"]) as handle:
        assert handle.read() == "id,epsilon\n"


def test_a_file_over_its_cap_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.yaml"
    path.write_bytes(b"#" * 101)
    assert read_bytes(path, "--config", cap=101) == b"#" * 101
    with pytest.raises(DataError, match=r"--config .*run\.yaml: is 101 bytes, over the 100 bytes"):
        read_bytes(path, "--config", cap=100)


def test_a_file_that_grows_while_read_is_cut_at_its_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only cap + 1 bytes are ever read, whatever fstat said (a file still being written)."""
    import uldp.input_files as input_files

    path = tmp_path / "big.json"
    path.write_bytes(b"x" * 10_000)
    monkeypatch.setattr(input_files, "check_status", lambda *args: None)  # as if it had been small
    with pytest.raises(DataError, match="grew past"):
        read_bytes(path, "--run", cap=100)


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"--run .*nope\.json: no such file"):
        read_bytes(tmp_path / "nope.json", "--run", cap=CAPS["json"])


# --- every reader of a user-given file, end to end -----------------------------------------------


def _refused(args: list[str], *fragments: str) -> str:
    start = time.monotonic()
    result = run(*args)
    assert_contract(result, args)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert all(fragment in line for fragment in fragments), line
    assert time.monotonic() - start < WATCHDOG_S, "it waited on the FIFO"
    return line


SUBJECT = ["subject", "--sigma", "1", "--silos", "2", "--silos-per-round", "1", "--rounds", "2"]
SUBJECT += ["--local-steps", "2", "--record-q", "0.1"]
PERSONALIZE = ["personalize", "--sigma", "1", "--rounds", "3", "--local-steps", "2"]


@pytest.mark.parametrize(
    ("head", "option"),
    [
        (["account", "--sigma", "1", "--q", "0.1", "--steps", "10"], "--config"),
        (SUBJECT, "--holdings"),
        (PERSONALIZE, "--epsilon-csv"),
        (["report"], "--opacus"),
    ],
    ids=lambda v: v if isinstance(v, str) else v[0],
)
def test_a_fifo_input_is_one_line_at_once(fifo: Path, head: list[str], option: str) -> None:
    _refused([*head, option, str(fifo)], fifo.name, "FIFO")


def test_library_readers_refuse_a_fifo_at_once(fifo: Path, tmp_path: Path) -> None:
    """The trainers' readers (`uldp train` reaches them only after loading its data set)."""
    from uldp.trainers.budget_sources import user_budgets
    from uldp.trainers.dropouts import read_schedule

    with pytest.raises(DataError, match="--dropout-schedule .*FIFO"):
        read_schedule(fifo, 4)
    link = tmp_path / "budgets.csv"
    link.symlink_to(fifo)
    with pytest.raises(UldpError, match="--user-budgets"):  # not a file: refused by name
        user_budgets(4, str(link), 0)


def test_a_device_input_is_one_line(null_device: Path) -> None:
    _refused([*SUBJECT, "--holdings", str(null_device)], "--holdings", "character device")
    _refused(["account", "--config", str(null_device)], "--config", "character device")


def test_a_run_record_that_is_a_fifo_is_one_line(tmp_path: Path) -> None:
    metrics = tmp_path / "m.jsonl"
    metrics.write_text("")
    os.mkfifo(tmp_path / "m.jsonl.run.json")
    _refused(["report", "--run", str(metrics)], "--run", "m.jsonl.run.json", "FIFO")


def test_a_checkpoint_that_is_a_fifo_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    os.mkfifo(tmp_path / "run" / "checkpoint.pt")
    _refused(["report", "--run", str(tmp_path / "run")], "--run", "checkpoint.pt", "FIFO")


def test_a_config_over_one_mib_is_refused_before_parsing(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_bytes(b"sigma: 1\n" + b"#" * CAPS["config"])
    _refused(["account", "--config", str(config)], "--config", "run.yaml", "over the 1 MiB")
