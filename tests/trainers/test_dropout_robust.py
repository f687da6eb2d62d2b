"""dp-fedavg-robust (Baek et al. 2021, Algorithm 2) in process: the noise each round releases, the
dropouts at both phases, the accounting from what happened, n_0, and resume."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from scipy import stats

from tests.trainers.synthetic import make_data
from uldp.accountants.dropout.rounds import DropoutRound
from uldp.accountants.dropout.run_spend import ObservedRound, run_epsilons
from uldp.errors import DataError, InvalidParameter
from uldp.trainers.algorithms import TrainConfig
from uldp.trainers.algorithms.dropout_robust import participant_weight
from uldp.trainers.per_user import flat_parameters
from uldp.trainers.runner import LocalSilos, build_silos, run, train

ALGO = "dp-fedavg-robust"
#: Each variance test may wrongly fail with probability 1e-6 (two-sided chi-square test).
FALSE_ALARM = 1e-6


def _config(**settings) -> TrainConfig:
    base = dict(algo=ALGO, rounds=1, sigma=1.5, clip=0.5, noise_seed=11, seed=2, user_q=1.0)
    base.update(settings)
    return TrainConfig(**base)


def _schedule(tmp_path, rows, name="drops.csv") -> str:
    path = tmp_path / name
    path.write_text("round,participant,at\n" + "".join(f"{t},{p},{at}\n" for t, p, at in rows))
    return str(path)


@pytest.fixture(scope="module")
def wide():
    """10 participants, a 7,850-parameter logistic model: one round's noise is a large sample."""
    return make_data("multiclass", n=400, users=40, silos=10, image=True, n_classes=10)


def _released_noise(data, cfg) -> np.ndarray:
    """theta_1 - theta_0 of a run whose participants do not move (lr 0): the released noise."""
    torch.manual_seed(cfg.seed)
    result = train(data, cfg, model_name="logistic")
    from uldp.trainers.models import build_model

    torch.manual_seed(cfg.seed)
    model = build_model(
        "logistic", task=data.task, feature_shape=data.feature_shape, n_classes=data.n_classes
    )
    start = flat_parameters({k: v.detach() for k, v in model.named_parameters()})
    return (flat_parameters(result.params) - start).double().numpy(), result


def _variance_is(sample: np.ndarray, variance: float) -> bool:
    """Two-sided chi-square test that `sample` (mean 0) has `variance`, at FALSE_ALARM."""
    statistic = float(np.sum(sample**2) / variance)
    low, high = stats.chi2.ppf([FALSE_ALARM / 2, 1 - FALSE_ALARM / 2], df=sample.size)
    return bool(low <= statistic <= high)


@pytest.mark.parametrize("calibration", [True, False])
def test_released_noise_after_dropouts_has_the_target_variance(wide, tmp_path, calibration):
    # 3 of 10 drop before upload, 1 more after it and before calibration.
    drops = _schedule(tmp_path, [(1, 2, "upload"), (1, 5, "upload"), (1, 7, "upload"), (1, 0, "calibration")])
    cfg = _config(lr=0.0, dropout_schedule=drops, calibration=calibration)
    noise, result = _released_noise(wide, cfg)
    row = result.history[0]
    # Without calibration (and in the clear) nothing is asked after the upload: nobody is lost there.
    lost_there = 1 if calibration else 0
    assert (row["participants"], row["dropped_upload"], row["dropped_calibration"]) == (10, 3, lost_there)
    n, alive, lost = 10.0, 7.0, 1.0 if calibration else 0.0
    assert (row["weight_sum"], row["alive_weight_sum"], row["calibration_dropped_weight"]) == (n, alive, lost)
    sensitivity = 2 * cfg.clip / alive
    if calibration:  # z sqrt(W_cal / n' + W_lost / n): 6 fresh shares for n' and one first share for n
        multiplier = cfg.sigma * np.sqrt(6 / alive + 1 / n)
    else:  # z sqrt(n' / n), §IV-B
        multiplier = cfg.sigma * np.sqrt(alive / n)
    assert row["model_multiplier"] == pytest.approx(multiplier)
    assert _variance_is(noise, (multiplier * sensitivity) ** 2)
    # The test has power: the variance the paper's target (multiplier z) would give is refused.
    if not calibration:
        assert not _variance_is(noise, (cfg.sigma * sensitivity) ** 2)


def test_calibration_restores_the_target_exactly_when_nobody_is_lost_before_it(wide, tmp_path):
    drops = _schedule(tmp_path, [(1, 1, "upload"), (1, 4, "upload"), (1, 8, "upload")])
    noise, result = _released_noise(wide, _config(lr=0.0, dropout_schedule=drops))
    sensitivity = 2 * 0.5 / 7
    assert result.history[0]["model_multiplier"] == pytest.approx(1.5)
    assert _variance_is(noise, (1.5 * sensitivity) ** 2)
    assert not _variance_is(noise, (1.5 * np.sqrt(0.7) * sensitivity) ** 2)  # the uncalibrated one


