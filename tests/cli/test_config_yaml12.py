"""Issue 32, items 3 and 7: `--config` reads YAML by 1.2's core schema and refuses aliases.

PyYAML follows YAML 1.1: `steps: 0144` (octal) and `steps: 1:40` (base 60) both meant 100 steps,
`sigma: yes` meant True (a float option took it as 1.0), and a 700-byte file of nested aliases
expanded to 3.5 GB before failing with a 79-line traceback.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from .fuzz import assert_contract, run


def _account(tmp_path: Path, text: str, *extra: str):
    config = tmp_path / "run.yaml"
    config.write_text(text)
    args = ["account", "--config", str(config), *extra]
    result = run(*args)
    assert_contract(result, args)
    return result


def _steps(tmp_path: Path, value: str) -> int:
    result = _account(tmp_path, f"sigma: 1\nq: 0.1\nsteps: {value}\n", "--format", "json")
    assert result.exit_code == 0, result.output
    mechanism = json.loads(result.stdout)["assumptions"]["mechanism"]
    return int(mechanism.split()[0])  # "N steps of ..."


@pytest.mark.parametrize(("value", "steps"), [("0144", 144), ("144", 144), ("0o144", 100), ("0x64", 100)])
def test_integers_are_read_as_yaml_1_2_reads_them(tmp_path: Path, value: str, steps: int) -> None:
    assert _steps(tmp_path, value) == steps


@pytest.mark.parametrize("value", ["1:40", "2:30:00"])
def test_yaml_1_1_only_integers_are_refused_naming_the_key(tmp_path: Path, value: str) -> None:
    result = _account(tmp_path, f"sigma: 1\nq: 0.1\nsteps: {value}\n")
    assert result.exit_code == 2
    assert "run.yaml" in result.stderr and "key 'steps'" in result.stderr and value in result.stderr


@pytest.mark.parametrize("word", ["yes", "on", "Off", "y"])
def test_yes_on_off_are_words_not_booleans(tmp_path: Path, word: str) -> None:
    # YAML 1.1 made `yes` True, which a float option took as 1.0 without a word.
    result = _account(tmp_path, f"sigma: {word}\nq: 0.1\nsteps: 10\n")
    assert result.exit_code == 2
    assert "key 'sigma'" in result.stderr and word in result.stderr


def test_exponent_floats_are_floats(tmp_path: Path) -> None:
    # YAML 1.1 wants a dot in a float (`1e-1` was a string); 1.2 reads it as 0.1, as a user means.
    result = _account(tmp_path, "sigma: 1\nq: 1e-1\nsteps: 10\n", "--format", "json")
    assert result.exit_code == 0, result.output


def test_an_alias_is_refused_at_once_naming_its_line(tmp_path: Path) -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for name, previous in zip("bcdefghi", "abcdefgh", strict=True):
        lines.append(f"{name}: &{name} [{','.join(['*' + previous] * 9)}]")  # 9^9 elements in all
    start = time.monotonic()
    result = _account(tmp_path, "\n".join(lines) + "\n")
    assert result.exit_code == 2
    assert "aliases (*a) are not allowed" in result.stderr and "line 2" in result.stderr
    assert time.monotonic() - start < 30  # not expanded: the file is refused where the alias is


def test_a_single_alias_is_refused_too(tmp_path: Path) -> None:
    result = _account(tmp_path, "sigma: &s 1\nq: 0.1\nsteps: 10\nk: *s\n")
    assert result.exit_code == 2 and "aliases (*s)" in result.stderr
