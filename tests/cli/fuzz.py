"""The contract every `uldp` command keeps with any value of any option (issue 12), shared by the
fuzz tests of each command (tests/cli/test_fuzz_*.py).

A fuzz test runs a command with one option set to each of `HOSTILE_VALUES` (and the neighbours of
that option's own limits) on top of a cheap valid command line, then calls `assert_contract`.
"""

from __future__ import annotations

import math
import re

from click.testing import CliRunner, Result

from uldp.cli.main import cli

#: Values a generated-input fuzzer throws at a numeric option: signs, zero, subnormals, the edges
#: of the double range, non-finite spellings, integers past int64, non-numbers.
HOSTILE_VALUES: tuple[str, ...] = (
    "0",
    "-0",
    "-1",
    "1e-320",
    "1e-310",
    "4.9e-324",
    "2.2250738585072014e-308",
    "1e-300",
    "1e155",
    "1.3e154",
    "1e308",
    "1e309",
    "inf",
    "-inf",
    "nan",
    "1e26",
    "99999999999999999999999999",
    "9223372036854775808",
    "0.5",
    "2.5",
    # Exponent form (issue 32): integral values are integers, but not a fraction or past a double.
    "1.5e0",
    "1e400",
    "",
    " ",
    "abc",
    "0x10",
    "1,2",
)

# A number in the output that is not finite: `inf`, `nan`, `Infinity` (json), `-inf`.
_NON_FINITE = re.compile(r"(?<![\w.])-?(inf|infinity|nan)(?![\w])", re.IGNORECASE)


def run(*args: str) -> Result:
    """`uldp ARGS` in-process, with stderr kept apart from stdout."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def assert_contract(result: Result, args: tuple[str, ...] | list[str]) -> None:
    """Exit 0 or 2 only; never a traceback or "internal error"; on exit 2 exactly one stderr line
    starting `Error:`; on exit 0 no non-finite number printed as a result."""
    shown = " ".join(repr(a) for a in args)
    out, err = result.stdout, result.stderr
    detail = f"{out}\n{err}\n{result.exception!r}"
    assert result.exit_code in (0, 2), f"uldp {shown}: exit {result.exit_code}\n{detail}"
    assert "Traceback" not in out + err, f"uldp {shown}: traceback\n{err}"
    assert "internal error" not in (out + err).lower(), f"uldp {shown}: internal error\n{err}"
    if result.exit_code == 2:
        lines = err.strip().splitlines()
        one_error_line = len(lines) == 1 and lines[0].startswith("Error: ")
        assert one_error_line, f"uldp {shown}: stderr is not one Error line\n{err}"
    else:
        assert not _NON_FINITE.search(out), f"uldp {shown}: non-finite number in the result\n{out}"


def is_finite_number(text: str) -> bool:
    """Whether `text` parses as a finite float (for tests that expect exit 0 only on sane values)."""
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False
