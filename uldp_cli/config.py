"""`--config FILE.yaml`: option values from a file, overridden by flags on the command line.

The file is a mapping from option names (`target-epsilon` or `target_epsilon`) to values; a
repeatable option takes a YAML list (`k: [1, 2, 4]`). An option's old spelling (a hidden alias,
docs/cli.md) is accepted as a key too, with the same one-line warning as on the command line.
The values become the command's `ctx.default_map`, which Click consults only for options the
command line left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml

from uldp.cli.aliases import aliases_of, warn_old_spelling
from uldp.cli.errors import one_line
from uldp.cli.options import CommaList

F = TypeVar("F", bound=Callable[..., Any])


def config_option(f: F) -> F:
    """Add `--config FILE.yaml` to a command. The command function does not receive it."""
    return click.option(
        "--config",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        # Eager, so the file is read before Click resolves the other options' defaults.
        is_eager=True,
        expose_value=False,
        callback=_install_config,
        help="YAML file of option values, keyed by option name; command-line flags override it.",
    )(f)


def _install_config(ctx: click.Context, param: click.Parameter, path: Path | None) -> None:
    if path is None:
        return
    values = read_config(path, ctx, param)
    ctx.default_map = {**(ctx.default_map or {}), **values}


def read_config(path: Path, ctx: click.Context, config_param: click.Parameter) -> dict[str, Any]:
    """The file's values keyed by parameter name, each checked by its parameter's type.

    Raises `click.BadParameter` (on `config_param`, so exit status 2) naming the file and the
    key: an unreadable file, malformed YAML, a top level that is not a mapping, an unknown key,
    a key given twice, or a value its option rejects.
    """

    def fail(message: str) -> click.BadParameter:
        return click.BadParameter(f"{path}: {message}", ctx=ctx, param=config_param)

    try:
        # utf-8-sig: a byte-order mark is not part of the first key.
        data = yaml.load(path.read_text(encoding="utf-8-sig"), Loader=_UniqueKeyLoader)  # noqa: S506
    except (OSError, UnicodeDecodeError) as error:
        raise fail(f"cannot read it ({one_line(error)})") from error
    except yaml.YAMLError as error:
        raise fail(f"not valid YAML: {_yaml_problem(error)}") from error
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise fail(f"expected a mapping of option names to values, got {type(data).__name__}")

    params = _configurable(ctx.command, config_param)
    old = _old_spellings(ctx.command, config_param)
    allowed = ", ".join(sorted({_key_name(p) for p in params.values()}))
    values: dict[str, Any] = {}
    for key, value in data.items():
        spelling = str(key).replace("-", "_")
        param = params.get(spelling) or old.get(spelling)
        if param is None or not isinstance(key, str):
            raise fail(f"unknown key {key!r}; allowed keys: {allowed}")
        if spelling in old and spelling not in params:
            warn_old_spelling(f"{path}: key {key!r}", f"{_key_name(param)!r}")
        if param.name in values:
            raise fail(f"key {key!r} sets {_key_name(param)!r} a second time")
        values[param.name] = _checked_value(param, key, value, ctx, fail)
    return values


def _configurable(command: click.Command, config_param: click.Parameter) -> dict[str, click.Parameter]:
    """Every spelling a key may use (dashes as underscores) -> its parameter."""
    spellings: dict[str, click.Parameter] = {}
    for param in command.params:
        # Eager parameters (--help, --version, --config itself) act before any file is read.
        if param is config_param or param.is_eager or param.name is None:
            continue
        long_names = [opt.lstrip("-") for opt in param.opts if opt.startswith("--")]
        old = {alias.lstrip("-").replace("-", "_") for alias in aliases_of(param)}
        for spelling in (param.name, *long_names):
            if spelling.replace("-", "_") not in old:  # a dest named as the old spelling warns too
                spellings[spelling.replace("-", "_")] = param
    return spellings


def _old_spellings(command: click.Command, config_param: click.Parameter) -> dict[str, click.Parameter]:
    """Every hidden old spelling of an option (dashes as underscores) -> its parameter."""
    return {
        alias.lstrip("-").replace("-", "_"): param
        for param in command.params
        if param is not config_param
        for alias in aliases_of(param)
    }


def _key_name(param: click.Parameter) -> str:
    """How the allowed-keys list shows a parameter: its first long option name, else its name."""
    long_names = [opt.lstrip("-") for opt in param.opts if opt.startswith("--")]
    return long_names[0] if long_names else str(param.name).replace("_", "-")


def _checked_value(
    param: click.Parameter,
    key: str,
    value: Any,
    ctx: click.Context,
    fail: Callable[[str], click.BadParameter],
) -> Any:
    """`value` shaped as Click expects it from a default map, after checking it converts.

    A repeatable option takes a list, so a lone value is wrapped. The converted value is
    thrown away: Click converts the default-map value again, but its error would not say
    that the value came from this file.
    """
    if isinstance(value, Mapping):
        raise fail(f"key {key!r}: expected a value, got a mapping")
    if param.multiple and not isinstance(value, (list, tuple)):
        value = [value]
    takes_list = param.multiple or param.nargs != 1 or isinstance(param.type, CommaList)
    if isinstance(value, (list, tuple)) and not takes_list:
        raise fail(f"key {key!r}: expected a single value, got a list")
    try:
        param.type_cast_value(ctx, value)
    except click.BadParameter as error:
        raise fail(f"key {key!r}: {one_line(error.message)}") from error
    except (TypeError, ValueError) as error:
        # Some of Click's own types let a TypeError out for values no command line can give.
        raise fail(f"key {key!r}: {value!r} is not a valid {param.type.name}") from error
    return value


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key repeated in one mapping is an error naming the key
    and its line (PyYAML keeps the last value without a word: `rounds: 1` then `rounds: 2` would
    run 2 rounds)."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *base`: its keys may be overridden, as YAML intends
                key = self.construct_object(key_node, deep=deep)
                try:
                    repeated = key in seen
                except TypeError:
                    continue  # an unhashable key; the base class reports it
                if repeated:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"key {key!r} given twice (first on line {seen[key]})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"{error.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return one_line(error)