def test_each_round_is_accounted_from_what_happened(tmp_path):
    data = make_data("binary", n=200, users=10, silos=5)
    rows = [(1, 0, "upload"), (2, 1, "upload"), (2, 3, "calibration"), (3, 4, "upload"), (3, 2, "upload")]
    for calibration in (False, True):
        cfg = _config(rounds=4, dropout_schedule=_schedule(tmp_path, rows), calibration=calibration)
        result = train(data, cfg, model_name="logistic")
        expected = []
        for row, alive, lost in zip(result.history, (4, 4, 3, 5), (0, 1, 0, 0)):
            lost = lost if calibration else 0  # nothing is asked after the upload without calibration
            assert row["released"] and (row["alive_weight_sum"], row["dropped_calibration"]) == (alive, lost)
            expected.append(ObservedRound(DropoutRound(5, alive, 5, calibration_dropped=lost), calibration))
            model, server = run_epsilons(expected, cfg.sigma, 1.0, cfg.delta, secure=False)
            assert (row["epsilon"], row["server_epsilon"]) == (model, server)
        assert result.summary["released_rounds"] == 4
        if calibration:  # z, except round 2: one survivor kept its first share, drawn for n = 5
            multipliers = [1.5, 1.5 * np.sqrt(3 / 4 + 1 / 5), 1.5, 1.5]
        else:  # z sqrt(n' / n): only the round that lost nobody carries z
            multipliers = [1.5 * np.sqrt(a / 5) for a in (4, 4, 3, 5)]
        assert [r["model_multiplier"] for r in result.history] == pytest.approx(multipliers)


def test_a_round_below_n0_releases_nothing_and_spends_nothing():
    data = make_data("binary", n=200, users=10, silos=8)
    cfg = _config(rounds=6, user_q=0.5, min_weight_sum=3.5, noise_seed=4)
    result = train(data, cfg, model_name="logistic")
    skipped = [r for r in result.history if not r["released"]]
    released = [r for r in result.history if r["released"]]
    assert skipped and released, [r["participants"] for r in result.history]  # noise_seed 4 gives both
    for row in skipped:
        assert row["weight_sum"] < 3.5 and "below n_0 = 3.5" in row["note"]
    for row in released:
        assert row["reference"] == 3.5 and row["weight_sum"] >= 3.5
    # Epsilon grows only in released rounds.
    for before, after in zip(result.history, result.history[1:]):
        assert (after["epsilon"] > before["epsilon"]) == after["released"]


def test_n0_above_the_expected_sampled_weight_is_refused():
    data = make_data("binary", n=200, users=10, silos=8)
    with pytest.raises(
        InvalidParameter, match=r"--min-weight-sum n_0 = 5 is above the expected sampled weight"
    ):
        train(data, _config(user_q=0.5, min_weight_sum=5.0), model_name="logistic")


def test_threshold_above_the_participants_is_refused():
    data = make_data("binary", n=200, users=10, silos=4)
    cfg = dataclasses.replace(_config(), threshold=5)
    with pytest.raises(InvalidParameter, match=r"--threshold k = 5 is above the 4 participants"):
        train(data, cfg, model_name="logistic")  # checked with the weights, before round 1


def test_weights_follow_n_max(tmp_path):
    data = make_data("binary", n=200, users=10, silos=4)
    silos = build_silos(data)
    assert [participant_weight(s.size, 40) for s in silos] == [min(s.size / 40, 1.0) for s in silos]
    assert participant_weight(7, None) == 1.0
    result = train(data, _config(n_max=80), model_name="logistic")
    assert result.history[0]["weight_sum"] == pytest.approx(sum(min(s.size / 80, 1.0) for s in silos))
    assert result.history[0]["largest_weight"] == pytest.approx(max(min(s.size / 80, 1.0) for s in silos))


def test_the_local_update_stays_within_c_of_the_global_model():
    """Algorithm 1 line 11: after every step the model is put back within distance C."""
    data = make_data("multiclass", n=300, users=10, silos=3, n_classes=4)
    result = train(data, _config(lr=50.0, clip=0.05, rounds=1, sigma=1e-6), model_name="logistic")
    assert result.history[0]["released"]
    from uldp.trainers.models import build_model

    torch.manual_seed(2)
    model = build_model("logistic", task=data.task, feature_shape=data.feature_shape, n_classes=4)
    start = flat_parameters({k: v.detach() for k, v in model.named_parameters()})
    # The released step is the average of 3 deltas of norm <= C (the noise is negligible here).
    assert float(torch.linalg.vector_norm(flat_parameters(result.params) - start)) <= 0.05 * (1 + 1e-3)


