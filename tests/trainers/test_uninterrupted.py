"""A signal during a round's commit is delivered after it, to the handler that was in place."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from uldp.trainers import runner
from uldp.trainers.algorithms import TrainConfig
from uldp.trainers.checkpoint_file import CHECKPOINT_NAME, read_checkpoint
from uldp.trainers.runner import train
from uldp.trainers.uninterrupted import uninterrupted

from .synthetic import make_data

# Each test signals its own process (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("signals_reach_main_thread")


def test_a_signal_inside_the_block_reaches_its_handler_after_the_block():
    seen: list[tuple[int, bool]] = []
    inside = False
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: seen.append((signum, inside)))
    try:
        with uninterrupted():
            inside = True
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)  # twice: delivered once
            assert seen == []
            inside = False
        assert seen == [(signal.SIGTERM, False)]
        assert signal.getsignal(signal.SIGTERM) is not previous  # ours is back in place
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_ctrl_c_inside_the_block_raises_after_it_and_handlers_are_restored():
    before = signal.getsignal(signal.SIGINT)
    finished = False
    with pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            os.kill(os.getpid(), signal.SIGINT)
            finished = True
    assert finished
    assert signal.getsignal(signal.SIGINT) is before


def test_outside_the_main_thread_the_block_just_runs():
    ran = []

    def body():
        with uninterrupted():
            ran.append(True)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert ran == [True]


def test_ctrl_c_between_checkpoint_and_on_round_still_reports_the_checkpointed_round(tmp_path, monkeypatch):
    """The race the clean-clone CI once hit: the message said one round, the checkpoint another."""
    save = runner._atomic_save

    def save_then_interrupt(state, path):
        save(state, path)
        if state["round"] == 2:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(runner, "_atomic_save", save_then_interrupt)
    told: list[int] = []
    cfg = TrainConfig(algo="uldp-avg", rounds=4, sigma=1.0, clip=0.5, noise_seed=0)
    with pytest.raises(KeyboardInterrupt):
        train(
            make_data("binary"),
            cfg,
            checkpoint_dir=tmp_path,
            metrics_path=tmp_path / "m.jsonl",
            on_round=lambda row: told.append(row["round"]),
        )
    assert told == [1, 2]
    assert read_checkpoint(tmp_path / CHECKPOINT_NAME)["round"] == 2
    assert len((tmp_path / "m.jsonl").read_text().splitlines()) == 2
