"""Per-record gradients for the record-level steps (trainers/per_record.py): vmap where it runs,
one record at a time where it cannot (a GRU), the same gradients either way."""

from __future__ import annotations

import torch

from uldp.trainers.models import cross_entropy_loss
from uldp.trainers.per_record import _VMAP_RUNS, per_record_gradients

from .own_models import mlp, sequence_gru


def _by_hand(model, params, x, y):
    """Each record's gradient by plain autograd, one record as a batch of one."""
    rows = []
    for i in range(len(x)):
        leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
        out = torch.func.functional_call(model, leaves, (x[i : i + 1],))
        loss = cross_entropy_loss(out, y[i : i + 1], torch.ones(1, dtype=x.dtype))
        rows.append(dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values())))))
    return {k: torch.stack([r[k] for r in rows]) for k in params}


def _check(factory, shape):
    torch.manual_seed(0)
    model = factory(shape, 3).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(5, *shape, dtype=torch.float64), torch.randint(0, 3, (5,))
    got = per_record_gradients(model, cross_entropy_loss)(params, x, y)
    expected = _by_hand(model, params, x, y)
    assert list(got) == list(params)
    for k in params:
        torch.testing.assert_close(got[k], expected[k], atol=1e-10, rtol=0)
    assert max(float(v.abs().max()) for v in got.values()) > 0
    return model


def test_an_mlp_takes_vmap_with_each_records_gradient():
    assert _VMAP_RUNS[_check(mlp, (6,))] is True


def test_a_gru_vmap_cannot_run_takes_one_record_at_a_time_with_the_same_gradients():
    assert _VMAP_RUNS[_check(sequence_gru, (4, 3))] is False
