"""A model run with one copy of its weights per user, every user's records in one call.

ULDP-AVG / ULDP-SGD train every user of a silo from the global model on its own records
(ULDP-FL Algorithm 3, lines 9-15). `torch.func.vmap` over per-user weights turns a convolution
into one grouped convolution whose weight gradient, on CPU, is several times slower than the
users' convolutions one by one (docs/performance.md). Here each product a training step needs
is written as an ordinary or grouped *forward* convolution, or an ordinary backward pass, which
oneDNN runs fast (`_StackedConv`); linear layers are batched matrix products over users.

Layout: a group of G users with r record slots each enters as one batch of G*r records, user g's
records at rows g*r .. g*r+r-1. Every parameter carries a leading user axis (G, *shape). Layers
without parameters (ReLU, pooling, flatten) act per record and need no change; the layers with
parameters are replaced, in a copy of the model (`stacked_copy`), by versions that read the user
axis. The gradient of the sum of the users' losses with respect to the stacked parameters is each
user's own gradient, since user g's loss depends on its slice of the weights only.

The first local step starts every user at x_t: its parameters are expanded views (stride 0 on the
user axis), which the convolution sees, so its forward pass and input gradient are those of one
ordinary convolution of the whole batch, and only the weight gradient is computed per user.
"""

from __future__ import annotations

import copy
import functools
import math
import weakref
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.grad import conv2d_input

from .models import Dense


def stackable(model: nn.Module) -> bool:
    """Whether every layer with parameters or buffers has a stacked version here."""
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            if module.groups != 1 or module.padding_mode != "zeros" or isinstance(module.padding, str):
                return False
        elif not isinstance(module, (nn.Linear, Dense)) and (
            next(module.parameters(recurse=False), None) is not None
            or next(module.buffers(recurse=False), None) is not None
        ):
            return False
    return True


def stacked_copy(model: nn.Module) -> nn.Module:
    """A copy of `model` whose Conv2d, Linear and Dense layers take per-user parameters.

    Parameter names are unchanged, so `functional_call(copy, stacked_params, (x,))` runs it with
    parameters of shape (G, *shape) on a batch of G*r records.
    """
    if not stackable(model):
        raise ValueError(f"{type(model).__name__} has layers without a stacked version")
    clone = copy.deepcopy(model)
    for name, module in list(clone.named_modules()):
        if isinstance(module, nn.Conv2d):
            replacement: nn.Module = StackedConv2d(module)
        elif isinstance(module, nn.Linear):
            replacement = StackedLinear(module, transposed=False)
        elif isinstance(module, Dense):
            replacement = StackedLinear(module, transposed=True)
        else:
            continue
        clone.set_submodule(name, replacement)
    return clone


_COPIES: weakref.WeakKeyDictionary[nn.Module, nn.Module] = weakref.WeakKeyDictionary()


def stacked_model(model: nn.Module) -> nn.Module:
    """`stacked_copy(model)`, made once per model: only its layout is used, never its weights."""
    if model not in _COPIES:
        _COPIES[model] = stacked_copy(model)
    return _COPIES[model]


class StackedLinear(nn.Module):
    """y = x W_g^T + b_g for the records of user g (nn.Linear's layout, or Dense's W_g)."""

    def __init__(self, layer: nn.Module, *, transposed: bool) -> None:
        super().__init__()
        # The template's parameters keep the names functional_call replaces.
        weight: torch.Tensor = layer.weight  # type: ignore[assignment]
        bias: torch.Tensor | None = layer.bias  # type: ignore[assignment]
        self.weight = nn.Parameter(weight.detach().clone())
        self.bias = nn.Parameter(bias.detach().clone()) if bias is not None else None
        self.transposed = transposed  # Dense stores (in, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        users = self.weight.shape[0]
        rows = x.reshape(users, -1, x.shape[-1])
        weight = self.weight if self.transposed else self.weight.transpose(1, 2)
        if self.bias is None:
            out = torch.bmm(rows, weight)
        else:
            out = torch.baddbmm(self.bias.unsqueeze(1), rows, weight)
        return out.reshape(*x.shape[:-1], out.shape[-1])


class StackedConv2d(nn.Module):
    """A 2-d convolution (groups 1, zero padding) with user g's kernel on user g's records."""

    def __init__(self, layer: nn.Conv2d) -> None:
        super().__init__()
        self.weight = nn.Parameter(layer.weight.detach().clone())
        self.bias = nn.Parameter(layer.bias.detach().clone()) if layer.bias is not None else None
        self.geometry = Geometry(
            tuple(layer.stride),  # type: ignore[arg-type]
            tuple(layer.padding),  # type: ignore[arg-type]
            tuple(layer.dilation),  # type: ignore[arg-type]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _StackedConv.apply(x, self.weight, self.bias, self.geometry)


@dataclass(frozen=True)
class Geometry:
    """A convolution's stride, padding and dilation."""

    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]


def _shared(weight: torch.Tensor) -> bool:
    """Whether every user has the same weights: an expanded view (the first local step)."""
    return weight.shape[0] == 1 or weight.stride(0) == 0


def _users_as_channels(t: torch.Tensor, users: int) -> torch.Tensor:
    """(G*r, C, H, W), user g's records at rows g*r.., -> (r, G*C, H, W): one grouped convolution
    with G groups then applies user g's kernel to user g's records."""
    records = t.shape[0] // users
    return t.reshape(users, records, *t.shape[1:]).transpose(0, 1).reshape(records, -1, *t.shape[2:])


