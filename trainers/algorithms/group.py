"""`uldp-group`: ULDP-GROUP-k (ULDP-FL Algorithm 2, Theorem 2).

Flags B keep at most k records of every user across all silos (line 8), drawn once at random
and kept for every round (§3.3: "these flags must be consistent across all rounds"); k is given,
or `max` / `median` of the records per user (§5.1). Each silo then runs DP-SGD [Abadi et al.,
Algorithm 1] on its kept records D'_s: ceil(Q / gamma_s) steps per round, each Poisson-sampling
records with rate gamma_s = min(1, batch / |D'_s|), clipping every record's gradient to C, adding
N(0, sigma^2 C^2) to the sum and dividing by the lot size `batch` (fixed, as Abadi et al.'s L:
dividing by gamma_s |D'_s| instead would scale the noise of a small silo by 1/|D'_s| and reveal
that count in the update). The kept sizes |D'_s| do set gamma_s and the number of steps; like
the paper and Opacus we treat them as public (the run prints them). The server
averages: x_{t+1} = x_t + eta_g / |S| sum_s Delta_t^s.

Accounting: record-level RDP of that DP-SGD, maximum over silos, then group privacy for k records
(`accountants.algorithms.plan_algorithm("uldp-group", silo_sizes=|D'_s|, batch_size=..., k=k)`).
User sampling, if asked, only removes users' records from a round; it is not credited.
"""
from __future__ import annotations

from uldp.errors import InvalidParameter
import math

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from uldp.accountants.algorithms import dp_sgd_rate, dp_sgd_steps

from ..per_user import ranks_within_user, flat_parameters
from .base import (Context, RoundPlan, SiloAveraging, SiloData, SiloDelta, TrainConfig,
                   apply_delta, zero_delta)


def resolve_group_k(group_k: int | str, records_per_user: np.ndarray) -> int:
    """k as an integer: given, or the max / median of N_u over users with records (at least 1)."""
    if not isinstance(group_k, str):
        if group_k < 1:
            raise InvalidParameter(f"group-k must be >= 1, got {group_k}")
        return int(group_k)
    present = records_per_user[records_per_user > 0]
    if len(present) == 0:
        return 1
    if group_k == "max":
        return int(present.max())
    if group_k == "median":
        return max(1, int(math.ceil(np.median(present))))
    raise InvalidParameter(f"group-k must be an integer >= 1, max or median, got {group_k!r}")


def contribution_flags(users: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Flags b: True for the records kept, at most k per user over all silos, chosen at random.

    `users` lists the owner of every training record of the federation (all silos together).
    """
    ranks = ranks_within_user(users, rng.random(len(users)))
    return ranks < k


class UldpGroup(SiloAveraging):
    name = "uldp-group"

    def __init__(self, k: int, kept: list[np.ndarray]) -> None:
        self.k = k
        self.kept = kept  # per silo: bool mask over the silo's records

    @classmethod
    def prepare(cls, silos: list[SiloData], cfg: TrainConfig) -> "UldpGroup":
        owners = np.concatenate([s.users for s in silos])
        n_users = silos[0].n_users if silos else 0
        k = resolve_group_k(cfg.group_k, np.bincount(owners, minlength=n_users))
        flags = contribution_flags(owners, k, np.random.default_rng(
            None if cfg.noise_seed is None else [cfg.noise_seed, 7, 1]))
        bounds = np.cumsum([0] + [s.size for s in silos])
        return cls(k, [flags[a:b] for a, b in zip(bounds[:-1], bounds[1:])])

    def kept_sizes(self) -> list[int]:
        return [int(m.sum()) for m in self.kept]

    def silo_update(self, silo: SiloData, params: dict[str, torch.Tensor], plan: RoundPlan,
                    ctx: Context, cfg: TrainConfig, rng: np.random.Generator) -> SiloDelta:
        kept = self.kept[silo.silo]
        n_kept = int(kept.sum())
        if n_kept == 0:
            return SiloDelta(silo.silo, zero_delta(params, ctx.n_params))
        gamma = dp_sgd_rate(cfg.batch_size, n_kept)
        steps = dp_sgd_steps(cfg.local_epochs, gamma)  # the schedule the accountant counts
        usable = np.flatnonzero(kept & plan.sampled[silo.users])
        local = dp_sgd(ctx, params, silo.x, silo.y, usable, gamma=gamma, lot_size=cfg.batch_size,
                       steps=steps, cfg=cfg, rng=rng)
        return SiloDelta(silo.silo, flat_parameters(local) - flat_parameters(params))


def dp_sgd(ctx: Context, params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
           usable: np.ndarray, *, gamma: float, lot_size: int, steps: int, cfg: TrainConfig,
           rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """DP-SGD with Poisson sampling (rate gamma) and per-record clipping (Abadi et al. 2016)."""
    model, loss_fn = ctx.model, ctx.loss_fn

    def record_loss(p, xr, yr):
        return loss_fn(functional_call(model, p, (xr.unsqueeze(0),)), yr.unsqueeze(0),
                       torch.ones(1, dtype=xr.dtype, device=xr.device))

    per_record = vmap(grad(record_loss), in_dims=(None, 0, 0))
    local = {k: v.detach().clone() for k, v in params.items()}
    like = next(iter(local.values()))
    for _ in range(steps):
        chosen = usable[rng.random(len(usable)) < gamma]
        noise = torch.as_tensor(rng.normal(0.0, cfg.sigma * cfg.clip, size=ctx.n_params),
                                dtype=like.dtype, device=like.device)
        total = noise
        if len(chosen):
            idx = torch.as_tensor(chosen, device=x.device)
            grads = per_record(local, x[idx], y[idx])
            flat = torch.cat([g.reshape(len(chosen), -1) for g in grads.values()], dim=1)
            norms = torch.linalg.vector_norm(flat, dim=1, keepdim=True)
            clipped = flat * torch.clamp(cfg.clip / norms.clamp(min=1e-12), max=1.0)
            total = clipped.sum(dim=0) + noise
        local = apply_delta(local, total, -cfg.lr / lot_size)
    return local
