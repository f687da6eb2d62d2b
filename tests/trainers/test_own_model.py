"""A user's own model, loss and metric (issue 35): resolved into a ModelSpec, checked before
training, trained per user by the batched path or the loop with the same clipped deltas, and run
by `runner.train` with the built-in path's accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from uldp.errors import InvalidParameter
from uldp.trainers.algorithms import TrainConfig
from uldp.trainers.models import MLP, cross_entropy_loss
from uldp.trainers.own_model import build_checked, masked_loss, resolve_model
from uldp.trainers.per_user import (
    LocalTraining,
    batched_user_deltas,
    chosen_path,
    clip_rows,
    loop_user_deltas,
    user_deltas,
    vmap_runs,
)
from uldp.trainers.runner import train

from .own_models import mlp, residual_cnn, sequence_gru
from .synthetic import make_data

OWN_MODELS = __file__.replace("test_own_model.py", "own_models.py")


def _users(factory, shape, n=24, users=4, seed=0):
    """A float64 model of `factory` and `n` records of `shape` spread unevenly over `users`."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = factory(shape, 3).to(torch.float64)
    x = torch.randn(n, *shape, dtype=torch.float64)
    y = torch.randint(0, 3, (n,))
    owners = np.minimum(rng.zipf(1.5, size=n), users) - 1  # uneven counts: padding is exercised
    params = {k: v.detach() for k, v in model.named_parameters()}
    return model, params, x, y, owners, np.arange(users)


def _assert_same_clipped(batched: torch.Tensor, loop: torch.Tensor) -> None:
    assert loop.abs().max() > 1e-3  # the users did train
    clip = float(loop.norm(dim=1).median())  # some rows clipped, some not
    torch.testing.assert_close(clip_rows(batched, clip)[0], clip_rows(loop, clip)[0], atol=1e-6, rtol=0)


TRAINING = LocalTraining(2, 0.1, batch_size=3)


def test_residual_groupnorm_cnn_vmap_equals_the_loop():
    model, params, x, y, owners, users = _users(residual_cnn, (1, 8, 8))
    keys = np.random.default_rng(1).random((TRAINING.epochs, len(x)))
    loop = loop_user_deltas(model, params, x, y, owners, users, keys, cross_entropy_loss, TRAINING)
    vmapped = batched_user_deltas(model, params, x, y, owners, users, keys, cross_entropy_loss, TRAINING)
    _assert_same_clipped(vmapped, loop)
    # On CPU a convolution without a stacked version (GroupNorm) takes vmap (per_user.py).
    assert chosen_path(model, cross_entropy_loss, x, y) == "vmap"


def test_gru_cannot_run_under_vmap_and_takes_the_loop():
    """torch 2.13's nn.GRU has no batching rule for per-user weights: the batched request tries
    vmap once, finds it fails, and trains the GRU in the loop (same rows as the loop)."""
    model, params, x, y, owners, users = _users(sequence_gru, (5, 3))
    keys = np.random.default_rng(1).random((TRAINING.epochs, len(x)))
    assert not vmap_runs(model, cross_entropy_loss, x, y)
    assert chosen_path(model, cross_entropy_loss, x, y) == "loop"
    rows_users, rows = user_deltas(
        model, params, x, y, owners, users, keys, cross_entropy_loss, TRAINING, batched=True
    )
    loop = loop_user_deltas(model, params, x, y, owners, users, keys, cross_entropy_loss, TRAINING)
    assert list(rows_users) == list(users)
    _assert_same_clipped(rows, loop)


def test_mlp_takes_vmap_and_equals_the_loop():
    model, params, x, y, owners, users = _users(mlp, (6,))
    keys = np.random.default_rng(1).random((TRAINING.epochs, len(x)))
    assert chosen_path(model, cross_entropy_loss, x, y) == "vmap"
    rows_users, rows = user_deltas(
        model, params, x, y, owners, users, keys, cross_entropy_loss, TRAINING, batched=True
    )
    loop = loop_user_deltas(model, params, x, y, owners, users, keys, cross_entropy_loss, TRAINING)
    _assert_same_clipped(rows[np.argsort(rows_users)], loop)


