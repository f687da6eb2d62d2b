"""A user's own code named `FILE.py:NAME` or `package.module:NAME` (trainers/references.py):
what loads, and the one line each failure gets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from uldp.errors import InvalidParameter
from uldp.trainers.references import absolute, call_with, is_reference, load_callable, load_reference

SOURCE = """
import sibling

def make(feature_shape, n_classes=3):
    return (feature_shape, n_classes, sibling.VALUE)

def needs(hidden):
    return hidden

def boom():
    raise RuntimeError("nope")

class Factory:
    @staticmethod
    def create(**kwargs):
        return sorted(kwargs)

CONSTANT = 3
"""


@pytest.fixture
def module_file(tmp_path: Path) -> Path:
    (tmp_path / "sibling.py").write_text("VALUE = 7\n")
    path = tmp_path / "my_models.py"
    path.write_text(SOURCE)
    return path


def test_a_file_reference_loads_and_its_siblings_import(module_file: Path) -> None:
    factory = load_callable(f"{module_file}:make", "--model")
    assert call_with(factory, "--model", {"feature_shape": (4,), "task": "binary"}) == ((4,), 3, 7)
    # The same file is one module, however often it is named: a class pickled once is found again.
    assert load_reference(f"{module_file}:make", "--model") is factory
    assert str(module_file.parent) not in sys.path  # the sibling's folder was added only to import


def test_a_factory_taking_any_keyword_gets_them_all(module_file: Path) -> None:
    factory = load_callable(f"{module_file}:Factory.create", "--model")
    assert call_with(factory, "--model", {"feature_shape": (1,), "n_classes": 2}) == [
        "feature_shape",
        "n_classes",
    ]


def test_a_module_path_loads() -> None:
    assert load_callable("json:dumps", "--data")([1]) == "[1]"


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("{file}:nope", "has no attribute 'nope'"),
        ("{file}:CONSTANT", "names a int object, not a function or class to call"),
        ("{folder}/missing.py:make", "no such file"),
        ("no_such_package_xyz.models:make", "no module named 'no_such_package_xyz.models'"),
        ("make", "expected FILE.py:NAME or package.module:NAME"),
        ("a b:make", "is neither a .py file nor a module path"),
    ],
)
def test_a_bad_reference_is_one_line_naming_the_option(
    module_file: Path, reference: str, expected: str
) -> None:
    text = reference.format(file=module_file, folder=module_file.parent)
    with pytest.raises(InvalidParameter) as error:
        load_callable(text, "--model")
    message = str(error.value)
    assert message.startswith("--model: ") and expected in message and "\n" not in message


def test_a_file_that_fails_to_import_is_named(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("raise ImportError('no torchvision here')\n")
    with pytest.raises(
        InvalidParameter, match=r"^--data: importing .*broken.py failed: ImportError: no torchvision"
    ):
        load_callable(f"{path}:load", "--data")
    # A failed import leaves nothing half-loaded behind: fixed, the file loads.
    path.write_text("def load():\n    return 1\n")
    assert load_callable(f"{path}:load", "--data")() == 1


def test_what_the_factory_needs_and_what_it_raises_are_named(module_file: Path) -> None:
    with pytest.raises(InvalidParameter, match="needs 'hidden', which uldp does not provide"):
        call_with(load_callable(f"{module_file}:needs", "--model"), "--model", {"feature_shape": (1,)})
    with pytest.raises(InvalidParameter, match=r"^--model: boom failed: RuntimeError: nope$"):
        call_with(load_callable(f"{module_file}:boom", "--model"), "--model", {})


def test_what_counts_as_a_reference(tmp_path: Path) -> None:
    assert not is_reference("cnn")
    assert is_reference("models.py:make") and is_reference("pkg.models:make")
    # A file reference is made absolute, so that a silo in another process finds the same file.
    assert absolute("models.py:make") == f"{Path('models.py').resolve()}:make"
    assert absolute("pkg.models:make") == "pkg.models:make"
