"""The round loop: metrics per round, epsilon from the accountants, checkpoints and resume."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from uldp.accountants.account import group_level, record_level
from uldp.trainers.algorithms import TrainConfig, plan_algorithm
from uldp.trainers.checkpoint_file import CHECKPOINT_NAME
from uldp.trainers.runner import train

from .synthetic import make_data


class Interrupted(Exception):
    pass


def _config(**changes):
    # A fixed noise seed: these tests compare runs, which fresh entropy would make differ.
    base = dict(
        algo="uldp-avg", rounds=4, sigma=1.0, clip=0.5, lr=0.5, global_lr=5.0, user_q=0.7, noise_seed=0
    )
    return TrainConfig(**{**base, **changes})


def test_history_metrics_file_and_epsilon(tmp_path):
    data = make_data("binary")
    cfg = _config()
    result = train(data, cfg, metrics_path=tmp_path / "m.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["round"] for r in lines] == [1, 2, 3, 4]
    for row in lines:
        assert {"round", "loss", "roc_auc", "epsilon", "elapsed_s"} <= row.keys()
        plan = plan_algorithm("uldp-avg", sigma=1.0, rounds=row["round"], user_q=0.7, silos=3)
        assert row["epsilon"] == record_level(plan.mechanism, 1e-5).epsilon
    eps = [r["epsilon"] for r in lines]
    assert eps == sorted(eps) and eps[0] > 0
    assert result.summary["epsilon"] == eps[-1] and result.summary["synthetic"] is True
    assert "uldp account --algo uldp-avg --sigma 1 --rounds 4" in result.assumptions["check"]


def test_weighted_and_group_epsilons_match_the_accountant(tmp_path):
    data = make_data("binary")
    w = train(data, _config(algo="uldp-sgd-w", rounds=2))
    plan = plan_algorithm("uldp-sgd", sigma=1.0, rounds=2, user_q=0.7, silos=3)
    assert w.history[-1]["epsilon"] == record_level(plan.mechanism, 1e-5).epsilon
    # `uldp account` takes the weighted name itself (issue 33): the check names what was trained.
    assert "uldp account --algo uldp-sgd-w --sigma 1 --rounds 2" in w.assumptions["check"]
    g = train(data, _config(algo="uldp-group", rounds=2, group_k=3, batch_size=8, user_q=1.0))
    sizes = [int(n) for n in np.bincount(data.silo_train, minlength=3)]
    assert g.summary["group_k"] == 3
    # The silo sizes before bounding set the rates and steps (issue 11 point 12), not the kept ones.
    plan = plan_algorithm("uldp-group", sigma=1.0, rounds=2, silo_sizes=sizes, batch_size=8, k=3)
    assert g.history[-1]["epsilon"] == group_level(plan.mechanism, 1e-5, 3, "rdp").epsilon
    assert sum(kept_sizes(g)) <= sum(sizes)


def kept_sizes(result):
    text = result.assumptions["group size"]
    start = text.index("kept records per silo ") + len("kept records per silo ")
    kept = text[start : text.index(" of ", start)]
    return [int(n) for n in kept.split(", ")]


def test_default_is_not_private_and_learns():
    data = make_data("multiclass", n=300, users=10, n_classes=3)
    result = train(data, TrainConfig(algo="default", rounds=3, lr=0.1, batch_size=16))
    assert all(math.isinf(r["epsilon"]) for r in result.history)
    assert result.history[-1]["accuracy"] > 0.5  # 3 balanced classes: chance is 1/3


def test_csv_metrics(tmp_path):
    train(make_data("survival"), _config(algo="uldp-naive", rounds=2), metrics_path=tmp_path / "m.csv")
    header, *rows = (tmp_path / "m.csv").read_text().splitlines()
    assert header.split(",")[:4] == ["round", "loss", "c_index", "epsilon"] and len(rows) == 2


def test_same_seed_same_run_and_loop_equals_batched():
    data = make_data("binary")
    a = train(data, _config(rounds=2))
    b = train(data, _config(rounds=2))
    c = train(data, _config(rounds=2, batched=False))
    for x, y, z in zip(a.history, b.history, c.history):
        assert x["loss"] == y["loss"]
        assert z["loss"] == pytest.approx(x["loss"], rel=1e-5)
    for k in a.params:
        torch.testing.assert_close(c.params[k], a.params[k], atol=1e-5, rtol=0)


@pytest.mark.parametrize("algo", ["uldp-avg", "uldp-group"])
def test_resume_after_interruption_equals_uninterrupted(tmp_path, algo):
    data = make_data("binary")
    cfg = _config(algo=algo, rounds=3, group_k="median", batch_size=40)
    whole = train(data, cfg)

    def stop_after_two(row):
        if row["round"] == 2:
            raise Interrupted

    with pytest.raises(Interrupted):
        train(
            data,
            cfg,
            checkpoint_dir=tmp_path / "ck",
            metrics_path=tmp_path / "m.jsonl",
            on_round=stop_after_two,
        )
    resumed = train(data, cfg, checkpoint_dir=tmp_path / "ck", metrics_path=tmp_path / "m.jsonl", resume=True)
    strip = lambda h: [{k: v for k, v in r.items() if k != "elapsed_s"} for r in h]  # noqa: E731
    assert strip(resumed.history) == strip(whole.history)
    for k in whole.params:
        assert torch.equal(resumed.params[k], whole.params[k])
    lines = (tmp_path / "m.jsonl").read_text().splitlines()
    assert [json.loads(line)["round"] for line in lines] == [1, 2, 3]
    assert not list((tmp_path / "ck").glob(".*tmp"))  # atomic writes leave no temporary file


def test_resume_refuses_a_different_run(tmp_path):
    data = make_data("binary")
    train(data, _config(rounds=1), checkpoint_dir=tmp_path)
    with pytest.raises(ValueError, match="different run"):
        train(data, _config(rounds=2, sigma=2.0), checkpoint_dir=tmp_path, resume=True)
    with pytest.raises(ValueError, match="--checkpoint"):
        train(data, _config(rounds=2), resume=True)


def test_noise_is_fresh_unless_a_noise_seed_fixes_it():
    data = make_data("binary")
    fresh = [train(data, _config(rounds=1, noise_seed=None)) for _ in range(2)]
    assert fresh[0].history[0]["loss"] != fresh[1].history[0]["loss"]
    assert "OS entropy" in fresh[0].assumptions["randomness"]
    fixed = train(data, _config(rounds=1, noise_seed=7))
    assert "NOT private" in fixed.assumptions["randomness"]


def test_resume_keeps_the_fresh_entropy_and_refuses_fewer_rounds(tmp_path):
    data = make_data("binary")
    cfg = _config(rounds=2, noise_seed=None)

    def stop_after_one(row):
        if row["round"] == 1:
            raise Interrupted

    with pytest.raises(Interrupted):
        train(data, cfg, checkpoint_dir=tmp_path / "ck", on_round=stop_after_one)
    state = torch.load(tmp_path / "ck" / CHECKPOINT_NAME, weights_only=True)
    resumed = train(data, cfg, checkpoint_dir=tmp_path / "ck", resume=True)
    assert state["noise_entropy"].bit_length() > 64 and not state["noise_fixed"]
    again = train(data, _config(rounds=2, noise_seed=state["noise_entropy"]))
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in again.history]
    with pytest.raises(ValueError, match="fewer than"):
        train(data, _config(rounds=1, noise_seed=None), checkpoint_dir=tmp_path / "ck", resume=True)