def test_a_two_argument_loss_trains_as_the_built_in_masked_loss():
    """nn.CrossEntropyLoss() made masked per record: the same deltas as the built-in cross
    entropy, with padded mini-batches in the batched path."""
    model, params, x, y, owners, users = _users(mlp, (6,))
    keys = np.random.default_rng(1).random((TRAINING.epochs, len(x)))
    own = masked_loss(nn.CrossEntropyLoss())
    built_in = batched_user_deltas(model, params, x, y, owners, users, keys, cross_entropy_loss, TRAINING)
    adapted = batched_user_deltas(model, params, x, y, owners, users, keys, own, TRAINING)
    torch.testing.assert_close(adapted, built_in, atol=1e-12, rtol=0)
    looped = loop_user_deltas(model, params, x, y, owners, users, keys, own, TRAINING)
    torch.testing.assert_close(looped, built_in, atol=1e-10, rtol=0)


def test_batchnorm_and_a_mutating_buffer_are_refused_by_build_checked():
    data = make_data("multiclass", n=40, image=True)
    spec = resolve_model(f"{OWN_MODELS}:batchnorm_cnn", data=data)
    with pytest.raises(InvalidParameter, match=r"^--model: layer '1' \(BatchNorm2d\)") as error:
        build_checked(spec, data)
    assert "\n" not in str(error.value)
    flat = make_data("multiclass", n=40)
    spec = resolve_model(f"{OWN_MODELS}:counting_linear", data=flat)
    with pytest.raises(InvalidParameter, match="changes buffer 'calls'"):
        build_checked(spec, flat)


def test_an_output_that_does_not_fit_the_loss_is_refused_in_one_line():
    data = make_data("binary", n=40)
    three_outputs = resolve_model(lambda feature_shape: mlp(feature_shape, 3), data=data)
    with pytest.raises(
        InvalidParameter, match=r"^--model: .*does not fit the loss binary_cross_entropy"
    ) as error:
        build_checked(three_outputs, data)
    assert "\n" not in str(error.value)


def test_a_file_reference_resolves_to_a_factory_called_with_what_it_names(tmp_path):
    (tmp_path / "my_models.py").write_text(
        "from torch import nn\n"
        "def tiny(feature_shape, n_outputs, task):\n"
        "    assert task == 'multiclass'\n"
        "    return nn.Linear(feature_shape[0], n_outputs)\n"
    )
    data = make_data("multiclass", n=40, n_classes=4)
    spec = resolve_model(str(tmp_path / "my_models.py") + ":tiny", data=data, loss="cross_entropy")
    assert spec.reference == f"{(tmp_path / 'my_models.py').resolve()}:tiny"
    assert (spec.loss_reference, spec.metric, spec.metric_reference) == (
        "cross_entropy",
        "accuracy",
        "accuracy",
    )
    model = build_checked(spec, data)
    assert isinstance(model, nn.Linear) and model.out_features == 4
    with pytest.raises(InvalidParameter, match="has no attribute 'missing'"):
        resolve_model(str(tmp_path / "my_models.py") + ":missing", data=data)


def test_names_instances_and_bad_values():
    data = make_data("binary", n=40)
    assert resolve_model(None, data=data).name == "mlp"
    assert resolve_model("logistic", data=data).reference == "logistic"
    instance = resolve_model(nn.Linear(6, 1), data=data)
    assert instance.reference is None and instance.factory() is not instance.factory()
    with pytest.raises(InvalidParameter, match="--model must be auto, one of"):
        resolve_model("resnet", data=data)
    with pytest.raises(InvalidParameter, match="--loss must be one of"):
        resolve_model(None, data=data, loss="hinge")
    with pytest.raises(InvalidParameter, match="--metric: its name 'loss'"):

        def loss(outputs, y):
            return 0.0

        resolve_model(None, data=data, metric=loss)


def _config(**changes):
    base = dict(algo="uldp-avg", rounds=2, sigma=1.0, clip=0.5, lr=0.5, global_lr=5.0, noise_seed=0)
    return TrainConfig(**{**base, **changes})


