"""Refuse, before training, a model whose output for one user's records depends on another's.

ULDP-AVG and ULDP-SGD (ULDP-FL Algorithm 3, lines 9-16) bound a user's influence by clipping the
delta its own records produce; the per-user paths (trainers/per_user.py) train many users in one
call, and the noise covers a user only if no record of another user enters its delta. Like
Opacus' `ModuleValidator.validate`, this names every layer that breaks that independence, with
the fix, in one line (`InvalidParameter`):

- BatchNorm (1d/2d/3d, lazy, SyncBatchNorm) using batch statistics: a record's output depends on
  the other records of its batch, and its running statistics are a buffer the forward pass
  changes. Fix: GroupNorm or LayerNorm (or put the layer in eval mode, with fixed statistics).
- InstanceNorm with `track_running_stats=True`: per record in its output, but its forward pass
  changes running statistics that no per-user path can keep apart.
- A parameter with `requires_grad=False`: its delta would be 0 (it is not trained), but the
  per-user paths differentiate with `torch.func.grad` over every parameter they are given and
  would train it anyway, changing the model without the user knowing. Fix: `register_buffer`
  for a fixed tensor (a buffer is used as it is, neither trained nor released).
- A lazy module (nn.LazyLinear...) whose parameters are not yet initialised: their number and
  shapes are only known after a forward pass, and the model is described, audited and sent to
  silos before one. Fix: give the layer its input size.
- Any other module whose forward pass changes a buffer, or mixes records: found by running the
  model on up to 8 records, slightly perturbed (two equal records would hide mixing), in
  batches of 1, 2 and all of them (buffers compared before and after, each record's outputs
  compared). State is handled (constant buffers) or refused, never silently wrong. own_model's
  `build_checked` also runs a training step (gradients on) and refuses a buffer it changes.

Dropout is accepted: it acts per record; the vectorised path draws each user's masks apart
(`vmap(randomness="different")`), so its draws differ from the loop's, and the two paths are
compared on deterministic models only.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from uldp.errors import InvalidParameter

_BATCH_NORMS = (nn.modules.batchnorm._BatchNorm,)
_INSTANCE_NORMS = (nn.modules.instancenorm._InstanceNorm,)
_DROPOUTS = (nn.modules.dropout._DropoutNd,)

# Joint and one-by-one outputs agree to float32 rounding; kernels may pick another algorithm per
# batch size, hence a tolerance rather than equality.
_RTOL, _ATOL = 1e-4, 1e-5


def forked_rng(x: torch.Tensor) -> contextlib.AbstractContextManager:
    """torch's random streams (CPU, and `x`'s GPU) restored on the way out: a check's forward
    pass leaves the run's draws as they were."""
    return torch.random.fork_rng(devices=[x.device] if x.is_cuda else [])


def check_layers(model: nn.Module, option: str = "--model") -> nn.Module:
    """`model`, once its layers are checked: refused if, by their type and settings, they break
    per-user independence or have no parameters yet (lazy)."""
    for name, module in model.named_modules():
        where = f"layer {name or '(the model)'!r} ({type(module).__name__})"
        if isinstance(module, _BATCH_NORMS) and (module.training or not module.track_running_stats):
            raise InvalidParameter(
                f"{option}: {where} normalises over the batch, which mixes the records of "
                "different users and updates running statistics; use nn.GroupNorm or nn.LayerNorm"
            )
        if isinstance(module, _INSTANCE_NORMS) and module.track_running_stats:
            raise InvalidParameter(
                f"{option}: {where} updates running statistics in every forward pass; "
                "give it track_running_stats=False (or use nn.GroupNorm)"
            )
        if any(nn.parameter.is_lazy(p) for p in module.parameters(recurse=False)):
            raise InvalidParameter(
                f"{option}: {where} is lazy and its parameters are not initialised yet; give it "
                "its input size (e.g. nn.Linear(in_features, out_features) for nn.LazyLinear)"
            )
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            raise InvalidParameter(
                f"{option}: parameter {name!r} has requires_grad=False; the per-user paths "
                "differentiate every parameter (torch.func.grad) and would train it anyway: make "
                "it trainable, or hold a fixed tensor with register_buffer"
            )
    return model


