"""Per-user clipping, shared by `uldp-avg(-w)` (`avg`) and `uldp-sgd(-w)` (`sgd`) (ULDP-FL Algorithms 3-4).

Silo side (Algorithm 3 lines 8-17): every user u of the silo trains from x_t on its own records
(ULDP-AVG: Q local epochs; ULDP-SGD: one gradient on all its records), the delta is clipped to C
and weighted by w_{s,u}; the silo sends sum_u w_{s,u} Delta~_{s,u} + N(0, sigma^2 C^2 / |S|).
Server side (Algorithm 4 line 10): x_{t+1} = x_t + eta_g / (q |U| |S|) sum_s Delta_t^s.
Sampling (Algorithm 4 lines 4-7): users not in U_t get weight 0 in every silo.

With weights summing to 1 over silos, one user's part of sum_s Delta_t^s has norm at most C, and
the noise on the sum has std sigma C: a Gaussian of noise multiplier sigma (Theorem 3).

ULDP-SGD is computed as one full-batch step with learning rate 1 (its "delta" is -g), so both
share the per-user path; the server's eta_g is then the SGD step size.

The `-w` variants (Eq. 3, w = n_{s,u} / N_u) send per-user clipped deltas and the noise instead of
their weighted sum, and the server's weighting is pluggable: plaintext by default, Protocol 1
(`secure=True`) where the silos, not knowing who is sampled, train every user of theirs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from uldp.errors import InvalidParameter

from .plans import gaussian_rounds, with_silos
from .registry import AlgorithmSpec, PlanInputs
from .server import BaseAlgorithm

if TYPE_CHECKING:
    import numpy as np
    import torch

    from uldp.accountants.plan import Plan

    from ..per_user import LocalTraining
    from .base import Context, RoundPlan, SiloData, SiloDelta, SiloUserDeltas, TrainConfig


def per_user_noise_std(cfg: TrainConfig, n_silos: int) -> float:
    """Per-silo noise std sigma C / sqrt(|S|) (Algorithm 3 line 17): the sum has std sigma C."""
    return cfg.sigma * cfg.clip / math.sqrt(n_silos)


def per_user_plan(algorithm: str, inputs: PlanInputs) -> Plan:
    """T rounds of a Gaussian of multiplier sigma, whatever the local epochs (Theorem 3)."""
    noise = (
        f"each silo adds N(0, sigma^2 C^2 / |S|){with_silos(inputs)}; per-user clipping with weights "
        "summing to 1 over silos bounds a user's contribution by C"
    )
    return gaussian_rounds(
        algorithm, "Theorem 3", noise, inputs, {"local epochs": "do not change the guarantee (Theorem 3)"}
    )


def trainer_factory(name: str) -> Callable[[TrainConfig, list[SiloData], str], PerUserClipping]:
    """The `build` of the per-user-clipping algorithm `name`."""

    def build(cfg: TrainConfig, silos: list[SiloData], task: str) -> PerUserClipping:
        if cfg.secure:
            from .weighting import secure_protocol

            secure_protocol()  # fail before training, not after the first round
        return PerUserClipping(name)

    return build


def per_user_options(name: str) -> frozenset[str]:
    """What `PerUserClipping(name)` reads: ULDP-SGD takes one full gradient per user, so no local
    learning rate, epochs or batch; neither trains on silo-level batches or keeps k records."""
    common = {"sigma", "clip", "global_lr", "batched"}
    if name.startswith("uldp-sgd"):
        return frozenset(common)
    return frozenset({*common, "lr", "local_epochs", "local_batch_size"})


def per_user_spec(name: str, help: str, plan: Callable[[PlanInputs], Plan]) -> AlgorithmSpec:
    """ULDP-AVG's or ULDP-SGD's spec, trained by `PerUserClipping(name)`."""
    return AlgorithmSpec(
        name=name,
        help=help,
        build=trainer_factory(name),
        plan=plan,
        options=per_user_options(name),
        user_budgets=True,
    )


def weighted_plan(base: AlgorithmSpec, name: str) -> Callable[[PlanInputs], Plan]:
    """`base`'s plan, named `name`, with a `weights` line saying why its guarantee is `base`'s.

    The weights n_su / N_u (ULDP-FL Eq. 3) sum to 1 over silos for every user, as 1/|S| does, so
    a user's part of the sum still has norm at most C and the noise std is still sigma C: the
    released mechanism, and every epsilon, are `base`'s (Theorem 3). Protocol 1 (§4.1) computes
    the same weights without showing the server the histogram, so it changes nothing here either.
    """
    base_plan = base.plan
    if base_plan is None:
        raise InvalidParameter(f"{base.name} has no plan to weight")

    def plan(inputs: PlanInputs) -> Plan:
        found = base_plan(inputs)
        weights = (
            f"n_su / N_u (Eq. 3; by Protocol 1 under --secure) do not change the released mechanism: "
            f"they sum to 1 over silos as 1/|S| does, so the guarantee is {base.name}'s"
        )
        # Right after the algorithm line, which names the theorem the guarantee comes from.
        lines: dict[str, str] = {}
        for key, value in found.assumptions.items():
            lines[key] = value
            if key == "algorithm":
                lines["weights"] = weights
        lines.setdefault("weights", weights)
        return replace(found, algorithm=name, assumptions=lines)

    return plan


def weighted_variant(base: AlgorithmSpec) -> AlgorithmSpec:
    """`<base>-w`: weights n_su / N_u (Eq. 3), plaintext or Protocol 1; accounted as `base`."""
    name = f"{base.name}-w"
    return AlgorithmSpec(
        name=name,
        help=f"{base.name.upper()} with weights n_su / N_u (Eq. 3); --secure computes them by Protocol 1.",
        build=trainer_factory(name),
        plan=weighted_plan(base, name),
        accounted_as=base.name,
        secure=True,
        options=base.options,
        plan_options=base.plan_options,
        server_reads_owners=True,  # plaintext weights n_su / N_u; --secure hides them
        user_budgets=True,
    )


class PerUserClipping(BaseAlgorithm):
    """One of the four per-user-clipping algorithms, chosen by `name`."""

    def __init__(self, name: str) -> None:
        if name not in ("uldp-avg", "uldp-avg-w", "uldp-sgd", "uldp-sgd-w"):
            raise InvalidParameter(f"not a per-user clipping algorithm: {name!r}")
        self.name = name
        self.weighted = name.endswith("-w")
        self.sgd = name.startswith("uldp-sgd")
        # Protocol 1's server side: in process, set up at the first round; over Flower, the
        # engine sets the aggregator of the protocol's message rounds before round 1.
        self.secure: Callable[[list, np.ndarray | None, int], torch.Tensor] | None = None
        self.private_sampling = False

    def training(self, cfg: TrainConfig) -> LocalTraining:
        from ..per_user import LocalTraining

        return LocalTraining(1, 1.0, None) if self.sgd else cfg.local

    def plan_round(self, round: int, ctx: Context, cfg: TrainConfig, rng: np.random.Generator) -> RoundPlan:
        import numpy as np

        from . import faults
        from .base import RoundPlan, sample_users
        from .weighting import uniform_weights

        self.private_sampling = cfg.private_sampling
        if cfg.private_sampling:
            # The oblivious transfer draws the sample inside Protocol 1: the server never knows it,
            # so its plan marks every user (none is known to sit the round out).
            return RoundPlan(round, np.ones(ctx.n_users, dtype=bool), None)
        # Per-user budgets: user u with its own q_u (PULDP-AVG of the ULDP-FL authors' code).
        sampled = sample_users(ctx.n_users, cfg.user_q if ctx.user_q is None else ctx.user_q, rng)
        # -w: the weights come from the histogram, which only the weighting step may see.
        weights = (
            None
            if self.weighted
            else faults.weights(uniform_weights(ctx.n_silos, ctx.n_users), cfg.fault) * sampled[None, :]
        )
        return RoundPlan(round, sampled, weights)

    def silo_update(
        self,
        silo: SiloData,
        params: dict[str, torch.Tensor],
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
        rng: np.random.Generator,
    ) -> SiloDelta | SiloUserDeltas:
        import numpy as np
        import torch

        from .. import canaries
        from ..per_user import user_deltas
        from . import faults
        from .base import SiloDelta, SiloUserDeltas, clipping_factors, gaussian

        noise_rng, train_rng = rng.spawn(2)
        present = np.flatnonzero(np.bincount(silo.users, minlength=ctx.n_users) > 0)  # its own users
        # Silos skip users whose weight is 0; under Protocol 1 they cannot know who they are.
        users = present if (self.weighted and cfg.secure) else present[plan.sampled[present]]
        like = next(iter(params.values()))
        training = self.training(cfg)
        keys = train_rng.random((training.epochs, silo.size))
        # `uldp audit`'s canary users: Dirac rows, clipped, weighted and summed as every row.
        users, dirac = canaries.split_canaries(silo, users, cfg.clip, like)
        users, deltas = user_deltas(
            ctx.model,
            params,
            silo.x,
            silo.y,
            silo.users,
            users,
            keys,
            ctx.loss_fn,
            training,
            batched=cfg.batched,
        )
        factors = clipping_factors(deltas, cfg, silo.silo)
        # A Dirac row's norm is its one entry.
        dirac = dirac.scaled(clipping_factors(dirac.values.unsqueeze(1), cfg, silo.silo))
        std = faults.noise_std(per_user_noise_std(cfg, ctx.n_silos), cfg.fault)
        noise = gaussian(ctx.n_params, std, noise_rng, like)
        if self.weighted:
            return SiloUserDeltas(
                silo.silo, users, deltas.mul_(factors.unsqueeze(1)), noise, dirac if len(dirac) else None
            )
        # sum_u w_su * (clip factor_u * Delta_u): the factors fold into the weights.
        assert plan.weights is not None  # per-user clipping always plans weights
        w = torch.as_tensor(plan.weights[silo.silo, users], dtype=deltas.dtype, device=deltas.device)
        total = (w * factors) @ deltas + noise
        if len(dirac):
            weights = torch.as_tensor(
                plan.weights[silo.silo, dirac.users], dtype=deltas.dtype, device=deltas.device
            )
            dirac.add_sum_to(total, weights)
        return SiloDelta(silo.silo, total)

    def aggregate(
        self, params: dict[str, torch.Tensor], messages: list, plan: RoundPlan, ctx: Context, cfg: TrainConfig
    ) -> dict[str, torch.Tensor]:
        import torch

        from .base import apply_delta
        from .weighting import SecureWeighting, plaintext_weighted_sum

        if self.weighted and cfg.secure:
            if self.secure is None:  # in process: all parties of Protocol 1 here, set up once
                self.secure = SecureWeighting(
                    _counts(ctx),
                    ctx.n_params,
                    key_bits=cfg.key_bits,
                    test_keys=cfg.test_keys,
                    sampling=cfg.sampling_params() if cfg.private_sampling else None,
                )
            total = self.secure(messages, None if cfg.private_sampling else plan.sampled, plan.round)
        elif self.weighted:
            total = plaintext_weighted_sum(messages, _counts(ctx), plan.sampled, fault=cfg.fault)
        else:
            total = torch.stack([m.delta for m in messages]).sum(dim=0)
        # Algorithm 4 line 10 divides by the expected number of sampled users, q |U|; with a rate
        # per user that is sum_u q_u = mean(q_u) |U| (the reference's average_qC). Private
        # sampling's audited users sit the round out: (1 - a) q |U| take part on average.
        q = cfg.user_q if ctx.user_q is None else float(ctx.user_q.mean())
        if cfg.private_sampling:
            q *= 1 - cfg.audit_rate
        scale = cfg.global_lr / (q * ctx.n_users * ctx.n_silos)
        return apply_delta(params, total, scale)

    def account_flags(self, cfg: TrainConfig, n_silos: int) -> list[str]:
        flags = super().account_flags(cfg, n_silos)
        if cfg.private_sampling:
            flags.append(f"--private-sampling --sampling-slots {cfg.sampling_slots}")
        return flags

    def round_fields(self, plan: RoundPlan) -> dict[str, object]:
        """Who took part; under private sampling nobody knows (the field is left out)."""
        return {} if self.private_sampling else super().round_fields(plan)

    def reply_type(self, cfg: TrainConfig) -> type:
        from .base import SiloDelta, SiloUserDeltas

        return SiloUserDeltas if self.weighted else SiloDelta

    def run_assumptions(self, cfg: TrainConfig, n_silos: int) -> dict[str, str]:
        out = {
            "noise": (
                f"each silo adds N(0, sigma^2 C^2 / |S|), std {per_user_noise_std(cfg, n_silos):.4g}; "
                "weights sum to 1 over silos for every user, so a user moves the sum by <= C"
            )
        }
        if cfg.private_sampling:
            sampling = cfg.sampling_params()
            asked = cfg.requested_user_q
            rounded = (
                f" (--user-q {asked:g} rounded to the nearest m/P)"
                if asked is not None and asked != cfg.user_q
                else ""
            )
            out["user sampling"] = (
                f"private (ULDP-FL §4.1), q = {sampling.real}/{sampling.slots}{rounded}: m of P "
                "slots per user hold the real weight, the silos pick one by oblivious transfer with "
                "their shared seed, so no party knows who was sampled; the server's view is amplified "
                f"as the model's. The silos audit each user's slots with probability "
                f"{sampling.audit_rate:g} a round (audited users sit the round out: the update is "
                "divided by the expected (1 - a) q |U| |S|, and accounting at q is an upper bound)"
            )
        if self.weighted:
            out["weights"] = (
                "w = n_su / N_u (Eq. 3) through Protocol 1 (Paillier, blinding): no party "
                "learns another silo's n_su"
                if cfg.secure
                else "w = n_su / N_u (Eq. 3) computed in the clear: the server sees every n_su "
                "(use --secure for Protocol 1); the guarantee is unchanged"
            )
        return out


def _counts(ctx: Context) -> np.ndarray:
    """The histogram n_{s,u} the server weights with: the in-process Protocol 1 and plaintext
    weighting read it; a server that was not given it (a Flower silo, or --secure over Flower
    where the protocol's own server aggregates) must never get here."""
    if ctx.counts is None:
        raise RuntimeError("the weighting step needs the histogram n_su, which this party was not given")
    return ctx.counts
