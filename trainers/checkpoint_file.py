"""A run's checkpoint file: its name in the --checkpoint directory, and reading it back, checked.

The round loop (runner.py) writes it after every round and reads it to resume; `uldp report
--run` reads it through run_record.py. What a checkpoint holds and its digest are
checkpoint_integrity.py's.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from uldp.errors import DataError
from uldp.input_files import CAPS, open_input

from .checkpoint_integrity import DIGEST_KEY, check_structure, content_sha256

CHECKPOINT_NAME = "checkpoint.pt"


def read_checkpoint(checkpoint: Path, device: str = "cpu", *, option: str = "--checkpoint") -> dict:
    """The state saved in `checkpoint`; `DataError` naming `option` if it cannot be used (with
    what to do instead when that is `uldp train`'s --checkpoint; `uldp report --run` reads too).

    Loaded with `weights_only=True` (tensors and plain containers only: a checkpoint from
    elsewhere cannot run code). torch's own messages are not passed on: they advise
    `weights_only=False`, which would be exactly the wrong advice for a file of unknown origin.
    The content is checked against the digest saved with it, and its structure against what the
    round loop reads (`checkpoint_integrity`); a checkpoint from before digests has no
    `DIGEST_KEY` in the state returned (say so: `checkpoint_integrity.UNVERIFIED`).
    """
    training = option == "--checkpoint"
    if checkpoint.is_dir():
        raise DataError(
            f"{option}: {checkpoint} is a directory, not a checkpoint file"
            + ("; remove it" if training else "")
        )
    # Opened once, checked on the open file (a FIFO would block torch.load; a device, a cap).
    with open_input(checkpoint, option, cap=CAPS["checkpoint"]) as handle:
        try:
            with warnings.catch_warnings():  # torch warns about pickle protocols of foreign files
                warnings.simplefilter("ignore")
                state = torch.load(handle, map_location=device, weights_only=True)
        except Exception:
            # Not only torch's own errors: a damaged zip or pickle also surfaces as IndexError,
            # KeyError, TypeError, struct.error, UnicodeDecodeError... from inside torch.load.
            advice = "; give another --checkpoint DIR, or --overwrite to start a new run in this one"
            raise DataError(
                f"{option}: {checkpoint} is truncated or not a checkpoint" + (advice if training else "")
            ) from None
    advice = "; give another --checkpoint DIR, or --overwrite to replace it" if training else ""
    try:
        check_structure(state, f"{option}: {checkpoint}")
    except DataError as error:
        raise DataError(f"{error}{advice}") from None
    if DIGEST_KEY in state:
        try:
            same = content_sha256(state) == state[DIGEST_KEY]
        except TypeError:  # a value no checkpoint holds: not what was saved either
            same = False
        if not same:
            raise DataError(
                f"{option}: {checkpoint} is damaged: its content does not match the SHA-256 digest "
                "it was saved with" + advice
            )
    return state