def check_independence(model: nn.Module, x: torch.Tensor, option: str = "--model") -> None:
    """Refuse a model whose forward pass changes a buffer, or gives a record an output that
    depends on the other records of its batch (dropout switched off for the comparison).

    The first k = min(len(x), 8) records (moved by a small random perturbation, drawn under
    `forked_rng`, where two of them are equal: equal or all-zero records would hide a mean over
    the batch) are run one by one, in pairs and all together: a model that mixes records only
    in batches above some size is caught up to k."""
    k = min(len(x), 8)
    if k < 2:
        return
    before = {name: b.detach().clone() for name, b in model.named_buffers()}
    dropouts = [m for m in model.modules() if isinstance(m, _DROPOUTS) and m.training]
    for m in dropouts:
        m.eval()
    try:
        with torch.no_grad(), forked_rng(x):
            xs = x[:k]
            if len(torch.unique(xs.flatten(1), dim=0)) < k:  # equal records would hide a batch mean
                xs = xs + xs.abs().mean().clamp(min=1.0) * 1e-2 * torch.randn_like(xs)
            joint = _forward(model, xs, option)
            refuse_changed_buffer(model, before, option)
            if not isinstance(joint, torch.Tensor) or joint.shape[:1] != (k,):
                shape = tuple(joint.shape) if isinstance(joint, torch.Tensor) else type(joint).__name__
                raise InvalidParameter(
                    f"{option}: on {k} records the model returned {shape}; it must return one tensor "
                    "with one row per record"
                )
            alone = torch.cat([_forward(model, xs[i : i + 1], option) for i in range(k)])
            pairs = torch.cat([_forward(model, xs[i : i + 2], option) for i in range(0, k, 2)])
            refuse_changed_buffer(model, before, option)
    finally:
        for m in dropouts:
            m.train()
    for together, size in ((joint, k), (pairs, 2)):
        if together.shape != alone.shape or not torch.allclose(together, alone, rtol=_RTOL, atol=_ATOL):
            raise InvalidParameter(
                f"{option}: a record's output depends on the other records of its batch ({size} "
                "records together and one by one differ), which mixes users; compute every output "
                "from its own record only"
            )


def _forward(model: nn.Module, x: torch.Tensor, option: str) -> torch.Tensor:
    try:
        return model(x)
    except Exception as error:  # the user's model: one line, its traceback chained
        raise InvalidParameter(
            f"{option}: the model failed on {len(x)} record(s) of shape {tuple(x.shape[1:])}: "
            f"{type(error).__name__}: {' '.join(str(error).split())}"
        ) from error


def refuse_changed_buffer(
    model: nn.Module, before: dict[str, torch.Tensor], option: str, when: str = "the forward pass"
) -> None:
    """Refuse, in one line naming `option`, a buffer of `model` that differs from `before` (a
    name -> tensor snapshot): changed, reshaped or created by `when`."""
    changed = _changed_buffer(model, before)
    if changed is not None:
        name, kind = changed
        raise InvalidParameter(
            f"{option}: {when} changes buffer {name!r} ({kind}), state that per-user "
            "training cannot keep apart; compute it without writing to a buffer"
        )


def _changed_buffer(model: nn.Module, before: dict[str, torch.Tensor]) -> tuple[str, str] | None:
    for name, buffer in model.named_buffers():
        if name not in before:
            return name, "created in the forward pass"
        old = before[name]
        if buffer.shape != old.shape or not torch.equal(buffer, old):
            owner = model.get_submodule(name.rpartition(".")[0]) if "." in name else model
            return name, f"of {type(owner).__name__}"
    return None


def check_module(model: nn.Module, x: torch.Tensor, option: str = "--model") -> None:
    """All the checks: layers by type, then buffers and independence on up to 8 records of `x`."""
    check_layers(model, option)
    check_independence(model, x, option)
