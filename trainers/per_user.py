"""Per-user local training in one silo: ULDP-AVG / ULDP-SGD lines 9-15 (ULDP-FL Algorithm 3).

Every user u of a silo starts from the global model x_t, runs Q local epochs of SGD on its own
records D_{s,u} only, and yields the model delta Delta^{s,u} = x^{s,u} - x_t. Two paths give the
same deltas:

- `loop_user_deltas`: one user after another, plain autograd -- the reference implementation's
  structure, kept as the reference in tests;
- `batched_user_deltas`: users with similar record counts are grouped (padding with masked
  records, so padding stays small) and trained together, one vectorised call per SGD step for
  a whole group: through `torch.func` (`functional_call` + `grad` + `vmap`), or, for the
  built-in convolutional models on CPU, through a copy of the model whose layers take one set of
  weights per user, as ordinary and grouped convolutions and batched matrix products
  (trainers/stacked.py), users with large steps still looped.

Which path a model takes (`chosen_path`) is decided once per (model, loss): by its layers
(`batched_path`), then, for vmap, by trying two vmap steps on a tiny group; a model vmap cannot
run (nn.GRU in torch 2.13, an operator without a batching rule, control flow on the data) takes
the loop rather than failing. Under vmap each user draws its own randomness
(`randomness="different"`): a user's dropout masks differ from the loop's, so the paths are
compared on deterministic models.

Mini-batches: each epoch orders a user's records by `order_keys[epoch]` (random numbers drawn
by the caller, so both paths see the same order) and cuts them into batches of `batch_size`
(None: one full batch, i.e. one step per epoch). In a group, a user with fewer records than the
longest ends with padded batches; their loss is 0, their gradient 0, so plain SGD leaves the
user's model unchanged through them, exactly as if those steps did not exist.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from uldp.errors import InvalidParameter

from .models import LossFn
from .module_check import forked_rng, refuse_changed_buffer
from .stacked import saved_floats_per_record, stackable, stacked_model

# Memory knobs for one vectorised call: parameters copied per user, records stacked per call.
MAX_PARAMETER_FLOATS = 1 << 24
MAX_INPUT_FLOATS = 1 << 22
# Floats autograd may keep for one stacked call (trainers/stacked.py: activations and inputs):
# about 330 MNIST records for the CNN. Larger calls are slower per record on CPU, not faster
# (caches; docs/performance.md).
MAX_ACTIVATION_FLOATS = 1 << 24
# Stacked path: users whose SGD steps take at least this many records train in the loop, where
# one ordinary step per user is as fast (benchmarks/per_user_training.py, docs/performance.md).
LOOP_STEP_RECORDS = 32
# Users in one group differ in record count by at most this factor (then padding <= 25%).
PADDING_RATIO = 1.25
# Small groups may merge up to this factor between their smallest and largest count.
MERGE_RATIO = 2.0
MIN_GROUP_USERS = 1024


@dataclass(frozen=True)
class LocalTraining:
    """Q local epochs of SGD with learning rate eta_l and local batch size (None: full batch)."""

    epochs: int
    lr: float
    batch_size: int | None = None

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise InvalidParameter(f"local epochs must be >= 1, got {self.epochs}")
        if not self.lr > 0:
            raise InvalidParameter(f"local learning rate must be > 0, got {self.lr}")
        if self.batch_size is not None and self.batch_size < 1:
            raise InvalidParameter(f"local batch size must be >= 1, got {self.batch_size}")


def flat_parameters(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """All parameters as one vector, in the model's parameter order."""
    return torch.cat([p.reshape(-1) for p in params.values()])


