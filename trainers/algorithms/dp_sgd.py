"""DP-SGD on one silo's records: Poisson sampling, per-record clipping, Gaussian noise.

Shared by ULDP-GROUP-k (ULDP-FL Algorithm 2, one rate for all records) and rPDP-FL / UniDP
(rPDP-FL Algorithm 2, one rate per record). torch and numpy are imported inside the function:
the algorithm modules that import this one are read by `uldp account`, which must not load torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import torch

    from .base import Context, TrainConfig


def dp_sgd(
    ctx: Context,
    params: dict[str, torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    usable: np.ndarray,
    *,
    gamma: float | np.ndarray,
    lot_size: float,
    steps: int,
    cfg: TrainConfig,
    rng: np.random.Generator,
    silo: int = -1,
    canary: np.ndarray | None = None,
) -> dict[str, torch.Tensor]:
    """`steps` DP-SGD steps on the records `usable` (Abadi et al. 2016, Algorithm 1): each step
    Poisson-samples them, clips every sampled record's gradient to C, adds N(0, sigma^2 C^2) to
    the sum and moves by -lr / `lot_size` times it.

    `gamma` is one rate for all (ULDP-GROUP-k), or one per usable record (rPDP-FL Algorithm 2
    line 9: record j kept with its own q_j); either way one vectorised draw per step, no loop over
    records. `lot_size` is the fixed divisor (Abadi et al.'s L; for personalised rates the
    expected batch sum_j q_j), never the realised batch size, which would reveal it.

    `canary` (`uldp audit`): each record's canary coordinate (-1: a real record), whose gradient
    is replaced by a Dirac row (`canaries.plant_gradients`); `silo` names the silo for
    `cfg.fault` (`faults`).
    """
    import torch

    from .. import canaries
    from ..per_record import per_record_gradients
    from . import faults
    from .base import apply_delta, clipping_factors

    per_record = per_record_gradients(ctx.model, ctx.loss_fn)
    local = {k: v.detach().clone() for k, v in params.items()}
    like = next(iter(local.values()))
    std = faults.noise_std(cfg.sigma * cfg.clip, cfg.fault)
    for _ in range(steps):
        chosen = poisson_sample(usable, gamma, rng)
        noise = torch.as_tensor(rng.normal(0.0, std, size=ctx.n_params), dtype=like.dtype, device=like.device)
        total = noise
        if len(chosen):
            idx = torch.as_tensor(chosen, device=x.device)
            grads = per_record(local, x[idx], y[idx])
            flat = torch.cat([g.reshape(len(chosen), -1) for g in grads.values()], dim=1)
            if canary is not None:
                flat = canaries.plant_gradients(flat, canary[chosen], cfg.clip)
            total = (flat * clipping_factors(flat, cfg, silo).unsqueeze(1)).sum(dim=0) + noise
        local = apply_delta(local, total, -cfg.lr / lot_size)
    return local


def poisson_sample(usable: np.ndarray, gamma: float | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The records of `usable` kept in one step: each independently with probability `gamma`
    (one rate, or one per record), in one vectorised draw (rPDP-FL Algorithm 2 line 9)."""
    return usable[rng.random(len(usable)) < gamma]