def test_random_dropouts_follow_the_rate(tmp_path):
    data = make_data("binary", n=400, users=20, silos=20)
    cfg = _config(rounds=30, dropout=0.3, dropout_at="calibration", noise_seed=9)
    history = train(data, cfg, model_name="logistic").history
    lost = sum(r["dropped_calibration"] for r in history)
    assert sum(r["dropped_upload"] for r in history) == 0
    # 600 sampled participants, each lost with probability 0.3: a binomial test at 1e-6.
    assert stats.binomtest(lost, 600, 0.3).pvalue > FALSE_ALARM


def test_a_resumed_run_equals_the_uninterrupted_one(tmp_path):
    data = make_data("binary", n=200, users=10, silos=5)
    cfg = _config(rounds=4, dropout=0.3, calibration=False, noise_seed=21)
    whole = train(data, cfg, model_name="logistic")
    checkpoint = tmp_path / "ck"
    train(data, dataclasses.replace(cfg, rounds=2), model_name="logistic", checkpoint_dir=checkpoint)
    resumed = train(data, cfg, model_name="logistic", checkpoint_dir=checkpoint, resume=True)
    for a, b in zip(whole.history, resumed.history):
        assert {k: v for k, v in a.items() if k != "elapsed_s"} == {
            k: v for k, v in b.items() if k != "elapsed_s"
        }
    for key in whole.params:
        assert torch.equal(whole.params[key], resumed.params[key])


def test_a_bad_schedule_is_named(tmp_path):
    data = make_data("binary", n=200, users=10, silos=5)
    for rows, text in (
        ([(0, 1, "upload")], "line 2: round must be an integer >= 1"),
        ([(1, 5, "upload")], r"line 2: participant must be a silo number in \[0, 4\]"),
        ([(1, 1, "later")], "line 2: at must be upload or calibration"),
        ([(1, 1, "upload"), (1, 1, "calibration")], "line 3: participant 1 drops twice in round 1"),
    ):
        path = _schedule(tmp_path, rows)
        with pytest.raises(DataError, match=text):
            train(data, _config(dropout_schedule=path), model_name="logistic")
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("round,silo\n1,2\n")
    with pytest.raises(DataError, match="the header must be round,participant,at"):
        train(data, _config(dropout_schedule=str(wrong)), model_name="logistic")


class SpySilos(LocalSilos):
    """The in-process silos, remembering every phase reply the server received."""

    def __init__(self, silos, counts):
        super().__init__(silos, counts)
        self.seen: list[tuple[str, dict]] = []

    def phase(self, algorithm, round, name, payloads, ctx, cfg):
        replies = super().phase(algorithm, round, name, payloads, ctx, cfg)
        self.seen.append((name, replies))
        return replies


def test_secure_aggregation_releases_the_same_model_and_hides_each_message(tmp_path):
    data = make_data("multiclass", n=300, users=12, silos=6, n_classes=3)
    drops = _schedule(tmp_path, [(1, 2, "upload"), (2, 0, "calibration"), (2, 4, "upload")])
    cfg = _config(rounds=2, dropout_schedule=drops, lr=0.3)
    clear = train(data, cfg, model_name="logistic")
    spy = SpySilos(build_silos(data), data.user_silo_counts())
    secure = run(data, spy, dataclasses.replace(cfg, secure=True), model_name="logistic")
    for key in clear.params:  # fixed point at 2^-24 per coordinate and participant
        assert torch.allclose(clear.params[key], secure.params[key], rtol=0, atol=1e-5)
    for a, b in zip(clear.history, secure.history):
        assert a["epsilon"] == b["epsilon"]  # the released model: the same mechanism
        assert b["server_epsilon"] < a["server_epsilon"]  # the server reads the sum, not each message
    uploads = [replies for name, replies in spy.seen if name == "upload"]
    assert uploads and all(set(reply) == {"masked"} for replies in uploads for reply in replies.values())
    names = [name for name, _ in spy.seen]
    assert names == ["weight", *["keys", "shares", "upload", "calibrate"] * 2]


def test_fewer_survivors_than_k_release_nothing(tmp_path):
    data = make_data("binary", n=200, users=10, silos=5)
    drops = _schedule(tmp_path, [(2, 0, "upload"), (2, 1, "upload"), (2, 3, "upload")])
    cfg = _config(rounds=3, dropout_schedule=drops, secure=True, threshold=3)
    history = train(data, cfg, model_name="logistic").history
    refused = history[1]
    assert not refused["released"] and refused["dropped_upload"] == 3
    assert "below the threshold k = 3" in refused["note"] and "nothing is revealed" in refused["note"]
    assert refused["epsilon"] == history[0]["epsilon"] and refused["loss"] == history[0]["loss"]
    assert history[2]["released"] and history[2]["epsilon"] > history[0]["epsilon"]
