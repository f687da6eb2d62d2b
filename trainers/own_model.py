"""A user's own model, loss and metric, resolved once into a `ModelSpec` the trainers use.

Opacus' `make_private(module=...)` takes the user's own `nn.Module`; `uldp train` takes it too
(issue 35), as any of:

- None or "auto": the paper's model for the data (trainers/models.py, ULDP-FL §5.1);
- a built-in name: cnn, mlp, logistic, cox;
- a reference `FILE.py:NAME` or `package.module:NAME` (trainers/references.py) to a factory;
- a callable factory (a function or class), called with the keywords it names among
  `feature_shape`, `n_classes`, `n_outputs` (n_classes for multiclass, else 1) and `task`;
- an `nn.Module` instance, deep-copied as the initial model of every run.

The loss is one of the task's built-in masked losses by name ("cross_entropy",
"binary_cross_entropy", "cox", "mse"), a reference, a 2-argument mean loss `(output, y)` such
as `nn.CrossEntropyLoss()` (made masked per record by `masked_loss`), or a 3-argument masked loss
`(output, y, mask)` as trainers/models.py writes them. A masked loss is what lets users of
different record counts train in one vectorised call (trainers/per_user.py pads with masked
records). The metric is "accuracy", "roc_auc", "c_index", a reference or a callable
`(outputs, y) -> float` over the test set's numpy arrays; its name is the history row's key.

A Flower silo runs in another process and rebuilds model and loss from `reference` and
`loss_reference` (a built-in name or an absolute reference); None where only this process has
the object (a lambda, an instance), and `--engine flower` refuses those.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from uldp.errors import InvalidParameter

from .models import (
    MODELS,
    LossFn,
    binary_loss,
    build_model,
    cox_loss,
    cross_entropy_loss,
    default_model_name,
    metric_value,
)
from .module_check import check_layers, check_module, forked_rng, refuse_changed_buffer
from .references import absolute, call_with, is_reference, load_callable, load_reference

MetricFn = Callable[[np.ndarray, np.ndarray], float]


def mse_loss(output: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over real records of each record's mean squared error."""
    per_record = ((output.reshape(len(y), -1) - y.reshape(len(y), -1).to(output.dtype)) ** 2).mean(dim=1)
    return (per_record * mask).sum() / mask.sum().clamp(min=1.0)


LOSSES: dict[str, LossFn] = {
    "cross_entropy": cross_entropy_loss,
    "binary_cross_entropy": binary_loss,
    "cox": cox_loss,
    "mse": mse_loss,
}
TASK_LOSSES = {"multiclass": "cross_entropy", "binary": "binary_cross_entropy", "survival": "cox"}
METRIC_NAMES = ("accuracy", "roc_auc", "c_index")
TASK_METRICS = {"multiclass": "accuracy", "binary": "roc_auc", "survival": "c_index"}
# Keys a history row holds already: a metric may not take one of them (runner.run also refuses a
# metric whose name collides with any other key of the first row, such as a tier's epsilon).
RESERVED_KEYS = frozenset(
    {
        "round",
        "loss",
        "epsilon",
        "server_epsilon",
        "delta",
        "elapsed_s",
        "sampled_users",
        "sampled_silos",
    }
)
# Records of the training set build_checked runs the model on (fewer when the data has fewer).
CHECK_RECORDS = 8


@dataclass(frozen=True)
class ModelSpec:
    """The model a run trains, its loss and its metric, and how another process rebuilds them."""

    name: str  # shown in summaries: "cnn", "my_models.py:resnet"
    reference: str | None  # a built-in name or an absolute reference; None: this process only
    factory: Callable[[], nn.Module]
    loss: LossFn  # masked: (output, y, mask) -> scalar
    loss_reference: str | None
    metric: str  # the history row's key
    metric_fn: MetricFn
    metric_reference: str | None