def _users_as_rows(t: torch.Tensor, users: int) -> torch.Tensor:
    """The inverse of `_users_as_channels`."""
    records = t.shape[0]
    return (
        t.reshape(records, users, -1, *t.shape[2:]).transpose(0, 1).reshape(records * users, -1, *t.shape[2:])
    )


class _StackedConv(torch.autograd.Function):
    """Convolution of G users' records with G kernels; gradients per user.

    Every product is an ordinary or grouped *forward* convolution or an ordinary backward pass,
    the kernels oneDNN runs fast on CPU; a grouped convolution's weight gradient, which vmap
    would produce and which is several times slower (docs/performance.md), is never asked for.

    - Forward: one ordinary convolution when the kernels are shared (an expanded view, the first
      local step), else one grouped convolution with the users as groups.
    - Weight gradient of user g: dW_g[o, c, a, b] = sum over its records i and output positions
      (p, q) of dY_i[o, p, q] X_i[c, p*s + a*d, q*s + b*d] (zero-padded X). That is a forward
      convolution of X with channels and records swapped, the users' dY as kernels (groups =
      users), stride d and dilation s exchanged: PyTorch's own formula for a weight gradient,
      with the sum over records kept within each user.
    - Input gradient: the ordinary transposed convolution when the kernels are shared, else the
      grouped one.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, geometry: Geometry
    ) -> torch.Tensor:
        users = weight.shape[0]
        shared = _shared(weight) and (bias is None or _shared(bias))
        g = geometry
        if shared:
            out = F.conv2d(x, weight[0], None if bias is None else bias[0], g.stride, g.padding, g.dilation)
        else:
            out = _users_as_rows(
                F.conv2d(
                    _users_as_channels(x, users),
                    weight.reshape(-1, *weight.shape[2:]),
                    None if bias is None else bias.reshape(-1),
                    g.stride,
                    g.padding,
                    g.dilation,
                    groups=users,
                ),
                users,
            )
        ctx.save_for_backward(x, weight)
        ctx.geometry, ctx.shared = geometry, shared
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor):  # type: ignore[override]
        x, weight = ctx.saved_tensors
        g: Geometry = ctx.geometry
        users, c_out, c_in, kh, kw = weight.shape
        records = x.shape[0] // users
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[1]:
            # (G*r, C_out, P, Q) -> (G*C_out, r, P, Q): user g's dY as C_out kernels over r channels.
            kernels = (
                grad_out.reshape(users, records, c_out, *grad_out.shape[2:])
                .transpose(1, 2)
                .reshape(users * c_out, records, *grad_out.shape[2:])
            )
            # oneDNN's fastest layout for this product, measured (docs/performance.md): channels
            # last, except for one input channel or one or two records per user.
            layout = torch.channels_last if c_in > 1 and records > 2 else torch.contiguous_format
            full = F.conv2d(
                x.transpose(0, 1).contiguous(memory_format=layout),
                kernels.contiguous(memory_format=layout),
                None,
                g.dilation,
                g.padding,
                g.stride,
                groups=users,
            )  # (C_in, G*C_out, >= kh, >= kw): the positions past the kernel were never read
            grad_w = full[:, :, :kh, :kw].reshape(c_in, users, c_out, kh, kw).permute(1, 2, 0, 3, 4)
            grad_w = grad_w.contiguous()
        if ctx.needs_input_grad[2]:
            grad_b = grad_out.reshape(users, records, c_out, -1).sum(dim=(1, 3))
        if ctx.needs_input_grad[0]:
            if ctx.shared:
                grad_x = conv2d_input(x.shape, weight[0], grad_out, g.stride, g.padding, g.dilation)
            else:
                grad_x = _users_as_rows(
                    conv2d_input(
                        (records, users * c_in, *x.shape[2:]),
                        weight.reshape(-1, *weight.shape[2:]),
                        _users_as_channels(grad_out, users),
                        g.stride,
                        g.padding,
                        g.dilation,
                        groups=users,
                    ),
                    users,
                )
        return grad_x, grad_w, grad_b, None


def saved_floats_per_record(model: nn.Module, record_shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """Floats autograd keeps per record for one stacked training step (see `_saved_floats`)."""
    return _saved_floats(stacked_model(model), record_shape, dtype)


@functools.lru_cache(maxsize=16)
def _saved_floats(stacked: nn.Module, record_shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """Floats autograd keeps per record for one stacked training step (activations, inputs and
    the per-user weights it saves; integer indices counted by their bytes).

    Measured on a batch of 2 users x 1 record with per-user weights (the larger case: a user's
    weights are then saved for its one record), so that callers can size their calls to a
    memory budget.
    """
    params = {
        k: v.detach().to("cpu", dtype).unsqueeze(0).repeat(2, *([1] * v.dim())).requires_grad_(True)
        for k, v in stacked.named_parameters()
    }
    saved = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved[0] += t.numel() * t.element_size()  # views saved twice count twice: an upper bound
        return t

    x = torch.zeros(2, *record_shape, dtype=dtype)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = torch.func.functional_call(stacked, params, (x,))
    del out
    floats = saved[0] / torch.finfo(dtype).bits * 8
    return max(1, math.ceil(floats / 2))