def test_train_with_a_users_factory_returns_its_model_and_the_built_in_accounting():
    data = make_data("multiclass", n=60, users=6, n_classes=3)
    cfg = _config()

    def share_right(outputs: np.ndarray, y: np.ndarray) -> float:
        return float((outputs.argmax(axis=1) == y).mean())

    def built_in_mlp(feature_shape, n_outputs):  # the built-in MLP, written as a user's factory
        return MLP(feature_shape[0], n_outputs)

    own = train(data, cfg, model=built_in_mlp, loss=nn.CrossEntropyLoss(), metric=share_right)
    built_in = train(data, cfg, model_name="mlp")
    assert [r["epsilon"] for r in own.history] == [r["epsilon"] for r in built_in.history]
    # Same initial model (same seed), same loss per record, same noise: the same training.
    assert [r["loss"] for r in own.history] == pytest.approx([r["loss"] for r in built_in.history], rel=1e-5)
    assert [r["share_right"] for r in own.history] == [r["accuracy"] for r in built_in.history]
    assert "accuracy" not in own.history[0]
    assert own.summary["model"] == "built_in_mlp" and own.summary["metric"] == "share_right"
    assert own.summary["parameters"] == built_in.summary["parameters"]
    assert isinstance(own.model, MLP)
    for name, value in own.model.named_parameters():
        assert torch.equal(value.detach(), own.params[name])
    assert math.isfinite(own.history[-1]["loss"])


def test_flower_refuses_a_model_only_this_process_has_before_starting():
    data = make_data("binary", n=40)
    with pytest.raises(
        InvalidParameter, match=r"^--model: --engine flower runs the silos in other processes"
    ):
        train(data, _config(rounds=1), model=nn.Linear(6, 1), engine="flower")
    with pytest.raises(InvalidParameter, match=r"^--loss: --engine flower"):
        train(data, _config(rounds=1), model="logistic", loss=nn.BCEWithLogitsLoss(), engine="flower")


class _Branching(nn.Module):
    """Control flow on each record's own data (per record, so it mixes nothing): vmap cannot run
    it (a batched tensor has no single truth value)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = [row if bool(row[0] > 0) else -row for row in self.linear(x)]
        return torch.stack(rows)


def test_control_flow_on_the_data_takes_the_loop_and_dropout_takes_vmap():
    model, params, x, y, owners, users = _users(lambda shape, n: _Branching(), (6,))
    assert chosen_path(model.double(), cross_entropy_loss, x, y) == "loop"
    dropout = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.5), nn.Linear(8, 3)).double()
    assert chosen_path(dropout, cross_entropy_loss, x, y) == "vmap"
    params = {k: v.detach() for k, v in dropout.named_parameters()}
    keys = np.random.default_rng(1).random((TRAINING.epochs, len(x)))
    _, rows = user_deltas(dropout, params, x, y, owners, users, keys, cross_entropy_loss, TRAINING)
    assert bool(torch.isfinite(rows).all()) and rows.abs().max() > 0


# Review of issue 35: privacy and robustness of the own-model path (/tmp/review35_model).


def _flat_data(n=10, seed=0, x=None):
    from types import SimpleNamespace

    rng = np.random.default_rng(seed)
    return SimpleNamespace(
        name="",
        task="multiclass",
        feature_shape=(4,),
        n_classes=3,
        metric="accuracy",
        x_train=rng.normal(size=(n, 4)).astype("f4") if x is None else x,
        y_train=np.arange(n) % 3,
    )


def _ignores_mask(output, y, mask):  # a 3-argument "masked" loss that ignores its mask
    return nn.functional.cross_entropy(output, y)


def test_padding_repeats_the_users_own_records_never_another_users():
    """Users of 3 and 4 records train in one group: the shorter is padded. Even with a loss that
    lets padding through (refused by build_checked, used here directly), a user's delta moves
    only with its own records."""
    torch.manual_seed(0)
    model = nn.Linear(4, 3).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.as_tensor(_flat_data().x_train, dtype=torch.float64)
    y = torch.as_tensor(_flat_data().y_train)
    owners = np.array([1, 0, 0, 0, 2, 2, 2, 2, 1, 1])  # record 0 is user 1's
    users = np.arange(3)
    keys = np.random.default_rng(1).random((1, len(x)))
    training = LocalTraining(1, 0.1)
    before = batched_user_deltas(model, params, x, y, owners, users, keys, _ignores_mask, training)
    moved = x.clone()
    moved[0] += 100.0  # only user 1's record
    after = batched_user_deltas(model, params, moved, y, owners, users, keys, _ignores_mask, training)
    assert float((before[1] - after[1]).abs().max()) > 1e-3  # user 1's own delta moves
    torch.testing.assert_close(after[[0, 2]], before[[0, 2]], atol=0, rtol=0)


def test_a_loss_that_counts_masked_records_is_refused():
    data = _flat_data()
    spec = resolve_model(lambda: nn.Linear(4, 3), data=data, loss=_ignores_mask)
    with pytest.raises(InvalidParameter, match=r"^--loss: the loss counts records whose mask is 0"):
        build_checked(spec, data)
    build_checked(resolve_model(lambda: nn.Linear(4, 3), data=data), data)  # the built-in: fine


class _SequenceFirst(nn.Module):
    """Stackable layers (Conv2d, Linear) behind a forward that puts positions first."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).flatten(2).permute(2, 0, 1)).mean(0)


