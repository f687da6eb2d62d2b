"""The repository installs as one `uldp` package, and `import uldp` stays cheap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import uldp
import uldp.accountants

ROOT = Path(__file__).resolve().parents[1]


def _setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_folder_with_an_init_is_a_listed_package():
    config = _setuptools_config()
    found = set()
    for name, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *relative)))
    assert found == set(config["packages"])


def _run_outside(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    # From outside the checkout, as an installed user would: the repository is not on sys.path.
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)


@pytest.mark.parametrize("name", ["crypto", "accountants", "trainers", "uldp_cli"])
def test_no_top_level_module_of_ours(name, tmp_path):
    result = _run_outside(f"import {name}", tmp_path)
    assert result.returncode != 0
    assert "ModuleNotFoundError" in result.stderr


def test_import_uldp_is_cheap_and_lazy(tmp_path):
    code = (
        "import sys, uldp; print(uldp.__version__); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'torch', 'scipy', 'click', 'rich') or m.startswith('uldp.')))"
    )
    result = _run_outside(code, tmp_path)
    assert result.returncode == 0, result.stderr
    version, loaded = result.stdout.splitlines()
    assert version == uldp.__version__
    assert loaded == "['uldp.errors']"


def test_entry_points_resolve_on_first_use():
    from uldp.accounting import account, calibrate
    from uldp.crypto import secure_weighted_sum
    from uldp.trainers.algorithms import plan_algorithm

    assert uldp.account is account
    assert uldp.calibrate is calibrate
    assert uldp.plan_algorithm is plan_algorithm
    assert uldp.secure_weighted_sum is secure_weighted_sum
    with pytest.raises(AttributeError):
        uldp.no_such_thing  # noqa: B018


def test_dir_lists_the_documented_entry_points_and_not_the_helpers():
    names = dir(uldp)
    assert {"calibrate", "account", "plan_algorithm", "InvalidParameter", "__version__"} <= set(names)
    assert not {"Any", "annotations", "import_module", "version"} & set(names)
    for name in names:
        getattr(uldp, name)  # every listed name resolves


def test_typed_marker_ships():
    assert (Path(uldp.__file__).parent / "py.typed").is_file()
    assert "py.typed" in str(tomllib.loads((ROOT / "pyproject.toml").read_text()))


def test_the_report_schema_ships_as_package_data():
    # `uldp report --schema` reads it with importlib.resources, from the installed package.
    import uldp.accountants.statements

    assert '"uldp.accountants.statements" = ["report-schema.json"]' in (ROOT / "pyproject.toml").read_text()
    assert (Path(uldp.accountants.statements.__file__).parent / "report-schema.json").is_file()


def test_python_dash_m_uldp(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "uldp", "--version"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"uldp {uldp.__version__}"
