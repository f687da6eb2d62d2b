"""Per-record gradients for the record-level steps (DP-SGD's clipping in uldp-group, rpdp and
unidp; the subject-level algorithms' per-item clipping), for any model.

`torch.func.vmap` over records is the fast way (Opacus' functorch path does the same), but not
every module runs under it: torch 2.13's `nn.GRU` has no batching rule, and control flow on the
data cannot be traced per record. Such a model gets its records' gradients one by one instead,
the same values (tests/trainers/test_per_record.py). Which way a model takes is found on its
first batch and remembered for the model.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from .models import LossFn

Params = dict[str, torch.Tensor]
PerRecord = Callable[[Params, torch.Tensor, torch.Tensor], Params]

# model -> whether vmap ran its per-record gradients (per model: its layers decide).
_VMAP_RUNS: weakref.WeakKeyDictionary[nn.Module, bool] = weakref.WeakKeyDictionary()


def per_record_gradients(model: nn.Module, loss_fn: LossFn) -> PerRecord:
    """`(params, x, y) -> {name: (records, *shape)}`: each record's gradient of `loss_fn` on
    `model` at `params`, as if the record were a batch of one."""

    def record_loss(p: Params, xr: torch.Tensor, yr: torch.Tensor) -> torch.Tensor:
        return loss_fn(
            functional_call(model, p, (xr.unsqueeze(0),)),
            yr.unsqueeze(0),
            torch.ones(1, dtype=xr.dtype, device=xr.device),
        )

    # Dropout draws each record's mask apart, as it would in a batch.
    vmapped = vmap(grad(record_loss), in_dims=(None, 0, 0), randomness="different")
    one = grad(record_loss)

    def looped(params: Params, x: torch.Tensor, y: torch.Tensor) -> Params:
        rows = [one(params, x[i], y[i]) for i in range(len(x))]
        return {k: torch.stack([r[k] for r in rows]) for k in params}

    def gradients(params: Params, x: torch.Tensor, y: torch.Tensor) -> Params:
        runs = _VMAP_RUNS.get(model)
        if runs is None:
            try:
                out = vmapped(params, x, y)
            except Exception:  # noqa: BLE001 - any failure under vmap means: one record at a time
                _VMAP_RUNS[model] = False
                return looped(params, x, y)
            _VMAP_RUNS[model] = True
            return out
        return vmapped(params, x, y) if runs else looped(params, x, y)

    return gradients


def path_taken(model: nn.Module) -> str | None:
    """ "vmap" or "loop": how this process computed `model`'s per-record gradients, None before
    any (a run's summary says it: a loop is far slower, and the user may want to know why)."""
    runs = _VMAP_RUNS.get(model)
    return None if runs is None else "vmap" if runs else "loop"