def resolve_model(model: Any = None, *, data: Any, loss: Any = None, metric: Any = None) -> ModelSpec:
    """The `ModelSpec` for `model`, `loss` and `metric` on `data` (a FederatedData, or anything
    with its `name`, `task`, `feature_shape` and `n_classes`); a `ModelSpec` given as `model`
    is returned as it is. Every refusal is one InvalidParameter line naming the option."""
    if isinstance(model, ModelSpec):
        return model
    name, reference, factory = _model(model, data)
    loss_fn, loss_reference = resolve_loss(loss, data.task)
    metric_name, metric_fn, metric_reference = resolve_metric(
        metric if metric is not None else getattr(data, "metric", None), data.task
    )
    return ModelSpec(
        name, reference, factory, loss_fn, loss_reference, metric_name, metric_fn, metric_reference
    )


def _model(model: Any, data: Any) -> tuple[str, str | None, Callable[[], nn.Module]]:
    task, shape, n_classes = data.task, tuple(data.feature_shape), data.n_classes
    available = {
        "feature_shape": shape,
        "n_classes": n_classes,
        "n_outputs": n_classes if task == "multiclass" else 1,
        "task": task,
    }
    if model is None or model == "auto":
        model = default_model_name(getattr(data, "name", ""), task, shape)
    if isinstance(model, str):
        if model in MODELS:
            with torch.random.fork_rng(devices=[]):  # refuse a misfit now, leave the seed's stream
                build_model(model, task=task, feature_shape=shape, n_classes=n_classes)

            def built_in() -> nn.Module:
                return build_model(model, task=task, feature_shape=shape, n_classes=n_classes)

            return model, model, built_in
        if not is_reference(model):
            raise InvalidParameter(
                f"--model must be auto, one of {', '.join(MODELS)}, or FILE.py:NAME or "
                f"package.module:NAME naming a factory, got {model!r}"
            )
        target = load_reference(model, "--model")
        name, reference = model, absolute(model)
        if isinstance(target, nn.Module):
            return name, reference, _copies(target)
        if not callable(target):
            raise InvalidParameter(
                f"--model: {model} names a {type(target).__name__} object, not a factory or an nn.Module"
            )
        return name, reference, _called(target, available)
    if isinstance(model, nn.Module):
        return type(model).__name__, None, _copies(model)
    if callable(model):
        return _callable_name(model), None, _called(model, available)
    raise InvalidParameter(
        f"--model must be a name, a reference, a factory or an nn.Module, got {type(model).__name__}"
    )


def _copies(module: nn.Module) -> Callable[[], nn.Module]:
    def copied() -> nn.Module:
        return copy.deepcopy(module)

    return copied


def _called(factory: Callable[..., Any], available: dict[str, Any]) -> Callable[[], nn.Module]:
    def made() -> nn.Module:
        out = call_with(factory, "--model", available)
        if not isinstance(out, nn.Module):
            raise InvalidParameter(
                f"--model: {_callable_name(factory)} returned a {type(out).__name__}, not a torch.nn.Module"
            )
        return out

    return made


def resolve_loss(loss: Any, task: str) -> tuple[LossFn, str | None]:
    """(the masked loss, the reference a silo rebuilds it from) for `loss` on `task`."""
    if loss is None:
        loss = TASK_LOSSES.get(task)
        if loss is None:
            raise InvalidParameter(f"task must be multiclass, binary or survival, got {task!r}")
    if isinstance(loss, str):
        if loss in LOSSES:
            return LOSSES[loss], loss
        if not is_reference(loss):
            raise InvalidParameter(
                f"--loss must be one of {', '.join(LOSSES)}, or FILE.py:NAME or package.module:NAME, "
                f"got {loss!r}"
            )
        target = load_reference(loss, "--loss")
        if isinstance(target, type):  # a loss class such as nn.CrossEntropyLoss: one instance
            target = call_with(target, "--loss", {})
        return _as_masked(target), absolute(loss)
    return _as_masked(loss), None


def _as_masked(loss: Any) -> LossFn:
    if not callable(loss):
        raise InvalidParameter(f"--loss must be callable, got a {type(loss).__name__}")
    arity = _required_positional(loss)
    if arity == 2:
        return masked_loss(loss)
    if arity == 3:
        return loss
    raise InvalidParameter(
        f"--loss: {_callable_name(loss)} takes {arity} required arguments; give a mean loss "
        "(output, y) or a masked loss (output, y, mask)"
    )


