"""Issue 32, item 1: an output path that is not a regular file is never replaced.

Every output goes through `uldp.trainers.atomic.atomic_write` (temp file + rename). A rename
over a FIFO or a device turned it into a regular file (`--plot /dev/null` as root replaced the
machine's /dev/null), and a rename over a symlink replaced the link instead of its target. The
devices here are made with `os.mknod` in tmp_path: no test points at the real /dev/null.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from uldp.cli.files import atomic_write_bytes, writes_through

from .fuzz import assert_contract, run

PLAN = ["account", "--sigma", "1", "--q", "0.1", "--steps", "10", "--k", "1,2"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class FifoReader:
    """A thread reading `path` until every writer has closed it, started so that a writer finds
    it there: the test holds a writer of its own open (`_probe`) from the moment the reader's
    open() returned until `join`, so the reader sees EOF only after the code under test closed.
    """

    def __init__(self, path: Path) -> None:
        self.data = b""
        self._thread = threading.Thread(target=self._read, args=(path,), daemon=True)
        self._thread.start()
        self._probe = self._attach(path)

    def _read(self, path: Path) -> None:
        with open(path, "rb") as handle:  # blocks until a writer opens it
            self.data = handle.read()

    @staticmethod
    def _attach(path: Path) -> int:
        for _ in range(6000):  # ENXIO until the thread has the FIFO open for reading
            try:
                return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                threading.Event().wait(0.01)
        raise AssertionError("the reader thread never opened the FIFO")

    def join(self) -> bytes:
        os.close(self._probe)
        self._thread.join(timeout=30)
        assert not self._thread.is_alive()
        return self.data


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "out.fifo"
    os.mkfifo(path)
    yield path


def test_a_fifo_receives_the_bytes_and_stays_a_fifo(fifo: Path) -> None:
    reader = FifoReader(fifo)
    atomic_write_bytes(fifo, b"hello " * 50_000)  # more than a pipe buffer: blocking writes
    assert reader.join() == b"hello " * 50_000
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert os.listdir(fifo.parent) == [fifo.name]


def test_a_fifo_without_reader_is_one_error_at_once_and_stays_a_fifo(fifo: Path) -> None:
    with pytest.raises(OSError, match="no process is reading") as caught:
        atomic_write_bytes(fifo, b"x")
    assert caught.value.filename == str(fifo)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert os.listdir(fifo.parent) == [fifo.name]


def test_a_symlink_stays_a_link_and_its_target_gets_the_content(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "latest.json"
    link.symlink_to("report.json")
    atomic_write_bytes(link, b"new")
    assert link.is_symlink() and os.readlink(link) == "report.json"
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the target's mode, not the link's
    assert sorted(os.listdir(tmp_path)) == ["latest.json", "report.json"]


def test_a_relative_link_chain_into_another_folder_replaces_the_final_target(tmp_path: Path) -> None:
    results, links = tmp_path / "results", tmp_path / "links"
    results.mkdir()
    links.mkdir()
    (results / "plot.png").write_bytes(b"old")
    (links / "hop.png").symlink_to("../results/plot.png")
    (tmp_path / "plot.png").symlink_to("links/hop.png")
    atomic_write_bytes(tmp_path / "plot.png", b"new")
    assert (tmp_path / "plot.png").is_symlink() and (links / "hop.png").is_symlink()
    assert (results / "plot.png").read_bytes() == b"new"
    assert os.listdir(results) == ["plot.png"] and os.listdir(links) == ["hop.png"]  # temp in results/


def test_a_dangling_link_gets_its_target_created(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    link = tmp_path / "metrics.csv"
    link.symlink_to("out/metrics.csv")
    atomic_write_bytes(link, b"a,b\n")
    assert link.is_symlink()
    assert (tmp_path / "out" / "metrics.csv").read_bytes() == b"a,b\n"


def test_a_symlink_loop_is_an_error_naming_the_path(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    with pytest.raises(OSError) as caught:
        atomic_write_bytes(loop, b"x")
    assert caught.value.filename == str(loop)
    assert loop.is_symlink()


def test_a_path_through_proc_self_fd_writes_into_the_open_file(tmp_path: Path) -> None:
    """/dev/stdout redirected to a file leads to /proc/self/fd/1: the shell's file gets the bytes
    after what is already there; replacing it would lose the command's earlier output."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("no /proc/self/fd on this system")
    shell_file = tmp_path / "stdout.txt"
    with open(shell_file, "wb") as handle:
        handle.write(b"printed first\n")
        handle.flush()
        inode = os.fstat(handle.fileno()).st_ino
        stdout_link = tmp_path / "stdout"
        stdout_link.symlink_to(f"/proc/self/fd/{handle.fileno()}")
        assert writes_through(stdout_link)
        atomic_write_bytes(stdout_link, b"then the report\n")
    assert shell_file.read_bytes() == b"printed first\nthen the report\n"
    assert shell_file.stat().st_ino == inode


def test_a_character_device_stays_a_device(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("os.mknod of a character device needs root (CI runs the tests as root)")
    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers, in tmp_path
    before = os.lstat(device)
    atomic_write_bytes(device, b"\x89PNG not kept")
    after = os.lstat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_mode == before.st_mode  # never chmod-ed
    assert after.st_ino == before.st_ino
    assert os.listdir(tmp_path) == ["null"]


def test_a_block_device_is_refused_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block device is a disk: a PNG written onto it would destroy it. Stat is faked (no real
    device node is made), and any open would fail the test."""
    from uldp.trainers import atomic

    path = tmp_path / "disk"
    path.write_bytes(b"")
    real_stat = os.stat

    def as_block_device(target: object, *args: object, **kwargs: object) -> os.stat_result:
        status = real_stat(target, *args, **kwargs)  # type: ignore[arg-type]
        if os.fspath(target) == str(path):  # type: ignore[arg-type]
            fields = list(status)
            fields[0] = stat.S_IFBLK | 0o660
            return os.stat_result(fields)
        return status

    monkeypatch.setattr(atomic.os, "stat", as_block_device)
    monkeypatch.setattr(atomic.os, "open", lambda *a, **k: pytest.fail("opened a block device"))
    with pytest.raises(OSError, match="block device"):
        atomic_write_bytes(path, b"x")


def test_plot_into_a_fifo_end_to_end(fifo: Path) -> None:
    reader = FifoReader(fifo)
    args = [*PLAN, "--plot", str(fifo)]
    result = run(*args)
    assert_contract(result, args)
    assert result.exit_code == 0, result.output
    assert reader.join().startswith(PNG_MAGIC)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_plot_into_a_fifo_nobody_reads_is_one_line_naming_the_option(fifo: Path) -> None:
    args = [*PLAN, "--plot", str(fifo)]
    result = run(*args)
    assert_contract(result, args)
    assert result.exit_code == 2
    assert "--plot" in result.stderr and str(fifo) in result.stderr and "FIFO" in result.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_plot_through_a_symlink_end_to_end(tmp_path: Path) -> None:
    (tmp_path / "figures").mkdir()
    link = tmp_path / "plot.png"
    link.symlink_to("figures/epsilon.png")  # dangling until the run writes the target
    args = [*PLAN, "--plot", str(link)]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert (tmp_path / "figures" / "epsilon.png").read_bytes().startswith(PNG_MAGIC)


def test_plot_into_a_character_device_end_to_end(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("os.mknod of a character device needs root (CI runs the tests as root)")
    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    args = [*PLAN, "--plot", str(device)]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert os.listdir(tmp_path) == ["null"]
