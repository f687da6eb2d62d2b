"""`--config FILE.yaml`: option values from a file, overridden by flags on the command line.

The file is a mapping from option names (`target-epsilon` or `target_epsilon`) to values; a
repeatable option takes a YAML list (`k: [1, 2, 4]`). An option's old spelling (a hidden alias,
docs/cli.md) is accepted as a key too, with the same one-line warning as on the command line.
The values become the command's `ctx.default_map`, which Click consults only for options the
command line left out. The file is read by YAML 1.2's core schema (`0144` is 144, `yes` a word),
aliases are refused, and it must be a regular file of at most 1 MiB (docs/cli.md, "Files").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml

from uldp.cli.aliases import aliases_of, warn_old_spelling
from uldp.cli.errors import one_line
from uldp.cli.options import CommaList
from uldp.input_files import CAPS, InputFileError, read_text

F = TypeVar("F", bound=Callable[..., Any])


#: `ctx.meta` key of the --config file read, if any.
CONFIG_PATH = "uldp.config_path"


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
    ctx.meta[CONFIG_PATH] = path  # a check that warns about a key names the file, as read_config does


def read_config(path: Path, ctx: click.Context, config_param: click.Parameter) -> dict[str, Any]:
    """The file's values keyed by parameter name, each checked by its parameter's type.

    Raises `click.BadParameter` (on `config_param`, so exit status 2) naming the file and the
    key: an unreadable file (a FIFO, a device, over 1 MiB), malformed YAML, an alias, a top level
    that is not a mapping, an unknown key, a key given twice, or a value its option rejects.
    """

    def fail(message: str) -> click.BadParameter:
        return click.BadParameter(f"{path}: {message}", ctx=ctx, param=config_param)

    try:
        # utf-8-sig: a byte-order mark is not part of the first key. A FIFO, a device or a file
        # over CAPS["config"] is refused before a byte is read (issue 32).
        text = read_text(path, cap=CAPS["config"], encoding="utf-8-sig")
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506
    except InputFileError as error:
        raise fail(error.reason) from error
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
    # Click passes None (and, for a repeatable option, an empty list) through its types
    # unchecked, as "not given"; the command would then see a key set to nothing (issue 32:
    # `sigma: null` and `k: []` ended in an internal error). Leaving the key out means that.
    if value is None:
        raise fail(f"key {key!r}: null is not {_expected(param)}; leave the key out for the default")
    if param.multiple and not isinstance(value, (list, tuple)):
        value = [value]
    takes_list = param.multiple or param.nargs != 1 or isinstance(param.type, CommaList)
    if isinstance(value, (list, tuple)) and not takes_list:
        raise fail(f"key {key!r}: expected a single value, got a list")
    if isinstance(value, (list, tuple)) and not value:
        raise fail(f"key {key!r}: an empty list; give at least one value or leave the key out")
    if isinstance(param.type, click.types.BoolParamType) and not isinstance(value, bool):
        # Click's bool type calls str methods on what it gets: `secure: 2` was an internal error.
        raise fail(f"key {key!r}: {value!r} is not true or false")
    try:
        param.type_cast_value(ctx, value)
    except click.BadParameter as error:
        raise fail(f"key {key!r}: {one_line(error.message)}") from error
    except (TypeError, ValueError, ArithmeticError, AttributeError) as error:
        # Some of Click's own types let these out for values no command line can give (a YAML
        # int where a str is expected, an int too large for a float).
        raise fail(f"key {key!r}: {value!r} is not {_expected(param)}") from error
    except OSError as error:
        # A path type that looks at the file system (a name over 255 bytes: ENAMETOOLONG).
        raise fail(f"key {key!r}: {value!r} cannot be used ({one_line(error)})") from error
    return value


def _expected(param: click.Parameter) -> str:
    """What one value of the parameter is, for a message: `a float`, `an integer`, `true or false`."""
    kind = param.type.item_type if isinstance(param.type, CommaList) else param.type
    if isinstance(kind, click.types.BoolParamType):
        return "true or false"
    name = str(kind.name)
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader reading plain scalars by YAML 1.2's core schema, refusing aliases.

    PyYAML follows YAML 1.1, where `steps: 0144` is octal and `steps: 1:40` sexagesimal (both
    100), `yes`/`no`/`on`/`off` are booleans, `1_000` is 1000 and `2001-12-14` a date (issue 32).
    YAML 1.2, the version every current YAML tool reads, makes `0144` the integer 144, `0o144`
    octal, `1e3` a float, booleans only `true`, `True`, `TRUE` and the same of false, and everything
    else a string, which the option's own type then accepts or refuses by name.

    An alias (`*name`) is refused where it appears: nested aliases expand exponentially (a
    700-byte file grew to 3.5 GB), and an options file needs none.
    """

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"aliases (*{event.anchor}) are not allowed in a config file; write the value out",
                event.start_mark,
            )
        return super().compose_node(parent, index)  # type: ignore[arg-type]

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:  # type: ignore[override]
        text = str(self.construct_scalar(node))
        sign = -1 if text.startswith("-") else 1
        digits = text.lstrip("+-")
        try:
            if digits.startswith("0o"):
                return sign * int(digits[2:], 8)
            if digits.startswith("0x"):
                return sign * int(digits[2:], 16)
            return sign * int(digits, 10)  # YAML 1.2: a leading zero is still decimal
        except ValueError:  # an explicit !!int on a YAML 1.1 form such as 1:40
            raise yaml.constructor.ConstructorError(
                None, None, f"{text!r} is not a YAML 1.2 integer", node.start_mark
            ) from None

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:  # type: ignore[override]
        text = str(self.construct_scalar(node))
        special = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf, ".nan": math.nan}
        if text.lower() in special:
            return special[text.lower()]
        if not _YAML12_FLOAT.fullmatch(text):  # an explicit !!float on a YAML 1.1 form such as 1:40.5
            raise yaml.constructor.ConstructorError(
                None, None, f"{text!r} is not a YAML 1.2 float", node.start_mark
            )
        return float(text)


_FLOAT = r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
_YAML12_FLOAT = re.compile(_FLOAT)
# The core schema's implicit types (YAML 1.2.2, section 10.3.2), in place of YAML 1.1's; a plain
# scalar that none of them matches is a string. The merge key `<<` is kept (`<<: {q: 0.25}`).
_Yaml12Loader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag == "tag:yaml.org,2002:merge"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    (
        "tag:yaml.org,2002:float",
        rf"^(?:{_FLOAT}|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        list("-+.0123456789"),
    ),
):
    _Yaml12Loader.add_implicit_resolver(_tag, re.compile(_pattern), _first)
_Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _Yaml12Loader.construct_yaml_int)
_Yaml12Loader.add_constructor("tag:yaml.org,2002:float", _Yaml12Loader.construct_yaml_float)


class _UniqueKeyLoader(_Yaml12Loader):
    """The YAML 1.2 loader, except that a key repeated in one mapping is an error naming the key
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
