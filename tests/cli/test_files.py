from __future__ import annotations

import os
import stat
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
