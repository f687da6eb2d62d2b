"""Opacus accountant states saved by torch.save (trainers/external_files.py)."""

from __future__ import annotations

import json
from collections import OrderedDict

import pytest
import torch

from uldp.accountants.events import Composed, SubsampledGaussian
from uldp.errors import DataError
from uldp.trainers.external_files import load_torch_file, read_opacus_state

# RDPAccountant.state_dict(): an OrderedDict with the history's tuples and the mechanism.
STATE = OrderedDict(history=[(1.1, 0.01, 600), (0.9, 0.01, 400)], mechanism="rdp")
EXPECTED = Composed((SubsampledGaussian(1.1, 0.01, 600), SubsampledGaussian(0.9, 0.01, 400)))


def test_state_dict_saved_by_torch_save_is_read(tmp_path):
    path = tmp_path / "accountant.pt"
    torch.save(STATE, path)
    assert read_opacus_state(path) == EXPECTED


def test_legacy_torch_format_is_read(tmp_path):
    path = tmp_path / "accountant.pth"
    torch.save(STATE, path, _use_new_zipfile_serialization=False)
    assert read_opacus_state(path) == EXPECTED


def test_privacy_engine_checkpoint_with_tensors_is_read(tmp_path):
    """PrivacyEngine.save_checkpoint's dict: model and optimizer state next to the accountant's."""
    path = tmp_path / "checkpoint.pt"
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.save(
        {
            "module_state_dict": model.state_dict(),
            "privacy_accountant_state_dict": STATE,
            "optimizer_state_dict": optimizer.state_dict(),
        },
        path,
    )
    assert read_opacus_state(path) == EXPECTED


def test_json_state_is_read_by_content_not_name(tmp_path):
    path = tmp_path / "accountant.pt"  # a JSON file, whatever its name says
    path.write_text(json.dumps(STATE))
    assert read_opacus_state(path) == EXPECTED


def test_truncated_file_is_a_data_error(tmp_path):
    path = tmp_path / "accountant.pt"
    torch.save(STATE, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(
        DataError, match="^accountant.pt: not a readable torch.save file, truncated or corrupt"
    ):
        read_opacus_state(path)
    legacy = tmp_path / "legacy.pt"
    torch.save(STATE, legacy, _use_new_zipfile_serialization=False)
    legacy.write_bytes(legacy.read_bytes()[:40])
    with pytest.raises(DataError, match="^legacy.pt: "):
        read_opacus_state(legacy)


class _Custom:
    pass


def test_objects_a_weights_only_load_refuses_are_named(tmp_path):
    path = tmp_path / "pickled.pt"
    torch.save({"history": _Custom()}, path)
    with pytest.raises(DataError, match=r"weights-only load refuses \(.*_Custom\)") as raised:
        read_opacus_state(path)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "the file is empty"),
        (b"\x00\x01binary", "neither a torch.save file nor JSON"),
        (b"hello", "neither a torch.save file nor JSON"),
        (b"[1, 2", "not JSON"),
    ],
)
def test_unknown_files_are_data_errors(tmp_path, content, message):
    path = tmp_path / "state.bin"
    path.write_bytes(content)
    with pytest.raises(DataError, match=f"^state.bin: {message}"):
        read_opacus_state(path)


def test_missing_file_and_other_states_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="^nope.pt: no such file"):
        read_opacus_state(tmp_path / "nope.pt")
    with pytest.raises(DataError, match="not a file"):
        load_torch_file(tmp_path)
    path = tmp_path / "prv.pt"
    torch.save(OrderedDict(history=[(1.0, 0.1, 3)], mechanism="prv"), path)
    with pytest.raises(DataError, match="^prv.pt: the Opacus accountant state is of type 'prv'"):
        read_opacus_state(path)
    path = tmp_path / "weights.pt"
    torch.save(torch.nn.Linear(2, 1).state_dict(), path)
    with pytest.raises(DataError, match="^weights.pt: not an Opacus accountant state: no 'history' key"):
        read_opacus_state(path)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_every_truncation_is_a_data_error(tmp_path, legacy):
    """A cut legacy pickle fails wherever it is cut (EOFError, struct.error, KeyError, ...): each
    must come out as a DataError, never as torch's own exception."""
    path = tmp_path / "state.pt"
    torch.save(STATE, path, _use_new_zipfile_serialization=not legacy)
    data = path.read_bytes()
    for n in range(1, len(data), 1 if legacy else 7):
        path.write_bytes(data[:n])
        with pytest.raises(DataError, match="^state.pt: "):
            read_opacus_state(path)