def clip_factors(deltas: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """min(1, C / ||row||_2) for every row (Algorithm 3 line 16), and the rows' norms.

    A row that diverged (inf or NaN) is set to zero in place, with factor 0: still a function
    of the data with norm <= C, so the sensitivity argument holds, and NaN does not spread.
    """
    norms = torch.linalg.vector_norm(deltas, dim=1)
    factors = torch.clamp(clip / norms.clamp(min=torch.finfo(deltas.dtype).tiny), max=1.0)
    finite = torch.isfinite(norms)
    if not bool(finite.all()):
        deltas[~finite] = 0.0
        factors = torch.where(finite, factors, torch.zeros_like(factors))
    return factors, norms


def clip_rows(deltas: torch.Tensor, clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row times min(1, C / ||row||_2) (Algorithm 3 line 16); also the rows' norms."""
    factors, norms = clip_factors(deltas, clip)
    return deltas * factors.unsqueeze(1), norms


def user_orders(owners: np.ndarray, order_keys: np.ndarray, user: int, epoch: int) -> np.ndarray:
    """Record indices of `user` in the order its `epoch` visits them."""
    idx = np.flatnonzero(owners == user)
    return idx[np.argsort(order_keys[epoch, idx], kind="stable")]


def loop_user_deltas(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    owners: np.ndarray,
    users: np.ndarray,
    order_keys: np.ndarray,
    loss_fn: LossFn,
    training: LocalTraining,
) -> torch.Tensor:
    """Reference path: each user's delta (rows follow `users`), one user at a time."""
    base = {k: v.detach() for k, v in params.items()}
    rows = []
    for user in users:
        local = {k: v.clone().requires_grad_(True) for k, v in base.items()}
        for epoch in range(training.epochs):
            order = user_orders(owners, order_keys, int(user), epoch)
            size = training.batch_size or max(1, len(order))
            for start in range(0, len(order), size):
                batch = torch.as_tensor(order[start : start + size])
                xb, yb = x[batch], y[batch]
                loss = loss_fn(
                    functional_call(model, local, (xb,)),
                    yb,
                    torch.ones(len(batch), dtype=x.dtype, device=x.device),
                )
                grads = torch.autograd.grad(loss, list(local.values()))
                with torch.no_grad():
                    local = {
                        k: (v - training.lr * g).requires_grad_(True)
                        for (k, v), g in zip(local.items(), grads)
                    }
        rows.append(flat_parameters({k: v.detach() for k, v in local.items()}) - flat_parameters(base))
    if not rows:
        return torch.zeros(0, sum(p.numel() for p in base.values()), dtype=x.dtype, device=x.device)
    return torch.stack(rows)


def record_count_groups(
    counts: np.ndarray,
    *,
    max_users: int,
    ratio: float = PADDING_RATIO,
    max_records: int | None = None,
    min_users: int = MIN_GROUP_USERS,
) -> list[np.ndarray]:
    """Positions (into `counts`) grouped by record count, so that padding stays small.

    Sorted by count, a group starting at count c takes users up to floor(ratio * c) records (at
    least c): padding is then at most (ratio - 1) of its records. A group of fewer than
    `min_users` users is merged with the next while the merged counts stay within a factor of
    MERGE_RATIO: every vectorised call has a fixed cost, and a call for a handful of users
    costs more than the padding it saves. Groups never exceed `max_users` users nor, when given,
    `max_records` padded records.
    """
    order = np.argsort(counts, kind="stable")
    sorted_counts = counts[order]
    bounds, start = [], 0
    while start < len(order):
        low = int(sorted_counts[start])
        high = max(low, math.floor(ratio * low))
        stop = int(np.searchsorted(sorted_counts, high, side="right"))
        if stop - start < min_users:
            limit = max(high, math.floor(MERGE_RATIO * low))
            stop = max(stop, min(start + min_users, int(np.searchsorted(sorted_counts, limit, side="right"))))
        bounds.append((start, stop))
        start = stop
    groups = []
    for start, stop in bounds:
        while start < stop:
            width = min(max_users, stop - start)
            if max_records is not None:
                width = max(1, min(width, max_records // max(1, int(sorted_counts[start + width - 1]))))
            groups.append(order[start : start + width])
            start += width
    return groups


def batched_user_deltas(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    owners: np.ndarray,
    users: np.ndarray,
    order_keys: np.ndarray,
    loss_fn: LossFn,
    training: LocalTraining,
    path: str = "vmap",
) -> torch.Tensor:
    """Vectorised path ("vmap" or "stacked"): the same deltas as `loop_user_deltas` (rows
    follow `users`)."""
    users = np.asarray(users, dtype=np.int64)
    row_users, deltas = grouped_user_deltas(
        model, params, x, y, owners, users, order_keys, loss_fn, training, path
    )
    if len(users) == 0:
        return deltas
    position = np.empty(len(users), dtype=np.int64)
    position[np.argsort(users, kind="stable")] = np.arange(len(users))
    placed = np.empty(len(users), dtype=np.int64)
    placed[position[np.searchsorted(np.sort(users), row_users)]] = np.arange(len(users))
    return deltas.index_select(0, torch.as_tensor(placed, device=deltas.device))


def grouped_user_deltas(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    owners: np.ndarray,
    users: np.ndarray,
    order_keys: np.ndarray,
    loss_fn: LossFn,
    training: LocalTraining,
    path: str = "vmap",
) -> tuple[np.ndarray, torch.Tensor]:
    """The batched deltas with rows in the order they were computed: (user of each row, deltas).

    Groups of users with similar record counts are trained by one vectorised call per SGD step,
    through `torch.func.vmap` (`path="vmap"`) or the stacked-weights model of
    trainers/stacked.py (`path="stacked"`); returning rows in group order saves a pass over the
    (users x parameters) matrix.
    """
    base = {k: v.detach() for k, v in params.items()}
    n_params = sum(p.numel() for p in base.values())
    users = np.asarray(users, dtype=np.int64)
    if len(users) == 0:
        return users, torch.zeros(0, n_params, dtype=x.dtype, device=x.device)
    by_id = np.argsort(users, kind="stable")
    where = np.clip(np.searchsorted(users, owners, sorter=by_id), 0, len(users) - 1)
    records = np.flatnonzero(users[by_id[where]] == owners)
    slot = by_id[where[records]]  # row of each kept record's user in `users`
    counts = np.bincount(slot, minlength=len(users))
    looped = loops_in_stacked(counts, training) if path == "stacked" else np.zeros(len(users), dtype=bool)
    stacked_rows = np.flatnonzero(~looped)
    groups = record_count_groups(
        counts[stacked_rows],
        max_users=max(1, MAX_PARAMETER_FLOATS // n_params),
        max_records=max_call_records(model, x, path),
    )
    groups = [stacked_rows[g] for g in groups]
    if looped.any():
        groups.append(np.flatnonzero(looped))
    ranks = [ranks_within_user(slot, order_keys[e, records]) for e in range(training.epochs)]
    sizes = [p.numel() for p in base.values()]
    first_step, step = _vmap_steps(model, loss_fn) if path == "vmap" else _stacked_steps(model, loss_fn)
    # Rows are filled group by group (groups are runs of users sorted by count), then put back
    # in the order of `users`; each pass over a (users x parameters) block costs memory
    # bandwidth, so deltas are written once, in place.
    by_group = torch.empty(len(users), n_params, dtype=x.dtype, device=x.device)
    slot_of_group = np.full(len(users), -1, dtype=np.int64)
    row = 0
    for group in groups:
        block = by_group[row : row + len(group)]
        row += len(group)
        if looped[group[0]]:  # the last group: users whose steps are large enough for the loop
            block.copy_(
                loop_user_deltas(model, base, x, y, owners, users[group], order_keys, loss_fn, training)
            )
            continue
        width = int(counts[group].max())
        if width == 0:
            block.zero_()
            continue
        slot_of_group[:] = -1
        slot_of_group[group] = np.arange(len(group))
        in_group = slot_of_group[slot] >= 0
        rows_g = slot_of_group[slot[in_group]]
        size = training.batch_size or width
        single_step = training.epochs == 1 and size >= width
        local = None
        for epoch in range(training.epochs):
            # index[g, r]: the record user g visits r-th this epoch (-1: padding).
            index = np.full((len(group), width), -1, dtype=np.int64)
            index[rows_g, ranks[epoch][in_group]] = records[in_group]
            for start in range(0, width, size):
                cols = index[:, start : start + size]
                mask = torch.as_tensor(cols >= 0, dtype=x.dtype, device=x.device)
                # Padding repeats the user's own first record (masked): never another user's,
                # so even a loss or model that let a masked record through saw only its own.
                first = index[:, :1]
                flat = torch.as_tensor(
                    np.where(cols >= 0, cols, np.where(first >= 0, first, 0)), device=x.device
                )
                xb, yb = x[flat], y[flat]
                if local is None:
                    grads = first_step(base, xb, yb, mask)
                    if single_step:  # the delta is -lr * gradient: write it straight out
                        _write_rows(block, [grads[k] for k in base], sizes, scale=-training.lr)
                        break
                    local = {k: torch.add(base[k], grads[k], alpha=-training.lr) for k in base}
                else:
                    grads = step(local, xb, yb, mask)
                    torch._foreach_add_(list(local.values()), [grads[k] for k in local], alpha=-training.lr)
        if local is not None:
            _write_rows(block, [local[k] for k in base], sizes, minus=[base[k] for k in base])
    return users[np.concatenate(groups)], by_group


def loops_in_stacked(counts: np.ndarray, training: LocalTraining) -> np.ndarray:
    """Which users the stacked path trains in the loop: those whose SGD steps hold at least
    LOOP_STEP_RECORDS records (a whole user's records per step without mini-batches)."""
    steps = counts if training.batch_size is None else np.minimum(counts, training.batch_size)
    return steps >= LOOP_STEP_RECORDS


def max_call_records(model: nn.Module, x: torch.Tensor, path: str) -> int:
    """The most (padded) records one vectorised call of `path` takes, by the memory knobs."""
    if path == "vmap":
        return max(1, MAX_INPUT_FLOATS // max(1, int(np.prod(x.shape[1:]))))
    # Activations, saved for the backward pass, are what fills memory.
    return max(1, MAX_ACTIVATION_FLOATS // saved_floats_per_record(model, tuple(x.shape[1:]), x.dtype))


StepFn = Callable[
    [dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor], dict[str, torch.Tensor]
]


def _vmap_steps(model: nn.Module, loss_fn: LossFn) -> tuple[StepFn, StepFn]:
    """Each user's gradient through `torch.func`: (first step, from the shared x_t; later steps)."""

    def loss_of(p, xb, yb, mb):
        return loss_fn(functional_call(model, p, (xb,)), yb, mb)

    # The first step starts every user at x_t: the parameters need not be copied per user. Each
    # user draws its own randomness (dropout masks), as it would trained alone.
    return (
        vmap(grad(loss_of), in_dims=(None, 0, 0, 0), randomness="different"),
        vmap(grad(loss_of), randomness="different"),
    )


def _stacked_steps(model: nn.Module, loss_fn: LossFn) -> tuple[StepFn, StepFn]:
    """Each user's gradient through the stacked-weights copy of `model` (trainers/stacked.py):
    the gradient of the sum of the users' losses, each a function of its own weights only."""
    stacked = stacked_model(model)
    user_losses = vmap(loss_fn)

    def gradients(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor, mb: torch.Tensor):
        leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        with torch.enable_grad():
            out = functional_call(stacked, leaves, (xb.flatten(0, 1),))
            loss = user_losses(out.unflatten(0, xb.shape[:2]), yb, mb).sum()
            return dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))

    def first_step(base: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor, mb: torch.Tensor):
        # Expanded views (stride 0 over users): the stacked layers run one shared forward pass.
        return gradients({k: v.expand(len(xb), *v.shape) for k, v in base.items()}, xb, yb, mb)

    return first_step, gradients


def _write_rows(
    block: torch.Tensor,
    tensors: list[torch.Tensor],
    sizes: list[int],
    *,
    scale: float | None = None,
    minus: list[torch.Tensor] | None = None,
) -> None:
    """block[:, parameter k's columns] = scale * tensors[k] (or tensors[k] - minus[k]), flat."""
    start = 0
    for i, (t, n) in enumerate(zip(tensors, sizes)):
        view = block[:, start : start + n]
        flat = t.reshape(len(block), n)
        if minus is not None:
            torch.sub(flat, minus[i].reshape(1, n), out=view)
        else:
            assert scale is not None  # one of `minus` and `scale` is given
            torch.mul(flat, scale, out=view)
        start += n


def ranks_within_user(slot: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """For each record, its position among its user's records when sorted by `keys`."""
    order = np.lexsort((np.arange(len(slot)), keys, slot))
    sorted_slots = slot[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_slots)) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    ranks = np.empty(len(slot), dtype=np.int64)
    ranks[order] = np.arange(len(order)) - first
    return ranks


def batched_path(model: nn.Module, device: torch.device | str) -> str:
    """How `user_deltas(batched=True)` would train a silo's users by the model's layers alone:
    "vmap", "stacked" or "loop" (`chosen_path` also tries vmap on the model).

    Under vmap, per-user convolution weights become one grouped convolution, whose backward pass
    on CPU is slower than batched matrix products (docs/performance.md); the stacked-weights model
    (trainers/stacked.py) writes them that way. The built-in convolutional models on CPU take
    that path (`built_in_model`: its layers assume records first, which a user's forward need not
    keep); every other model (a user's residual GroupNorm CNN: 3x faster than the loop,
    docs/performance.md, issue 35), and every model on a GPU, takes vmap.
    """
    has_conv = any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())
    if not has_conv or torch.device(device).type != "cpu":
        return "vmap"
    return "stacked" if stackable(model) and built_in_model(model) else "vmap"


def built_in_model(model: nn.Module) -> bool:
    """Whether `model` is one of trainers/models.py's (or one wrapped by the audit's canaries).

    Only those may take the stacked path: it runs a group's records through one forward pass and
    its layers assume records come first, which holds for the built-in forwards; a user's
    forward may reorder dimensions or mix the batch, and vmap (one user per call) keeps every
    user's records apart whatever the forward does."""
    from . import models

    # By module name: importing the canaries here would close an import circle through the
    # algorithms package (canaries -> algorithms.base -> per_user).
    inner = getattr(model, "inner", None)
    if type(model).__module__ == f"{__package__}.canaries" and isinstance(inner, nn.Module):
        model = inner
    return type(model).__module__ == models.__name__


# (model, loss) -> the path `chosen_path` decided: tried once per model and loss, i.e. per run.
_PATHS: weakref.WeakKeyDictionary[nn.Module, dict[LossFn, str]] = weakref.WeakKeyDictionary()


def chosen_path(model: nn.Module, loss_fn: LossFn, x: torch.Tensor, y: torch.Tensor) -> str:
    """The path `user_deltas(batched=True)` takes for `model` and `loss_fn`: `batched_path`'s,
    except that vmap is first tried on a group of two users of two records (one first step and
    one later step, `x[:2]`, `y[:2]`): a model vmap cannot run (an operator without a batching
    rule, such as nn.GRU's in torch 2.13, or control flow on the data) takes the loop instead of
    failing. Decided once per (model, loss) and remembered."""
    known = _PATHS.setdefault(model, {})
    if loss_fn not in known:
        path = batched_path(model, x.device)
        if path == "vmap" and len(x) == 0:
            return path  # nothing to try it on (a silo without records): the next silo decides
        if path == "vmap" and not vmap_runs(model, loss_fn, x, y):
            path = "loop"
        known[loss_fn] = path
    return known[loss_fn]


def path_taken(model: nn.Module, loss_fn: LossFn) -> str | None:
    """The path `chosen_path` decided for (model, loss) in this process, None if none was (no
    batched per-user training ran here: the loop was asked for, or the silos trained elsewhere)."""
    return _PATHS.get(model, {}).get(loss_fn)


def set_path(model: nn.Module, loss_fn: LossFn, path: str) -> None:
    """Make `chosen_path` answer `path` for (model, loss): for a caller that measured the paths
    (benchmarks/per_user_training.py --path), or one that must compare them."""
    if path not in ("vmap", "stacked", "loop"):
        raise InvalidParameter(f"path must be vmap, stacked or loop, got {path!r}")
    if path == "stacked" and not (stackable(model) and built_in_model(model)):
        raise InvalidParameter(
            f"path stacked is for the built-in models with a stacked version (trainers/stacked.py); "
            f"{type(model).__name__} takes vmap or loop"
        )
    _PATHS.setdefault(model, {})[loss_fn] = path


def vmap_runs(model: nn.Module, loss_fn: LossFn, x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether the vmap path's two steps run on `model` (two users, up to two records each)."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    first_step, step = _vmap_steps(model, loss_fn)
    xb = x[:2].unsqueeze(0).expand(2, *x[:2].shape)
    yb = y[:2].unsqueeze(0).expand(2, *y[:2].shape)
    mask = torch.ones(yb.shape[:2], dtype=x.dtype, device=x.device)
    try:
        with forked_rng(x):
            grads = first_step(params, xb, yb, mask)
            local = {k: params[k] - grads[k] for k in params}
            step(local, xb, yb, mask)
    except Exception:  # noqa: BLE001 - any failure under vmap means: train this model in the loop
        return False
    return True


def user_deltas(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    owners: np.ndarray,
    users: np.ndarray,
    order_keys: np.ndarray,
    loss_fn: LossFn,
    training: LocalTraining,
    *,
    batched: bool = True,
) -> tuple[np.ndarray, torch.Tensor]:
    """Each user's local-training delta: (the user of each row, the rows).

    `batched` asks for the fastest path (`chosen_path`), rows then in the order of the groups;
    with `batched=False`, or where only the loop applies, the loop, rows following `users`.
    """
    before = {name: b.detach().clone() for name, b in model.named_buffers()}
    path = chosen_path(model, loss_fn, x, y) if batched else "loop"
    if path != "loop":
        out = grouped_user_deltas(model, params, x, y, owners, users, order_keys, loss_fn, training, path)
    else:
        users = np.asarray(users, dtype=np.int64)
        out = users, loop_user_deltas(model, params, x, y, owners, users, order_keys, loss_fn, training)
    # A buffer written while training carries one user's records into the next user's delta
    # (and into the released model): refused, whichever path ran.
    refuse_changed_buffer(model, before, "--model", when="local training")
    return out
