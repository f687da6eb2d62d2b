"""Files written by other tools, opened here because reading them may need torch.

An Opacus accountant state is saved either as JSON (`json.dump(accountant.state_dict(), f)`,
read by `uldp.accountants.statements.external.read_opacus_file`, no torch) or with torch.save: the
accountant's `state_dict()` alone, or `PrivacyEngine.save_checkpoint`'s dict, which holds it under
"privacy_accountant_state_dict" next to the model's and optimizer's tensors (opacus/
privacy_engine.py). `read_opacus_state` takes either and tells them apart by their first bytes,
not their names: a torch.save file is a zip archive ("PK\\x03\\x04", torch >= 1.6) or, in the
legacy format, a pickle (protocol 2 opens with 0x80).

torch is imported inside `load_torch_file` only, so that reading a JSON state needs no torch, and
the file is loaded with `weights_only=True`: a checkpoint from elsewhere is untrusted, and a full
unpickle would run whatever code it names (Opacus itself loads with weights_only=False).
"""

from __future__ import annotations

import os
import pickle
import re
import warnings
from pathlib import Path

from uldp.accountants.events import Composed, SubsampledGaussian
from uldp.accountants.statements.external import opacus_events, read_opacus_file
from uldp.errors import DataError
from uldp.input_files import CAPS, InputFileError, check_input, open_input

_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_PROTO = b"\x80"
_UTF8_BOM = b"\xef\xbb\xbf"
# torch's weights-only refusal names the offending class on a line "Unsupported global: GLOBAL x".
_UNSUPPORTED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([A-Za-z_][\w.]*)")
# ... and any other refusal (a corrupt pickle) on a line "WeightsUnpickler error: ...".
_UNPICKLER_ERROR = re.compile(r"WeightsUnpickler error:\s*([^\n]+)")


def load_torch_file(path: str | os.PathLike[str]) -> object:
    """The object torch.save wrote to `path`, loaded weights-only onto the CPU.

    DataError for a missing, unreadable, truncated or corrupt file, and for one holding objects
    other than tensors, numbers, strings and containers (weights-only refuses them).
    """
    name = Path(path).name
    if not Path(path).exists():
        raise DataError(f"{name}: no such file")
    if not Path(path).is_file():
        raise DataError(f"{name}: not a file")
    try:
        check_input(path, None, cap=CAPS["checkpoint"])
    except InputFileError as exc:
        raise DataError(f"{name}: {exc.reason}") from None
    import torch

    try:
        with warnings.catch_warnings():
            # torch warns about odd pickle protocols of damaged files; the DataError says more.
            warnings.simplefilter("ignore", UserWarning)
            # map_location: a checkpoint saved on a GPU would otherwise need one to be opened.
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = _UNSUPPORTED_GLOBAL.search(str(exc))
        if found:
            raise DataError(
                f"{name}: holds objects a weights-only load refuses ({found.group(1)}); save the "
                "accountant's state_dict() on its own, or as JSON"
            ) from None
        other = _UNPICKLER_ERROR.search(str(exc))
        reason = other.group(1) if other else _first_line(exc)
        raise DataError(f"{name}: not a readable torch.save file, truncated or corrupt ({reason})") from None
    except EOFError:
        raise DataError(f"{name}: the file ends early (truncated?)") from None
    except OSError as exc:
        raise DataError(f"{name}: cannot read it ({exc.strerror or exc})") from None
    except Exception as exc:
        # Anything else torch.load raises means the bytes are not a whole torch.save file: its
        # zip reader says so with a RuntimeError, and a cut legacy pickle fails wherever it is
        # cut (struct.error, ValueError, KeyError, ... as measured by truncating at every byte).
        raise DataError(
            f"{name}: not a readable torch.save file, truncated or corrupt ({_first_line(exc)})"
        ) from None


def _first_line(exc: Exception) -> str:
    """The first sentence of an exception's message, with its type where the message is terse."""
    text = str(exc).strip()
    first = text.splitlines()[0].split(". ")[0] if text else ""
    return first if len(first) >= 12 else f"{type(exc).__name__} {first}".strip()


def read_opacus_state(path: str | os.PathLike[str]) -> SubsampledGaussian | Composed:
    """The run an Opacus RDPAccountant accounted, from a torch.save file or a JSON file.

    Takes a saved `accountant.state_dict()`, a `PrivacyEngine.save_checkpoint` file, or a bare
    history (see `uldp.accountants.statements.external.opacus_events`). DataError, starting with the file
    name, for a file that is neither torch.save's nor JSON, or whose content is no Opacus
    RDPAccountant state.
    """
    name = Path(path).name
    try:
        with open_input(path, None, cap=CAPS["checkpoint"]) as f:  # never a FIFO: it would block
            head = f.read(4)
    except InputFileError as exc:  # no such file, a FIFO, a device, over the cap
        raise DataError(f"{name}: {exc.reason}") from None
    except OSError as exc:
        raise DataError(f"{name}: cannot read it ({exc.strerror or exc})") from None
    if not head:
        raise DataError(f"{name}: the file is empty")
    if head.startswith(_ZIP_MAGIC) or head.startswith(_PICKLE_PROTO):
        data = load_torch_file(path)
        try:
            return opacus_events(data)
        except DataError as exc:
            raise DataError(f"{name}: {exc}") from None
    if head.removeprefix(_UTF8_BOM).lstrip()[:1] in (b"{", b"[") or not head.strip():
        return read_opacus_file(path)  # names the file in its errors
    raise DataError(f"{name}: neither a torch.save file nor JSON; expected an Opacus accountant state")