def _refuse_unmasked_settings(loss: Any) -> None:
    """Refuse a 2-argument loss whose mean is not a plain mean of per-record terms: class
    weights (a weighted mean), a reduction other than "mean", an ignore_index that is a real label
    (the mean would skip records). `masked_loss` averages per-record values over real records, so
    it would silently compute another loss than the one given."""
    weight = getattr(loss, "weight", None)
    reduction = getattr(loss, "reduction", "mean")
    ignore_index = getattr(loss, "ignore_index", None)
    reason = None
    if weight is not None:
        reason = "has class weights (weight=...)"
    elif reduction != "mean":
        reason = f"has reduction={reduction!r}"
    elif isinstance(ignore_index, int) and ignore_index >= 0:
        reason = f"ignores label {ignore_index} (ignore_index)"
    if reason is not None:
        raise InvalidParameter(
            f"--loss: {_callable_name(loss)} {reason}, which a per-record mean cannot reproduce; "
            "give a masked loss (output, y, mask) that computes it over the records whose mask is 1"
        )


def _required_positional(fn: Any) -> int:
    target = fn.forward if isinstance(fn, nn.Module) else fn
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return 2  # a builtin without a signature: a plain (output, y) loss
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in parameters if p.kind in kinds and p.default is p.empty)


def masked_loss(loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> LossFn:
    """A 2-argument mean loss `(output, y)` as a masked loss: `loss` on each record alone (one
    record at a time under `vmap`), averaged over the real records (mask 1).

    A mean over records of per-record terms (cross-entropy, MSE) is what this reproduces; a loss
    that couples records (Cox's partial likelihood) must be written with the mask instead, and so
    must a loss with class weights, another reduction or an ignore_index (refused here)."""
    _refuse_unmasked_settings(loss)
    per_record = torch.func.vmap(lambda o, t: loss(o.unsqueeze(0), t.unsqueeze(0)), randomness="different")

    def masked(output: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        values = per_record(output, y)
        return (values.reshape(len(mask)) * mask).sum() / mask.sum().clamp(min=1.0)

    masked.__name__ = f"masked_{_callable_name(loss)}"
    return masked


def resolve_metric(metric: Any, task: str) -> tuple[str, MetricFn, str | None]:
    """(the history row's key, the metric, its reference) for `metric` on `task`."""
    if metric is None:
        metric = TASK_METRICS.get(task)
        if metric is None:
            raise InvalidParameter(f"task must be multiclass, binary or survival, got {task!r}")
    reference = None
    if isinstance(metric, str):
        if metric in METRIC_NAMES:
            name = metric

            def built_in(outputs: np.ndarray, y: np.ndarray) -> float:
                return metric_value(name, outputs, y)

            return name, built_in, name
        if not is_reference(metric):
            raise InvalidParameter(
                f"--metric must be one of {', '.join(METRIC_NAMES)}, or FILE.py:NAME or "
                f"package.module:NAME, got {metric!r}"
            )
        reference = absolute(metric)
        metric = load_callable(metric, "--metric")
    if not callable(metric):
        raise InvalidParameter(f"--metric must be callable, got a {type(metric).__name__}")
    name = _callable_name(metric)
    if name in RESERVED_KEYS or not name.isidentifier():
        raise InvalidParameter(
            f"--metric: its name {name!r} is the key of its column; give the function another name "
            f"(not {', '.join(sorted(RESERVED_KEYS))})"
        )
    fn = metric

    def user_metric(outputs: np.ndarray, y: np.ndarray) -> float:
        try:
            value = fn(outputs, y)
        except InvalidParameter:
            raise
        except Exception as error:  # the user's metric: one line, its traceback chained
            raise InvalidParameter(
                f"--metric: {name} failed on outputs of shape {outputs.shape}: "
                f"{type(error).__name__}: {' '.join(str(error).split())}"
            ) from error
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, np.ndarray) and value.size == 1:
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InvalidParameter(
                f"--metric: {name} returned a {type(value).__name__}; a metric returns a number"
            )
        return float(value)

    return name, user_metric, reference


def _callable_name(obj: Any) -> str:
    name = getattr(obj, "__name__", None)
    return name if isinstance(name, str) else type(obj).__name__


def build_checked(spec: ModelSpec, data: Any, device: str = "cpu") -> nn.Module:
    """A fresh model from `spec.factory` (under the caller's torch seed) on `device`, refused in one
    line if it breaks per-user independence (trainers/module_check.py, on up to CHECK_RECORDS
    training records), if its output does not fit the loss, if the loss counts masked records or
    if a training step (forward and backward, gradients on) writes to a buffer; a user's metric
    is called on the outputs too. The checks leave the run's random streams as they were."""
    model = spec.factory().to(device)
    x, y = sample_records(data, device, CHECK_RECORDS)
    check_module(model, x)
    x2, y2 = x[:2], y[:2]
    loss_name = spec.loss_reference or _callable_name(spec.loss)
    with forked_rng(x):
        before = {name: b.detach().clone() for name, b in model.named_buffers()}
        try:
            with torch.enable_grad():
                out = model(x2)
                loss = spec.loss(out, y2, torch.ones(len(y2), dtype=x.dtype, device=device))
        except InvalidParameter:
            raise
        except Exception as error:
            raise InvalidParameter(
                f"--model: {spec.name}'s output on records of shape {tuple(x.shape[1:])} does not fit "
                f"the loss {loss_name} (labels of shape "
                f"{tuple(y.shape[1:])}): {type(error).__name__}: {' '.join(str(error).split())}"
            ) from error
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.dtype.is_floating_point:
            raise InvalidParameter(
                f"--loss: {loss_name} must return one floating-point number, got "
                f"{tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__}"
            )
        if loss.requires_grad:
            try:
                loss.backward()
            except Exception as error:
                raise InvalidParameter(
                    f"--loss: the gradient of {loss_name} through {spec.name} failed: "
                    f"{type(error).__name__}: {' '.join(str(error).split())}"
                ) from error
            model.zero_grad(set_to_none=True)
        refuse_changed_buffer(model, before, "--model", when="a training step (gradients on)")
        # The forward pass may switch a layer to training mode (BatchNorm): checked again.
        check_layers(model)
        _check_mask(spec.loss, loss_name, out.detach(), y2)
    if spec.metric_reference not in METRIC_NAMES:  # a user's metric: fails here, not after round 1
        spec.metric_fn(out.detach().double().cpu().numpy(), y2.cpu().numpy())
    return model


def _check_mask(loss_fn: LossFn, loss_name: str, out: torch.Tensor, y: torch.Tensor) -> None:
    """Refuse a masked loss that counts a record whose mask is 0: the per-user paths pad a user's
    batches with masked copies of its records (trainers/per_user.py), and must find its loss
    unchanged by them. With mask [1, 0]: the loss of the first record alone, whatever the second."""
    if len(y) < 2:
        return
    mask = torch.tensor([1.0, 0.0], dtype=out.dtype, device=out.device)
    other_out = out.clone()
    other_out[1] = out[1] * -3.0 + 1.0
    other_y = y.clone()
    other_y[1] = y[0] if not torch.equal(y[0], y[1]) else y[1]
    try:
        with torch.no_grad():
            alone = loss_fn(out[:1], y[:1], mask[:1])
            padded = loss_fn(out, y, mask)
            perturbed = loss_fn(other_out, other_y, mask)
    except Exception as error:
        raise InvalidParameter(
            f"--loss: {loss_name} failed on a batch with a masked record: "
            f"{type(error).__name__}: {' '.join(str(error).split())}"
        ) from error
    close = [
        torch.allclose(a.double(), b.double(), rtol=1e-4, atol=1e-6)
        for a, b in ((padded, alone), (perturbed, alone))
    ]
    if not all(close):
        raise InvalidParameter(
            f"--loss: the loss counts records whose mask is 0 ({loss_name}(output, y, [1, 0]) differs "
            "from its value on the first record alone); weight each record's term by the mask"
        )


def sample_records(data: Any, device: str = "cpu", n: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """The first `n` training records of `data` as the trainers hold them (float32 features; int64
    labels, float32 (time, event) pairs for survival)."""
    label = torch.float32 if data.task == "survival" else torch.long
    x = torch.as_tensor(np.asarray(data.x_train[:n]), dtype=torch.float32, device=device)
    y = torch.as_tensor(np.asarray(data.y_train[:n]), dtype=label, device=device)
    return x, y