def test_only_built_in_models_take_the_stacked_path():
    from uldp.trainers.models import build_model
    from uldp.trainers.per_user import batched_path, set_path

    own = _SequenceFirst()
    assert batched_path(own, "cpu") == "vmap"
    with pytest.raises(InvalidParameter, match="^path stacked is for the built-in models"):
        set_path(own, cross_entropy_loss, "stacked")
    cnn = build_model("cnn", task="multiclass", feature_shape=(1, 28, 28), n_classes=10)
    assert batched_path(cnn, "cpu") == "stacked"


class _RunningCentre(nn.Module):
    """Writes a buffer only when gradients are on: the no-grad check alone would not see it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.register_buffer("centre", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled():
            with torch.no_grad():
                self.centre.mul_(0.5).add_(0.5 * x.detach().mean(0))
        return self.lin(x - self.centre)


def test_a_buffer_written_while_training_is_refused_at_build_and_in_training():
    data = _flat_data(8)
    with pytest.raises(InvalidParameter, match=r"a training step \(gradients on\) changes buffer 'centre'"):
        build_checked(resolve_model(_RunningCentre, data=data), data)
    model = _RunningCentre()  # past build_checked: user_deltas refuses it on every path
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.as_tensor(data.x_train), torch.as_tensor(data.y_train)
    owners, keys = np.array([0] * 4 + [1] * 4), np.random.default_rng(1).random((1, 8))
    for batched in (True, False):
        model.centre.zero_()
        with pytest.raises(InvalidParameter, match=r"^--model: local training changes buffer 'centre'"):
            user_deltas(
                model,
                params,
                x,
                y,
                owners,
                np.arange(2),
                keys,
                cross_entropy_loss,
                LocalTraining(1, 0.1),
                batched=batched,
            )


def test_the_released_model_carries_the_buffers_it_was_built_with():
    from uldp.trainers.runner import _trained

    net = _RunningCentre()
    built = {k: v.clone() for k, v in net.named_buffers()}
    net.centre.fill_(7.0)  # written after the build
    params = {k: v.detach() + 1.0 for k, v in net.named_parameters()}
    trained = _trained(net, params, built)
    assert torch.equal(trained.centre, torch.zeros(4)) and torch.equal(trained.lin.bias, params["lin.bias"])
    assert float(net.centre[0]) == 7.0  # the run's own model untouched


class _CentreOverBatch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x - x.mean(0, keepdim=True))


class _MixesAboveTwo(_CentreOverBatch):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x - x.mean(0, keepdim=True) if x.shape[0] > 2 else x)


@pytest.mark.parametrize("first_two", ["equal", "zeros"])
def test_mixing_is_found_when_the_first_records_are_equal(first_two):
    x = _flat_data(8).x_train.copy()
    x[1] = x[0] if first_two == "equal" else 0.0
    if first_two == "zeros":
        x[0] = 0.0
    data = _flat_data(8, x=x)
    torch.manual_seed(0)
    _CentreOverBatch()
    after_init = torch.get_rng_state()
    torch.manual_seed(0)
    with pytest.raises(InvalidParameter, match="depends on the other records of its batch"):
        build_checked(resolve_model(_CentreOverBatch, data=data), data)
    assert torch.equal(torch.get_rng_state(), after_init)  # the perturbation left the run's stream alone


def test_mixing_only_in_batches_above_two_is_found():
    data = _flat_data(8)
    with pytest.raises(InvalidParameter, match=r"\(8 records together and one by one differ\)"):
        build_checked(resolve_model(_MixesAboveTwo, data=data), data)


@pytest.mark.parametrize(
    "loss, why",
    [
        (nn.CrossEntropyLoss(weight=torch.tensor([1.0, 1.0, 10.0])), "has class weights"),
        (nn.CrossEntropyLoss(reduction="sum"), "has reduction='sum'"),
        (nn.CrossEntropyLoss(ignore_index=2), "ignores label 2"),
    ],
)
def test_a_two_argument_loss_a_per_record_mean_cannot_reproduce_is_refused(loss, why):
    data = _flat_data()
    with pytest.raises(
        InvalidParameter, match=rf"^--loss: CrossEntropyLoss {why}.*masked loss \(output, y, mask\)"
    ):
        resolve_model("mlp", data=data, loss=loss)
    # The default ignore_index (-100) is no label: per record, the same mean.
    resolve_model("mlp", data=data, loss=nn.CrossEntropyLoss(label_smoothing=0.1))


def test_a_metric_that_returns_no_number_or_fails_is_refused_in_one_line():
    data = _flat_data()

    def verdict(outputs, y):
        return "good"

    def broken(outputs, y):
        raise KeyError("column")

    with pytest.raises(
        InvalidParameter, match=r"^--metric: verdict returned a str; a metric returns a number"
    ):
        build_checked(resolve_model("mlp", data=data, metric=verdict), data)
    with pytest.raises(
        InvalidParameter, match=r"^--metric: broken failed on outputs of shape \(2, 3\): KeyError"
    ):
        build_checked(resolve_model("mlp", data=data, metric=broken), data)

    def sampled_users(outputs, y):
        return 0.5

    with pytest.raises(InvalidParameter, match="its name 'sampled_users'"):
        resolve_model("mlp", data=data, metric=sampled_users)


def test_resume_with_another_model_loss_or_metric_is_refused(tmp_path):
    data = make_data("multiclass", n=40, users=4)

    def tanh_mlp(feature_shape, n_outputs):
        return nn.Sequential(nn.Linear(feature_shape[0], 8), nn.Tanh(), nn.Linear(8, n_outputs))

    def share_right(outputs, y):
        return float((outputs.argmax(1) == y).mean())

    train(data, _config(rounds=1), model=tanh_mlp, checkpoint_dir=tmp_path)
    with pytest.raises(
        InvalidParameter, match=r"^--loss: .* was trained with loss cross_entropy, not masked_"
    ):
        train(
            data,
            _config(rounds=2),
            model=tanh_mlp,
            loss=nn.CrossEntropyLoss(),
            checkpoint_dir=tmp_path,
            resume=True,
        )
    with pytest.raises(InvalidParameter, match=r"^--metric: .* with metric accuracy, not share_right"):
        train(
            data, _config(rounds=2), model=tanh_mlp, metric=share_right, checkpoint_dir=tmp_path, resume=True
        )
    resumed = train(data, _config(rounds=2), model=tanh_mlp, checkpoint_dir=tmp_path, resume=True)
    assert [r["round"] for r in resumed.history] == [1, 2]


def test_a_checkpoint_without_its_model_is_read_as_a_built_in_models(tmp_path):
    from uldp.trainers.runner import _refuse_other_model

    older = {"run": {"format": "uldp-run"}}
    _refuse_other_model(
        tmp_path, older, {"model": "mlp", "loss": "cross_entropy", "metric": "accuracy"}, "multiclass"
    )
    with pytest.raises(
        InvalidParameter, match=r"^--model: .* trained with model a built-in model, not x.py:f"
    ):
        _refuse_other_model(
            tmp_path, older, {"model": "x.py:f", "loss": "cross_entropy", "metric": "accuracy"}, "multiclass"
        )


def test_a_lazy_model_is_refused_before_describe_counts_its_parameters():
    from uldp.trainers.flower.simulation import describe

    data = make_data("multiclass", n=40, users=4)
    with pytest.raises(InvalidParameter, match=r"^--model: layer '0' \(LazyLinear\) is lazy"):
        describe(data, f"{OWN_MODELS}:lazy_mlp")
