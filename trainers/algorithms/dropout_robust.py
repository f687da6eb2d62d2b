"""`dp-fedavg-robust`: DP federated averaging robust to dropouts (Baek et al., IEEE Access 2021,
Algorithm 2; with `--secure`, Algorithm 3).

The participants are the silos (a hospital, a phone): each round the server Poisson-samples them
with probability q (line 11), each sampled participant i runs Algorithm 1 (E epochs of minibatch
SGD, its model kept within distance C of the global one after every step, line 11 of Algorithm 1)
and uploads M_i = w_i Delta_i + e_i with e_i ~ N(0, n_ref w_i sigma_ref^2 I), sigma_ref =
2 C z / n_ref (line 15; n_ref = n, the sampled weight sum, or n_0 in Algorithm 3, line 26), where
w_i = min(n_i / n_max, 1) (line 8; 1 without `--n-max`). Some participants drop out (a simulated
network: `trainers.dropouts`; on Flower also a silo that does not answer in time). The server
broadcasts n' = the survivors' weight sum; each survivor then sends its calibration share
e_i' = -e_i + N(0, n' w_i sigma'^2 I), sigma' = 2 C z / n' (lines 20-22), and the server moves
theta <- theta + eta_g (sum_i M_i + sum_i e_i') / n' (line 24; eta_g = 1 in the paper).
`--no-calibration` skips lines 20-22: the released average then carries multiplier
z sqrt(n' / n_ref) instead of z (§IV-B), the paper's problem.

The round is a sequence of message phases the server drives (`phased`), so the same object runs
in process and on Flower: `weight` once (Algorithm 3 line 14: each participant sends w_i), then
per round `keys` and `shares` (secure aggregation's setup, Algorithm 3 lines 13-21), `upload`
(line 16 / 27) and `calibrate` (lines 21-22 / 31-34: the calibration share and, under
`--secure`, the shares that unmask the sum). Under `--secure` the uploads travel through
`uldp.crypto.secagg` (`secure_upload.py`): the server reads only the sum of the survivors' M_i.

Accounting (`accountants.dropout.run_spend`): every released round is recorded with its realised weight
sums, and `spent` accounts the run so far exactly as `uldp dropout` accounts a round with those
sums: the released model (Poisson-subsampled at q) and the server (known participation). A round
that released nothing (nobody sampled, the sampled weight below n_0, fewer survivors than the
protocol needs) leaves the model as it was and adds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uldp.errors import InvalidParameter

from .registry import DROPOUT_OPTIONS, AlgorithmSpec
from .server import BaseAlgorithm

if TYPE_CHECKING:
    import numpy as np
    import torch

    from uldp.accountants.dropout.run_spend import ObservedRound

    from .base import Context, RoundPlan, SiloData, TrainConfig

NAME = "dp-fedavg-robust"
#: Per-coordinate bound on |M_i| for secure aggregation's fixed-point encoding, in noise standard
#: deviations beyond the clipping bound: a Gaussian coordinate passes 12 std with probability
#: 3.6e-33, never in any run.
NOISE_STDS = 12.0


def participant_weight(records: int, n_max: int | None) -> float:
    """w_i = min(n_i / n_max, 1) (Algorithm 2 line 8, `accountants.dropout.rounds.participant_weights`);
    1 for every participant without n_max (McMahan et al.'s unweighted average)."""
    from uldp.accountants.dropout.rounds import participant_weights

    return 1.0 if n_max is None else float(participant_weights([records], n_max)[0])


def share_std(cfg: TrainConfig, weight: float, weight_sum: float) -> float:
    """Std of the noise a participant of weight w draws for weight sum m: sqrt(m w (2 C z / m)^2)
    = 2 C z sqrt(w / m) (line 15 with m = n_ref; line 22 with m = n')."""
    return 2.0 * cfg.clip * cfg.sigma * (weight / weight_sum) ** 0.5


def upload_bound(cfg: TrainConfig, reference: float) -> float:
    """The bound on every coordinate of an upload M_i that secure aggregation's fixed-point
    encoding needs: |M_i| <= |w_i Delta_i| + |e_i| <= C + NOISE_STDS std(e_i) (w_i <= 1)."""
    return cfg.clip + NOISE_STDS * share_std(cfg, 1.0, reference)


class DropoutRobust(BaseAlgorithm):
    """The server's rounds and the participants' updates of Algorithms 2-3 (module docstring)."""

    name = NAME
    phased = True

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.silos: Any = None  # runner.Silos, bound by the round loop
        self.weights: np.ndarray | None = None  # w_i of every participant, from phase `weight`
        self.schedule: Any = None  # trainers.dropouts.DropoutSchedule, read on first use
        self.observed: list[ObservedRound] = []  # the released rounds, for `spent`
        self._drops: dict[int, np.ndarray] = {}
        self._fields: dict[int, dict[str, object]] = {}

    # --- the server ---------------------------------------------------------------------------
    def bind_silos(self, silos: Any) -> None:
        self.silos = silos

    def plan_round(self, round: int, ctx: Context, cfg: TrainConfig, rng: np.random.Generator) -> RoundPlan:
        import numpy as np

        from ..dropouts import draw_dropouts, read_schedule
        from .base import RoundPlan, sample_users

        if self.weights is None:
            self.weights = self._ask_weights(ctx, cfg)
        sampled = sample_users(ctx.n_silos, cfg.user_q, rng)  # line 11: U^t, participants at rate q
        if cfg.dropout_schedule is not None:
            if self.schedule is None:
                self.schedule = read_schedule(cfg.dropout_schedule, ctx.n_silos, cfg.rounds)
            drops = np.where(sampled, self.schedule.of_round(round, ctx.n_silos), 0).astype(np.int8)
        else:
            drops = draw_dropouts(sampled, cfg.dropout, cfg.dropout_at, rng)
        self._drops[round] = drops
        # Users are not sampled: the participants (silos) are. `sampled` users stay all False.
        return RoundPlan(round, np.zeros(ctx.n_users, dtype=bool), None, sampled)

    def _ask_weights(self, ctx: Context, cfg: TrainConfig) -> np.ndarray:
        """Every participant's w_i (Algorithm 3 line 14), checked; n_0 against what can be sampled."""
        import numpy as np

        replies = self.silos.phase(self, 0, "weight", {s: {} for s in range(ctx.n_silos)}, ctx, cfg)
        missing = sorted(set(range(ctx.n_silos)) - set(replies))
        if missing:
            raise InvalidParameter(f"participants {missing} did not send their weight before round 1")
        weights = np.array(
            [float(np.asarray(replies[s]["weight"]).reshape(-1)[0]) for s in range(ctx.n_silos)]
        )
        if not np.all((weights > 0) & (weights <= 1)):
            raise InvalidParameter("every participant's weight w_i = min(n_i / n_max, 1) must be in (0, 1]")
        if cfg.threshold is not None and cfg.threshold > ctx.n_silos:
            raise InvalidParameter(
                f"--threshold k = {cfg.threshold} is above the {ctx.n_silos} participants: Shamir's "
                "(k, n) sharing could never be reconstructed; give k in [2, n]"
            )
        expected = cfg.user_q * float(weights.sum())
        if cfg.min_weight_sum is not None and cfg.min_weight_sum > expected:
            raise InvalidParameter(
                f"--min-weight-sum n_0 = {cfg.min_weight_sum:g} is above the expected sampled weight "
                f"q x sum w_i = {expected:.4g}: Algorithm 3 line 17 would refuse most rounds; give "
                f"n_0 <= {expected:.4g}"
            )
        return weights

    def aggregate(
        self, params: dict[str, torch.Tensor], messages: list, plan: RoundPlan, ctx: Context, cfg: TrainConfig
    ) -> dict[str, torch.Tensor]:
        import numpy as np
        import torch

        from uldp.accountants.dropout.rounds import DropoutRound
        from uldp.accountants.dropout.run_spend import ObservedRound

        from ..dropouts import AT_CALIBRATION, AT_UPLOAD
        from ..per_user import flat_parameters
        from .base import apply_delta

        assert self.weights is not None and plan.silos is not None
        t, w = plan.round, self.weights
        drops = self._drops.pop(t)
        sampled = [int(s) for s in np.flatnonzero(plan.silos)]
        n = float(w[sampled].sum())
        fields: dict[str, object] = {
            "participants": len(sampled),
            "dropped_upload": 0,
            "dropped_calibration": 0,
            "released": False,
            "weight_sum": n,
            "alive_weight_sum": None,
            "reference": None,
            "calibration_dropped_weight": None,
            "largest_weight": None,
            "calibrated": cfg.calibration,
            "model_multiplier": None,
            "server_multiplier": None,
            "note": "",
        }
        self._fields[t] = fields

        def skip(why: str) -> dict[str, torch.Tensor]:
            fields["note"] = why
            return params  # nothing released this round

        if not sampled:
            return skip("no participant sampled")
        n0 = cfg.min_weight_sum
        if n0 is not None and n < n0:
            return skip(f"sampled weight below n_0 = {n0:g} (Algorithm 3 line 17)")
        reference = n if n0 is None else float(n0)
        secure = None
        if cfg.secure:
            from .secure_upload import SecureRound

            secure = SecureRound(self, t, sampled, w, ctx, cfg, upload_bound(cfg, reference))
            refused = secure.setup()
            if refused:
                return skip(refused)
        flat = flat_parameters(params).detach().cpu().numpy()
        uploading = [s for s in sampled if drops[s] != AT_UPLOAD]
        payloads = {s: {"params": flat, "reference": np.array([reference])} for s in uploading}
        if secure is not None:
            secure.add_upload_payloads(payloads)
        replies = self.silos.phase(self, t, "upload", payloads, ctx, cfg)
        alive = sorted(replies)
        fields["dropped_upload"] = len(sampled) - len(alive)
        if not alive:
            return skip("every sampled participant dropped out before its upload")
        alive_weight = float(w[alive].sum())
        fields["alive_weight_sum"] = alive_weight
        if n0 is not None and alive_weight < n0:
            return skip(f"survivors' weight below n_0 = {n0:g} (Algorithm 3 assumes n' >= n_0)")
        needs_second = cfg.calibration or secure is not None
        second: dict[int, dict[str, np.ndarray]] = {}
        if needs_second:
            asked = [s for s in alive if drops[s] != AT_CALIBRATION]
            payloads = {s: {"alive_weight_sum": np.array([alive_weight])} for s in asked}
            if secure is not None:
                refused = secure.add_unmask_payloads(replies, payloads)
                if refused:
                    return skip(refused)
            second = self.silos.phase(self, t, "calibrate", payloads, ctx, cfg)
        else:
            second = {s: {} for s in alive}
        fields["dropped_calibration"] = len(alive) - len(second)
        if secure is not None:
            total, refused = secure.unmasked_sum(second)
            if refused:
                return skip(refused)
        else:
            total = np.sum([np.asarray(replies[s]["message"], dtype=np.float64) for s in alive], axis=0)
        lost = [s for s in alive if s not in second] if cfg.calibration else []  # before their line 22
        for s in sorted(second) if cfg.calibration else []:
            total = total + np.asarray(second[s]["calibration"], dtype=np.float64)
        rd = DropoutRound(n, alive_weight, reference, calibration_dropped=float(w[lost].sum()))
        observed = ObservedRound(rd, cfg.calibration, float(w[alive].max()))
        self.observed.append(observed)
        fields.update(
            released=True,
            reference=reference,
            calibration_dropped_weight=rd.calibration_dropped,
            largest_weight=observed.largest_weight,
            model_multiplier=observed.model_multiplier(cfg.sigma),
            server_multiplier=observed.server_multiplier(cfg.sigma, cfg.secure),
        )
        like = next(iter(params.values()))
        step = torch.as_tensor(total / alive_weight, dtype=like.dtype, device=like.device)
        return apply_delta(params, step, cfg.global_lr)  # line 24: theta + (sum M_i + sum e_i') / n'

    def round_fields(self, plan: RoundPlan) -> dict[str, object]:
        return dict(self._fields.pop(plan.round))

    def spent(self, cfg: TrainConfig) -> tuple[float, float | None]:
        from uldp.accountants.dropout.run_spend import run_epsilons

        return run_epsilons(self.observed, cfg.sigma, cfg.user_q, cfg.delta, secure=cfg.secure)

    def restore(self, history: list[dict]) -> None:
        from uldp.accountants.dropout.rounds import DropoutRound
        from uldp.accountants.dropout.run_spend import ObservedRound

        self.observed = [
            ObservedRound(
                DropoutRound(
                    row["weight_sum"],
                    row["alive_weight_sum"],
                    row["reference"],
                    calibration_dropped=row["calibration_dropped_weight"],
                ),
                bool(row["calibrated"]),
                row["largest_weight"],
            )
            for row in history
            if row.get("released")
        ]

    def silo_update(
        self,
        silo: SiloData,
        params: dict[str, torch.Tensor],
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
        rng: np.random.Generator,
    ) -> Any:
        """Never called: a phased round's silos answer `silo_phase` (the round loop knows)."""
        raise InvalidParameter(f"{NAME}'s rounds are phases: its silos answer silo_phase, not silo_update")

    # --- a participant --------------------------------------------------------------------------
    def silo_phase(
        self,
        silo: SiloData,
        name: str,
        round: int,
        payload: dict[str, np.ndarray],
        store: dict[str, np.ndarray],
        ctx: Context,
        cfg: TrainConfig,
        rng: np.random.Generator,
    ) -> dict[str, np.ndarray]:
        import numpy as np

        weight = participant_weight(silo.size, cfg.n_max)
        if name == "weight":
            return {"weight": np.array([weight])}
        if name in ("keys", "shares"):
            from .secure_upload import participant_step

            return participant_step(name, silo.silo, round, payload, store, cfg)
        if name == "upload":
            reference = _scalar(payload, "reference")
            delta = self._local_update(silo, payload["params"], ctx, cfg, rng)
            noise = rng.normal(0.0, share_std(cfg, weight, reference), size=delta.shape)  # line 15
            store["noise"] = noise
            store["round"] = np.array([round])
            message = weight * delta + noise
            if cfg.secure:
                from .secure_upload import participant_masked_upload

                return participant_masked_upload(silo.silo, round, message, payload, store, cfg)
            return {"message": message}
        if name == "calibrate":
            if "round" not in store or int(store["round"][0]) != round:
                raise InvalidParameter(
                    f"participant {silo.silo} was asked to calibrate round {round} it did not upload"
                )
            out: dict[str, np.ndarray] = {}
            if cfg.calibration:  # line 22: e_i' = -e_i + N(0, n' w_i sigma'^2 I)
                alive = _scalar(payload, "alive_weight_sum")
                fresh = rng.normal(0.0, share_std(cfg, weight, alive), size=store["noise"].shape)
                out["calibration"] = fresh - store["noise"]
            if cfg.secure:
                from .secure_upload import participant_unmask

                out.update(participant_unmask(silo.silo, round, payload, store, cfg))
            store.pop("noise", None)
            return out
        raise InvalidParameter(f"{NAME} has no phase {name!r}")

    def _local_update(
        self, silo: SiloData, flat: np.ndarray, ctx: Context, cfg: TrainConfig, rng: np.random.Generator
    ) -> np.ndarray:
        """Algorithm 1: E epochs of minibatch SGD from theta, shuffled per epoch, the model put back
        within distance C of theta after every step (line 11); returns Delta = w - theta."""
        import numpy as np
        import torch
        from torch.func import functional_call

        like = {k: v.detach() for k, v in ctx.model.named_parameters()}
        first = next(iter(like.values()))
        theta = torch.as_tensor(np.asarray(flat), dtype=first.dtype, device=first.device)
        if theta.numel() != ctx.n_params:
            raise InvalidParameter(
                f"the global model has {theta.numel()} parameters, expected {ctx.n_params}"
            )
        shapes = [(k, v.shape, v.numel()) for k, v in like.items()]
        local = theta.clone()
        n = silo.size
        for _ in range(cfg.local_epochs):
            order = rng.permutation(n)
            for start in range(0, n, cfg.batch_size):
                idx = torch.as_tensor(order[start : start + cfg.batch_size])
                current = _unflatten(local, shapes)
                for value in current.values():
                    value.requires_grad_(True)
                outputs = functional_call(ctx.model, current, (silo.x[idx],))
                loss = ctx.loss_fn(
                    outputs, silo.y[idx], torch.ones(len(idx), dtype=outputs.dtype, device=outputs.device)
                )
                grads = torch.autograd.grad(loss, list(current.values()))
                local = local - cfg.lr * torch.cat([g.reshape(-1) for g in grads]).detach()
                diff = local - theta
                norm = float(torch.linalg.vector_norm(diff))
                if norm > cfg.clip:  # w <- theta + Clip(w - theta)
                    local = theta + diff * (cfg.clip / norm)
        return (local - theta).double().cpu().numpy()

    # --- what the run reports ---------------------------------------------------------------------
    def run_assumptions(self, cfg: TrainConfig, n_silos: int) -> dict[str, str]:
        if cfg.secure:
            algorithm = "Algorithm 3 (secure aggregation)"
        elif cfg.min_weight_sum is not None:
            algorithm = "Algorithm 3's noise shares for n_0, uploads in the clear"
        else:
            algorithm = "Algorithm 2"
        weights = (
            "w_i = 1 for every participant (McMahan et al.)"
            if cfg.n_max is None
            else f"w_i = min(n_i / {cfg.n_max}, 1) (line 8)"
        )
        reference = (
            "n, the sampled weight sum" if cfg.min_weight_sum is None else f"n_0 = {cfg.min_weight_sum:g}"
        )
        if cfg.dropout_schedule is not None:
            dropouts = f"replayed from {cfg.dropout_schedule}"
        elif cfg.dropout > 0:
            dropouts = (
                f"each sampled participant lost with probability {cfg.dropout:g}, before its {cfg.dropout_at}"
            )
        else:
            dropouts = "none simulated"
        # at q = 1 every round is a plain Gaussian: `spent` prints their exact composition
        exact = cfg.user_q >= 1
        accounting = "exact Gaussian composition" if exact else "RDP accountant, improved conversion"
        out = {
            "algorithm": (
                f"{NAME}: Baek et al. 2021, {algorithm}; the {n_silos} silos are the participants, "
                f"each sampled with probability q = {cfg.user_q:g} per round (Poisson); {weights}; each "
                f"clips its update to C = {cfg.clip:g} (Algorithm 1) and draws its noise share for "
                f"n_ref = {reference}"
            ),
            "noise": (
                "e_i ~ N(0, 4 C^2 z^2 w_i / n_ref) per coordinate (line 15)"
                + (
                    "; calibration: each survivor sends -e_i + N(0, 4 C^2 z^2 w_i / n') (line 22)"
                    if cfg.calibration
                    else "; NO calibration (--no-calibration): the survivors' shares alone stay, multiplier "
                    "z sqrt(n'/n_ref) (§IV-B)"
                )
            ),
            "neighbouring": (
                "one participant's whole data replaced by another's of the same weight, weight sums public "
                "(Propositions 1-2): sensitivity 2C/n' of the weighted average (weights <= 1); every user "
                "whose records sit at one participant is protected at this level, a user with records at "
                "g participants as a group of g (not accounted here)"
            ),
            "dropouts": (
                f"{dropouts}; not data-dependent; on Flower a participant that does not answer in time "
                "is a dropout too; each round's realised weight sums (n, n', public) are accounted"
            ),
            "epsilon": (
                f"participant level, {accounting}, delta = {cfg.delta:g}, from the "
                "rounds actually released (accountants/dropout/run_spend.py, the algebra of `uldp dropout`): "
                "epsilon (model): each released round one Poisson-subsampled Gaussian at rate q with its "
                "own multiplier; epsilon (server): known participation (it draws the sample), "
                + (
                    "holding the aggregate and the calibration shares"
                    if cfg.secure
                    else "reading each participant's message M_i = w_i Delta_i + e_i alone (no secure "
                    "aggregation: --secure hides them), the heaviest participant's figure"
                )
                + "; rounds that released nothing add nothing; "
                + (
                    "silo-q = 1: every round is a plain Gaussian, so both figures are the exact epsilon "
                    "of their composition (mu-GDP, mu = sqrt(sum_t 1/m_t^2), Balle & Wang 2018 Thm. 8; "
                    "accountants/tight/gaussian.py), below the RDP accountant's"
                    if exact
                    else "orders: the 375 default orders, refined over real orders while the rounds "
                    "have at most 4 distinct multipliers (beyond, the grid's bound: "
                    "accountants/dropout/run_spend.py)"
                )
                + "; an upper bound after each round"
            ),
        }
        if cfg.secure:
            k = "a majority of each round's sample" if cfg.threshold is None else f"k = {cfg.threshold}"
            out["aggregation"] = (
                f"secure aggregation (Algorithm 3 lines 13-38; uldp.crypto.secagg: X25519, Shamir (k, n) "
                f"with {k}, ChaCha20-Poly1305 shares, AES-256-CTR masks): the server reads only the sum "
                "of the survivors' messages and the calibration shares"
            )
        else:
            out["aggregation"] = "in the clear: the server reads every participant's message (see epsilon)"
        secure_view = "and the server's" if cfg.secure else "(its server view assumes secure aggregation)"
        out["check"] = (
            f"`uldp dropout --sigma {cfg.sigma:g} --silo-q {cfg.user_q:g} --silos-per-round N --dropout R "
            f"--rounds {cfg.rounds}` prints the released model's epsilon {secure_view} of "
            f"{cfg.rounds} rounds that each lost a share R of N unit-weight participants; this run's "
            "rounds each lost what their "
            "rows say (n, n' in --metrics), and what is printed is the composition of those rounds"
        )
        return out

    def summary_fields(self) -> dict[str, object]:
        from uldp.accountants.dropout.accounting import dropout_epsilon

        cfg = self.cfg
        return {
            "released_rounds": len(self.observed),
            "target_epsilon": dropout_epsilon(cfg.sigma, cfg.user_q, cfg.rounds, cfg.delta),
            "calibration": cfg.calibration,
            "secure": cfg.secure,
        }


def _scalar(payload: dict[str, np.ndarray], key: str) -> float:
    import numpy as np

    if key not in payload:
        raise InvalidParameter(f"the phase message has no {key}")
    value = np.asarray(payload[key], dtype=np.float64).reshape(-1)
    if value.size != 1 or not np.isfinite(value[0]) or value[0] <= 0:
        raise InvalidParameter(f"the phase message's {key} must be one positive number")
    return float(value[0])


def _unflatten(flat: torch.Tensor, shapes: list[tuple[str, Any, int]]) -> dict[str, torch.Tensor]:
    out, start = {}, 0
    for name, shape, size in shapes:
        out[name] = flat[start : start + size].view(shape).clone()
        start += size
    return out


def build(cfg: TrainConfig, silos: list[SiloData], task: str) -> DropoutRobust:
    if cfg.secure:
        from .secure_upload import check_available

        check_available()  # fail before training, not in round 1
    return DropoutRobust(cfg)


SPEC = AlgorithmSpec(
    name=NAME,
    help="DP-FedAvg robust to dropouts (Baek et al. 2021, Algorithm 2; --secure: Algorithm 3): "
    "silos are participants, distributed noise re-calibrated after dropouts.",
    build=build,
    secure=True,
    observed=True,
    # The dp-fedavg-robust options, and Algorithm 1's local SGD (no per-user batch, no group k).
    options=frozenset(("sigma", "clip", "lr", "global_lr", "local_epochs", "batch_size", "silo_q"))
    | DROPOUT_OPTIONS,
)
