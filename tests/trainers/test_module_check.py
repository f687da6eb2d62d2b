"""trainers/module_check.py: layers that break per-user independence are refused before
training, in one line naming the layer, its type and the fix; what is per record passes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from uldp.errors import InvalidParameter
from uldp.trainers.module_check import check_independence, check_layers, check_module

from .own_models import batchnorm_cnn, counting_linear, mlp, residual_cnn, sequence_gru


def test_batchnorm_is_refused_with_the_layers_name_and_the_fix():
    with pytest.raises(InvalidParameter, match=r"layer '1' \(BatchNorm2d\).*nn.GroupNorm or nn.LayerNorm"):
        check_layers(batchnorm_cnn((1, 8, 8), 3))


def test_a_nested_batchnorm_is_named_by_its_qualified_name():
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.BatchNorm1d(4)))
    with pytest.raises(InvalidParameter, match=r"^--model: layer '1.1' \(BatchNorm1d\)"):
        check_layers(model)


def test_batchnorm_in_eval_mode_has_fixed_statistics_and_passes():
    model = batchnorm_cnn((1, 8, 8), 3).eval()
    check_module(model, torch.randn(2, 1, 8, 8))


def test_instancenorm_with_running_statistics_is_refused():
    with pytest.raises(InvalidParameter, match=r"InstanceNorm2d.*track_running_stats=False"):
        check_layers(nn.Sequential(nn.InstanceNorm2d(3, track_running_stats=True)))
    check_layers(nn.Sequential(nn.InstanceNorm2d(3)))  # per record, no state: fine


def test_a_frozen_parameter_is_refused_with_register_buffer_as_the_fix():
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    model[0].weight.requires_grad_(False)
    with pytest.raises(InvalidParameter, match=r"'0.weight' has requires_grad=False.*register_buffer"):
        check_layers(model)


def test_a_forward_pass_that_changes_a_buffer_is_refused():
    with pytest.raises(InvalidParameter, match=r"changes buffer 'calls' \(of CountingLinear\)"):
        check_independence(counting_linear((5,), 2), torch.randn(2, 5))


class _CentredOverBatch(nn.Module):
    """Subtracts the batch mean: no buffer, no BatchNorm, yet it mixes the records of a batch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - x.mean(dim=0)


def test_an_output_that_depends_on_other_records_is_refused():
    with pytest.raises(InvalidParameter, match="depends on the other records of its batch"):
        check_independence(nn.Sequential(nn.Linear(3, 2), _CentredOverBatch()), torch.randn(2, 3))


def test_an_output_without_one_row_per_record_is_refused():
    class Summed(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.sum()

    with pytest.raises(InvalidParameter, match=r"returned \(\); it must return one tensor with one row"):
        check_independence(Summed(), torch.randn(2, 3))


def test_constant_buffers_and_dropout_pass_and_leave_the_random_stream_alone():
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    model.register_buffer("scale", torch.full((2,), 3.0))
    x = torch.randn(2, 4)
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check_module(model, x)
    assert torch.equal(torch.rand(3), expected)
    assert model[1].training  # dropout back in training mode


@pytest.mark.parametrize(
    "factory,shape",
    [(residual_cnn, (1, 8, 8)), (sequence_gru, (5, 3)), (mlp, (6,))],
)
def test_the_own_models_of_the_tests_pass(factory, shape):
    check_module(factory(shape, 3), torch.randn(2, *shape))


def test_a_lazy_layer_is_refused_until_it_has_its_input_size():
    with pytest.raises(InvalidParameter, match=r"^--model: layer '0' \(LazyLinear\) is lazy.*nn.Linear"):
        check_layers(nn.Sequential(nn.LazyLinear(2)))


def test_a_frozen_parameter_is_refused_because_torch_func_would_train_it():
    model = nn.Linear(3, 1)
    model.bias.requires_grad_(False)
    with pytest.raises(InvalidParameter, match=r"differentiate every parameter \(torch.func.grad\)"):
        check_layers(model)


class _MixesInBatchesOf(nn.Module):
    """Mixes the records of a batch only when it holds one of `sizes` records."""

    def __init__(self, *sizes: int) -> None:
        super().__init__()
        self.sizes = sizes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - x.mean(dim=0) if len(x) in self.sizes else x


def test_mixing_in_larger_batches_and_behind_equal_records_is_found():
    with pytest.raises(InvalidParameter, match=r"\(6 records together"):
        check_independence(_MixesInBatchesOf(6), torch.randn(6, 3))
    with pytest.raises(InvalidParameter, match=r"\(2 records together"):
        check_independence(_MixesInBatchesOf(2), torch.zeros(6, 3))  # equal records: perturbed
    check_independence(_MixesInBatchesOf(12), torch.randn(12, 3))  # beyond the 8 records checked
