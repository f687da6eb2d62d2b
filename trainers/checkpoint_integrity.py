"""A checkpoint's content digest and shape: what `checkpoint_file.read_checkpoint` checks
before resuming.

torch's zip format keeps no checksum it verifies, so a flipped bit in a weight loads silently:
in the audit of issue 32, 212 of 250 single-bit flips loaded, and one resumed with loss 6.6e9
instead of 3.19. So every checkpoint carries, under `DIGEST_KEY`, the SHA-256 of its own content
(`content_sha256`): every tensor's dtype, shape and bytes (parameters, torch RNG state) and every
other value (history, i.e. the metrics rows; the run record that `FILE.run.json` also holds;
config, entropy), in the order saved. It lives inside the file it covers, so the one atomic
rename that writes the checkpoint writes its digest too: no crash between two writes can leave a
digest of another round, and so no false "damaged".

The digest detects damage (a disk, a copy, an edit), not forgery: whoever can write the file can
recompute it, as they could the noise entropy it holds. A checkpoint written before digests
(exactly `CHECKPOINT_KEYS`, no `DIGEST_KEY`) is read, and its user told it could not be
verified (`UNVERIFIED`). Whatever the digest says, `check_structure` checks the types the round
loop and `uldp report --run` read, so a damaged file is refused by name, never with an
IndexError from deep inside a resumed run.
"""

from __future__ import annotations

import hashlib
import math
import struct
from typing import Any

import numpy as np
import torch

from uldp.errors import DataError

#: What a checkpoint of this version holds beside its digest; a file without one of them is not
#: ours, or is older.
CHECKPOINT_KEYS = frozenset(
    (
        "round",
        "params",
        "history",
        "config",
        "dataset",
        "elapsed",
        "torch_rng",
        "noise_entropy",
        "noise_fixed",
        "run",
    )
)
DIGEST_KEY = "sha256"

UNVERIFIED = (
    "written by a uldp that stored no content digest: its content could not be verified (a "
    "damaged weight would go unnoticed); every checkpoint written from now on carries one"
)


def content_sha256(state: dict[str, Any]) -> str:
    """SHA-256 of `state`'s content, `DIGEST_KEY` left out; TypeError for a value no checkpoint
    holds (a checkpoint is tensors, plain containers and scalars: `torch.load(weights_only=True)`)."""
    digest = hashlib.sha256(b"uldp-checkpoint-v1\0")
    _feed(digest, {key: value for key, value in state.items() if key != DIGEST_KEY})
    return digest.hexdigest()


def _feed(digest: Any, value: Any) -> None:
    # Every value is tagged with its type and, where it varies, its length: two different
    # contents never feed the same bytes (a list [1, 2] is not a tuple, a str, or [12]).
    if isinstance(value, torch.Tensor):
        tensor = value.detach().to("cpu").contiguous()
        digest.update(f"T{tensor.dtype}{tuple(tensor.shape)}\0".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy())  # its buffer, not a copy
    elif isinstance(value, dict):
        digest.update(f"d{len(value)}\0".encode())
        for key, item in value.items():  # in the order saved: pickle keeps it
            _feed(digest, key)
            _feed(digest, item)
    elif isinstance(value, (list, tuple)):
        digest.update(f"{'l' if isinstance(value, list) else 't'}{len(value)}\0".encode())
        for item in value:
            _feed(digest, item)
    elif isinstance(value, bool):  # before int: bool is an int
        digest.update(b"b1" if value else b"b0")
    elif isinstance(value, int):
        digest.update(f"i{value}\0".encode())
    elif isinstance(value, float):
        digest.update(b"f" + struct.pack("<d", value))
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        digest.update(f"s{len(data)}\0".encode() + data)
    elif value is None:
        digest.update(b"n")
    elif isinstance(value, np.generic):
        _feed(digest, value.item())
    else:
        raise TypeError(f"a checkpoint holds no {type(value).__name__}")


def check_structure(state: Any, where: str) -> None:
    """DataError naming `where` unless `state` has the keys and types a checkpoint of this version
    has (the digest, if any, checked by the caller)."""
    keys = set(state) if isinstance(state, dict) else set()  # a list, a tensor: none of ours
    missing = CHECKPOINT_KEYS - keys
    unknown = keys - CHECKPOINT_KEYS - {DIGEST_KEY}
    if missing or unknown:
        what = [f"missing {', '.join(sorted(missing))}"] if missing else []
        what += [f"unknown {', '.join(sorted(map(str, unknown)))}"] if unknown else []
        raise DataError(f"{where} is not a uldp train checkpoint of this version ({'; '.join(what)})")
    problem = _problem(state)
    if problem:
        raise DataError(f"{where} is damaged: {problem}")


def _problem(state: dict[str, Any]) -> str | None:
    """What is wrong with a checkpoint's values, or None."""
    rounds = state["round"]
    if not _integer(rounds) or rounds < 1:
        return "its round is not a positive integer"
    params = state["params"]
    if (
        not isinstance(params, dict)
        or not params
        or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in params.items())
        or not all(v.is_floating_point() for v in params.values())
    ):
        return "its parameters are not a dictionary of floating-point tensors"
    history = state["history"]
    if not isinstance(history, list) or len(history) != rounds:
        return f"its history does not hold the {rounds} rounds it says it ran"
    for i, row in enumerate(history, start=1):
        if not isinstance(row, dict) or not all(isinstance(k, str) for k in row) or row.get("round") != i:
            return f"its history's row {i} is not round {i}"
    for key in ("config", "dataset", "run"):
        if not isinstance(state[key], dict) or not all(isinstance(k, str) for k in state[key]):
            return f"its {key} is not a dictionary"
    elapsed = state["elapsed"]
    if isinstance(elapsed, bool) or not isinstance(elapsed, (int, float)) or not math.isfinite(elapsed):
        return "its elapsed time is not a number"
    if not _integer(state["noise_entropy"]) or state["noise_entropy"] < 0:
        return "its noise entropy is not a non-negative integer"
    if not isinstance(state["noise_fixed"], bool):
        return "its noise_fixed is not true or false"
    rng = state["torch_rng"]
    if not isinstance(rng, torch.Tensor) or rng.dtype != torch.uint8 or rng.dim() != 1:
        return "its torch RNG state is not a byte tensor"
    try:
        torch.Generator().set_state(rng.cpu())
    except (RuntimeError, ValueError):
        return "its torch RNG state is not one torch can restore"
    digest = state.get(DIGEST_KEY)
    if DIGEST_KEY in state and not isinstance(digest, str):
        return "its digest is not a string"
    return None


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
