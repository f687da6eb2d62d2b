from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from uldp.cli import files
from uldp.cli.files import atomic_write_bytes, atomic_write_text


def test_writes_new_file_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    atomic_write_text(target, "{}\n")
    assert target.read_text() == "{}\n"
    assert os.listdir(tmp_path) == ["report.json"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_replaces_existing_file_whole_and_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "report.csv"
    target.write_text("a much longer old content\n" * 100)
    target.chmod(0o640)
    atomic_write_bytes(target, b"short\n")
    assert target.read_bytes() == b"short\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["report.csv"]


def test_failed_write_keeps_old_file_and_removes_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.txt"
    target.write_text("old")

    def broken_replace(src: str, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["report.txt"]


@pytest.mark.usefixtures("signals_reach_main_thread")
def test_a_signal_the_moment_the_temp_file_exists_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM handled right after the temporary file is made (its name already known to the
    clean-up): the file is removed. With tempfile.mkstemp a signal there left it (a CI run once
    found one after SIGTERM stopped `uldp train`)."""
    from uldp.cli.signals import Terminated
    from uldp.trainers import atomic

    real_open = os.open

    def open_then_signal(path: object, *args: object, **kwargs: object) -> int:
        fd = real_open(path, *args, **kwargs)  # type: ignore[arg-type]
        if str(path).endswith(".tmp"):
            os.kill(os.getpid(), signal.SIGTERM)
        return fd

    def terminate(signum: int, frame: object) -> None:
        raise Terminated(signum)

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        monkeypatch.setattr(atomic.os, "open", open_then_signal)
        with pytest.raises(Terminated):
            atomic_write_text(tmp_path / "report.json", "{}\n")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert os.listdir(tmp_path) == []


# --- issue 12: temporary files carry the writer's pid; a killed writer's are cleaned up -------------


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_temp_file_names_its_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real_replace = os.replace

    def spy(src: str, dst: object) -> None:
        seen.append(Path(src).name)
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", spy)
    atomic_write_text(tmp_path / "q.csv", "a\n")
    assert seen and seen[0].startswith(f".q.csv.{os.getpid()}.") and seen[0].endswith(".tmp")


def test_stale_temps_removed_only_when_ours_and_dead_or_old(tmp_path: Path) -> None:
    target = tmp_path / "q.csv"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = tmp_path / f".q.csv.{_dead_pid()}.abcd1234.tmp"
        alive = tmp_path / f".q.csv.{live.pid}.abcd1234.tmp"
        old = tmp_path / f".q.csv.{live.pid}.zzzz9999.tmp"
        legacy = tmp_path / ".q.csv.abcd1234.tmp"  # written before temp names carried a pid
        other_target = tmp_path / f".r.csv.{_dead_pid()}.abcd1234.tmp"
        not_ours = tmp_path / ".q.csv.notes.tmp"
        for path in (dead, alive, old, legacy, other_target, not_ours):
            path.write_text("partial")
        day_ago = time.time() - files.STALE_AGE_S - 60
        os.utime(old, (day_ago, day_ago))
        atomic_write_text(target, "new\n")
        assert target.read_text() == "new\n"
        assert not dead.exists() and not old.exists() and not legacy.exists()
        assert alive.exists() and other_target.exists() and not_ours.exists()
    finally:
        live.kill()
        live.wait()


SLOW_WRITER = """
import sys, time
from uldp.cli.signals import install
from uldp.cli.files import atomic_write
install()

def write(handle):
    handle.write(b"x" * 1_000_000)
    handle.flush()
    print("writing", flush=True)
    time.sleep(60)

atomic_write(sys.argv[1], write)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_remove_the_temp_file_and_exit_128_plus_signum(
    tmp_path: Path, signum: int
) -> None:
    target = tmp_path / "q.csv"
    process = subprocess.Popen(
        [sys.executable, "-c", SLOW_WRITER, str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "writing"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # the write is in flight
    process.send_signal(signum)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, err
    assert "Traceback" not in err
    assert f"Stopped by {signal.Signals(signum).name}" in err
    assert list(tmp_path.iterdir()) == []
