"""Every `uldp` subcommand has its fuzz test (issue 12), so a new command cannot ship unfuzzed."""

from __future__ import annotations

from pathlib import Path

from uldp.cli.main import SUBCOMMANDS

HERE = Path(__file__).parent


def test_every_subcommand_has_a_fuzz_test() -> None:
    missing = [name for name in SUBCOMMANDS if not (HERE / f"test_fuzz_{name}.py").is_file()]
    assert not missing, f"no tests/cli/test_fuzz_<command>.py for: {', '.join(missing)}"
