"""A user's own code named on the command line: `FILE.py:NAME` or `package.module:NAME`.

`uldp train --model my_models.py:resnet --data my_data.py:load` (issue 35) names a factory and
a loader the way Flower names its apps (`flwr run`'s `serverapp = "app.server:app"`) and
uvicorn its applications: an attribute of a module, the module given by its file or its import
path. The same string travels to the silos of a Flower run, which import it again in their own
processes, so a reference must be importable there too (a file path is made absolute here).

Every failure is one `InvalidParameter` naming the option and what went wrong (the file is
missing, the module raised on import, the attribute does not exist or is not callable); the
module's own traceback is chained for `ULDP_DEBUG=1`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from uldp.errors import InvalidParameter

FORMS = "FILE.py:NAME or package.module:NAME"


def is_reference(text: str) -> bool:
    """Whether `text` names code (`a.py:f`, `pkg.mod:f`) rather than a built-in name."""
    module, sep, name = text.rpartition(":")
    return bool(sep and module and name) and (module.endswith(".py") or _dotted(module))


def _dotted(module: str) -> bool:
    return all(part.isidentifier() for part in module.split("."))


def absolute(text: str) -> str:
    """`text` with a file path made absolute, so that another process (a Flower silo started
    elsewhere in this machine's tree) finds the same file; an import path as it is."""
    module, _, name = text.rpartition(":")
    if module.endswith(".py"):
        return f"{Path(module).expanduser().resolve()}:{name}"
    return text


def load_reference(text: str, option: str) -> Any:
    """The object `text` names (`FILE.py:NAME` or `package.module:NAME`; NAME may be dotted,
    `mod:Class.create`); `option` (e.g. "--model") is named in every error."""
    module_text, sep, name = text.rpartition(":")
    if not (sep and module_text and name):
        raise InvalidParameter(f"{option}: expected {FORMS}, got {text!r}")
    if module_text.endswith(".py"):
        module = _module_from_file(Path(module_text).expanduser(), option)
    elif _dotted(module_text):
        module = _module_from_path(module_text, option)
    else:
        raise InvalidParameter(f"{option}: {module_text!r} is neither a .py file nor a module path ({FORMS})")
    target: Any = module
    for part in name.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            where = getattr(module, "__file__", module_text)
            raise InvalidParameter(f"{option}: {where} has no attribute {name!r}") from None
    return target


def load_callable(text: str, option: str) -> Callable[..., Any]:
    """`load_reference`, refused unless what it names can be called (a function or a class)."""
    target = load_reference(text, option)
    if not callable(target):
        raise InvalidParameter(
            f"{option}: {text} names a {type(target).__name__} object, not a function or class to call"
        )
    return target


def call_with(factory: Callable[..., Any], option: str, available: dict[str, Any]) -> Any:
    """`factory(**the available keywords it names)`: a factory may ask for what it needs of the
    data (`feature_shape`, `n_classes`, `task`, ...) and nothing else. A parameter without a
    default that is not available is refused before the call; whatever the call raises is the
    user's code failing, said in one line naming the option."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin without a signature: call it bare
        signature = None
    kwargs: dict[str, Any] = {}
    if signature is not None:
        takes_any = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if param.name in available:
                kwargs[param.name] = available[param.name]
            elif param.default is param.empty:
                raise InvalidParameter(
                    f"{option}: {_name(factory)} needs {param.name!r}, which uldp does not provide; "
                    f"it may take {', '.join(sorted(available))} (each optional), or give "
                    f"{param.name!r} a default"
                )
        if takes_any:
            kwargs = {**available, **kwargs}
    try:
        return factory(**kwargs)
    except InvalidParameter:
        raise
    except Exception as error:  # the user's code: one line, the traceback chained for ULDP_DEBUG
        raise InvalidParameter(
            f"{option}: {_name(factory)} failed: {type(error).__name__}: {error}"
        ) from error


def _name(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)


def _module_from_file(path: Path, option: str) -> Any:
    if not path.is_file():
        raise InvalidParameter(f"{option}: no such file {str(path)!r}")
    resolved = path.resolve()
    # One module per file, whoever loads it: a stable name from its absolute path, so a model
    # class pickled by one load (a checkpoint) is the class another load finds.
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    module_name = f"uldp_user_{resolved.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise InvalidParameter(f"{option}: cannot load {str(path)!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    # The file's own folder first on the path, as `python FILE.py` would have it: its siblings import.
    folder = str(resolved.parent)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[module_name]
        raise InvalidParameter(
            f"{option}: importing {path} failed: {type(error).__name__}: {error}"
        ) from error
    finally:
        if added:
            sys.path.remove(folder)
    return module


def _module_from_path(dotted: str, option: str) -> Any:
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError as error:
        if error.name and dotted.startswith(error.name) or error.name == dotted:
            raise InvalidParameter(
                f"{option}: no module named {dotted!r} (give a FILE.py path, or install the package)"
            ) from error
        raise InvalidParameter(f"{option}: importing {dotted} failed: {error}") from error
    except Exception as error:
        raise InvalidParameter(
            f"{option}: importing {dotted} failed: {type(error).__name__}: {error}"
        ) from error
