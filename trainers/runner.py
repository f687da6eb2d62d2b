"""The round loop of `uldp train`: plan, silo updates, aggregation, evaluation, accounting.

Every round t (ULDP-FL §3; Algorithm 4 for sampling) the server plans the round, each silo
sends one message, the server aggregates them into x_{t+1}; then the run records the test loss,
the task metric (accuracy, ROC-AUC or C-index), the user-level epsilon spent after t rounds and
the elapsed time. The epsilon is computed exactly as `uldp account` does for the same settings:
`algorithms.plan_algorithm` compiles the algorithm into the mechanism it releases (the registered
spec's plan, fed the run's settings by the trainer's `plan_params`),
`accountants.account.account_plan` accounts it, as `uldp account` does.

Randomness: round t draws everything that protects privacy (user sampling, record sampling,
shuffles, noise) from generators seeded by (entropy, t) (round_rngs.py), uldp-group's flags from
(entropy, 7, 1); the entropy is 128 fresh bits from `secrets` for every run unless `noise_seed`
fixes it for an experiment (then anyone who knows it can subtract the noise, and the assumptions
say so). The data allocation and the model's initial weights (`torch.manual_seed(seed)`) are
public choices and follow `seed`. A checkpoint after round t (checkpoint_file.py) holds all a
resumed run needs to continue as the uninterrupted run would: the parameters, the history, the
entropy (so a checkpoint must be kept as secret as the noise) and the torch RNG state.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from uldp.accountants.account import account_plan
from uldp.accountants.plan import Plan
from uldp.errors import DataError, InvalidParameter

from .algorithms import (
    Algorithm,
    Context,
    RoundPlan,
    SiloData,
    TrainConfig,
    get_algorithm,
    make_algorithm,
    plan_algorithm,
    user_budget_names,
)
from .atomic import atomic_write
from .checkpoint_file import CHECKPOINT_NAME, read_checkpoint
from .checkpoint_integrity import DIGEST_KEY, UNVERIFIED, content_sha256
from .data_key import data_key
from .metrics_file import MetricsFile
from .models import LossFn, parameter_count
from .own_model import MetricFn, ModelSpec, build_checked, resolve_model
from .personal_accounting import PersonalAccounting
from .round_rngs import phase_rng, round_rngs
from .run_record import kind_of, run_record, write_record
from .uninterrupted import uninterrupted

EVAL_CHUNK = 4096


class TrainingDiverged(InvalidParameter):
    """The model's parameters or test loss stopped being finite in round `round`: every later
    round would train on NaN, so the run stops there and names the settings to lower."""

    def __init__(self, round: int, loss: float, options: frozenset[str], user_q: float = 1.0) -> None:
        self.round = round
        knobs = [f"--{name.replace('_', '-')}" for name in ("lr", "global_lr", "clip") if name in options]
        lower = " or ".join([", ".join(knobs[:-1]), knobs[-1]] if len(knobs) > 1 else knobs or ["--lr"])
        if user_q < 1:  # the server step divides by q |U| |S|: a tiny q magnifies everything
            # dp-fedavg-robust samples silos at that rate (its --silo-q); the others sample users.
            lower += f" (or raise {'--silo-q' if 'silo_q' in options else '--user-q'})"
        kept = (
            "no round was completed"
            if round == 1
            else f"--checkpoint and --metrics, if given, keep round {round - 1}"
        )
        what = "parameters" if math.isfinite(loss) else f"test loss ({loss})"
        super().__init__(
            f"training diverged in round {round}: the model's {what} stopped being finite; lower "
            f"{lower} (round {round} was not released; {kept})"
        )


def _finite(params: dict[str, torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in params.values())


@dataclass
class TrainResult:
    """A finished (or interrupted) run: per-round history, final parameters, what it assumed."""

    history: list[dict]
    params: dict[str, torch.Tensor]
    summary: dict
    assumptions: dict = field(default_factory=dict)
    model: torch.nn.Module | None = None  # a fresh model with the final parameters loaded


def build_silos(data, device: str = "cpu", dtype: torch.dtype = torch.float32) -> list[SiloData]:
    """Each silo's training records as tensors on `device`."""
    silos = []
    label_dtype = dtype if data.task == "survival" else torch.long
    for s in range(data.n_silos):
        idx = np.flatnonzero(data.silo_train == s)
        silos.append(
            SiloData(
                silo=s,
                x=torch.as_tensor(data.x_train[idx], dtype=dtype, device=device),
                y=torch.as_tensor(data.y_train[idx], dtype=label_dtype, device=device),
                users=np.asarray(data.user_train[idx], dtype=np.int64),
                n_users=data.n_users,
                q=None if data.record_q is None else np.asarray(data.record_q[idx], dtype=np.float64),
            )
        )
    return silos


class Silos(Protocol):
    """Where the silos' updates run: in this process (`LocalSilos`) or at separate parties
    (`flower.FlowerSilos`). The round loop (`run`) is the same for both."""

    def prepare(self, cfg: TrainConfig, task: str, noise_fixed: bool) -> tuple[Algorithm, np.ndarray | None]:
        """The server's algorithm object for this run, and the histogram n_{s,u} if the server may
        know it (None otherwise); called once, before round 1 (or the first resumed round)."""
        ...

    def updates(
        self,
        algorithm: Algorithm,
        round: int,
        params: dict[str, torch.Tensor],
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
    ) -> list:
        """Every silo's message for round `round`, in silo order."""
        ...

    def assumptions(self, cfg: TrainConfig) -> dict[str, str]:
        """What the run's assumptions say of where the silos ran and what reached the server."""
        ...

    def phase(
        self,
        algorithm: Algorithm,
        round: int,
        name: str,
        payloads: dict[int, dict[str, np.ndarray]],
        ctx: Context,
        cfg: TrainConfig,
    ) -> dict[int, dict[str, np.ndarray]]:
        """Phase `name` of round `round` at the silos `payloads` names (a phased algorithm's step):
        each answers `algorithm.silo_phase`; a silo that does not answer in time is left out of
        the result (to a phased algorithm, a dropout)."""
        ...


class LocalSilos:
    """Every silo in this process: silo s's update draws from round_rngs(entropy, t)[1][s]."""

    def __init__(self, silos: list[SiloData], counts: np.ndarray) -> None:
        self.silos = silos
        self.counts = counts
        self.stores: dict[int, dict[str, np.ndarray]] = {}  # each silo's keepsakes between phases

    def prepare(self, cfg: TrainConfig, task: str, noise_fixed: bool) -> tuple[Algorithm, np.ndarray | None]:
        return make_algorithm(cfg, self.silos, task), self.counts

    def updates(
        self,
        algorithm: Algorithm,
        round: int,
        params: dict[str, torch.Tensor],
        plan: RoundPlan,
        ctx: Context,
        cfg: TrainConfig,
    ) -> list:
        assert cfg.noise_seed is not None
        _, silo_rngs = round_rngs(cfg.noise_seed, round, len(self.silos))
        return [
            algorithm.silo_update(s, params, plan, ctx, cfg, rng) for s, rng in zip(self.silos, silo_rngs)
        ]

    def assumptions(self, cfg: TrainConfig) -> dict[str, str]:
        return {}  # `_assumptions` describes an in-process run by default

    def phase(
        self,
        algorithm: Algorithm,
        round: int,
        name: str,
        payloads: dict[int, dict[str, np.ndarray]],
        ctx: Context,
        cfg: TrainConfig,
    ) -> dict[int, dict[str, np.ndarray]]:
        assert cfg.noise_seed is not None
        return {
            s: algorithm.silo_phase(
                self.silos[s],
                name,
                round,
                payload,
                self.stores.setdefault(s, {}),
                ctx,
                cfg,
                phase_rng(cfg.noise_seed, round, s, name),
            )
            for s, payload in payloads.items()
        }


def accounting_plan(cfg: TrainConfig, rounds: int, n_silos: int, algorithm: Algorithm) -> Plan | None:
    """The accountants' description of `rounds` rounds of this run; None if not private."""
    spec = get_algorithm(cfg.algo)
    if not spec.private:
        return None
    return plan_algorithm(spec.accounted_as or spec.name, **algorithm.plan_params(cfg, rounds, n_silos))


def user_epsilon(plan: Plan | None, delta: float) -> float:
    """User-level epsilon of `plan` at `delta` by RDP, as `uldp account` reports it."""
    return user_epsilons(plan, delta)[0]


def user_epsilons(
    plan: Plan | None, delta: float, *, private_sampling: bool = False
) -> tuple[float, float | None]:
    """(released model's, server's) user-level epsilon of `plan` at `delta` by RDP.

    With user sampling (q < 1) the released model enjoys amplification by sub-sampling, but the
    server that draws the sample knows who took part, so against it there is none (ULDP-FL
    Remark 1; `accountants.account.account_plan`'s "server view"), unless `private_sampling`
    hid the sample from it (§4.1): then both are the amplified figure. The second value is None
    when there is no user sampling or the algorithm has no such view.
    """
    if plan is None:
        return math.inf, None
    rows = account_plan(plan, delta=delta, server_view=True, private_sampling=private_sampling)
    server = next((g.epsilon for g in rows if g.method == "server view"), None)
    return rows[0].epsilon, server


def account_command(cfg: TrainConfig, rounds: int, n_silos: int, algorithm: Algorithm) -> str | None:
    """The `uldp account` command line that prints the same epsilon."""
    spec = get_algorithm(cfg.algo)
    if not spec.private:
        return None
    # A `-w` variant is accepted by `uldp account` under its own name (the same numbers as its
    # base algorithm's, with a note), so the check names the algorithm the user trained.
    parts = [
        f"uldp account --algo {cfg.algo} --sigma {cfg.sigma:g} --rounds {rounds}",
        f"--delta {cfg.delta:g}",
        *algorithm.account_flags(cfg, n_silos),
    ]
    return " ".join(parts)


def evaluate(
    model, params, x: torch.Tensor, y: torch.Tensor, loss_fn: LossFn, metric_fn: MetricFn
) -> tuple[float, float]:
    """Test loss (the training loss over all test records) and the metric."""
    from torch.func import functional_call

    if len(x) == 0:
        return math.nan, math.nan
    with torch.no_grad():
        outputs = torch.cat(
            [functional_call(model, params, (x[i : i + EVAL_CHUNK],)) for i in range(0, len(x), EVAL_CHUNK)]
        )
        loss = loss_fn(outputs, y, torch.ones(len(x), dtype=outputs.dtype, device=outputs.device))
    return float(loss), metric_fn(outputs.double().cpu().numpy(), y.cpu().numpy())


def _data_assumption(data) -> dict[str, str]:
    """The assumptions' first line: the data and its source, SYNTHETIC said where the source does
    not say it already."""
    marked = not data.synthetic or "synthetic" in data.source.lower()
    return {"data": f"{data.name}: {data.source}" + ("" if marked else " (SYNTHETIC)")}


def _assumptions(
    cfg: TrainConfig,
    data,
    plan: Plan | None,
    algorithm: Algorithm,
    n_silos: int,
    noise_fixed: bool,
    where: dict[str, str] | None = None,
) -> dict:
    out = _data_assumption(data)
    if plan is None:
        out["privacy"] = "none: default is non-private FedAVG; epsilon is unbounded (JSON null)"
        out.update({k: v for k, v in (where or {}).items() if k == "engine"})
        return out
    out.update(plan.assumptions)
    out["randomness"] = (
        f"noise, user and record sampling from --noise-seed {cfg.noise_seed}: reproducible, and NOT "
        "private against anyone who knows the seed (experiments only)"
        if noise_fixed
        else "noise, user and record sampling from 128 fresh bits of OS entropy (secrets); data "
        f"allocation and the initial model from --seed {cfg.seed}; a checkpoint holds the noise "
        "entropy: keep it as secret as the noise"
    )
    if cfg.private_sampling:
        out["randomness"] += (
            "; the user sample is not drawn from it: the server's slots and the silos' seed R of "
            "Protocol 1 (fresh OS entropy every run) draw it by oblivious transfer"
        )
    if not cfg.secure:
        out["aggregation"] = (
            "in the clear in this process: epsilon covers the aggregate and the "
            "released model; the paper assumes secure aggregation, without which "
            "a server sees each silo's message (and, for -w, each user's clipped "
            "delta); --secure runs Protocol 1 for the -w weights"
        )
    out["epsilon"] = (
        f"user level, RDP accountant, improved conversion (Lemma 2), delta = {cfg.delta:g}; "
        "an upper bound after each round"
    )
    out.update(where or {})  # where the silos ran, and what crossed the wire
    out.update(algorithm.run_assumptions(cfg, n_silos))  # what only the run knows: noise std, weights
    command = account_command(cfg, cfg.rounds, n_silos, algorithm)
    out["check"] = f"`{command}` gives the final epsilon"
    return out


def _observed_assumptions(
    cfg: TrainConfig, data, algorithm: Algorithm, noise_fixed: bool, where: dict[str, str] | None
) -> dict:
    """What a run accounted from its rounds (an `observed` algorithm) assumes: its own
    `run_assumptions` say what was released and how it is accounted."""
    out = _data_assumption(data)
    out.update(algorithm.run_assumptions(cfg, data.n_silos))
    out["randomness"] = (
        f"noise, sampling and simulated dropouts from --noise-seed {cfg.noise_seed}: reproducible, "
        "and NOT private against anyone who knows the seed (experiments only)"
        if noise_fixed
        else "noise, sampling and simulated dropouts from 128 fresh bits of OS entropy (secrets); "
        f"data allocation and the initial model from --seed {cfg.seed}; a checkpoint holds the "
        "noise entropy: keep it as secret as the noise"
    )
    out.update(where or {})
    return out


def _atomic_save(obj, path: Path) -> None:
    """Save `obj` and its content digest to `path` in one fsynced rename (file and directory), like
    every output: a crash or a signal leaves the previous round's checkpoint whole
    (uldp.trainers.atomic), with the digest of that round (uldp.trainers.checkpoint_integrity)."""
    obj = {**obj, DIGEST_KEY: content_sha256(obj)}  # in the same file: one rename writes both
    atomic_write(path, lambda handle: torch.save(obj, handle), mode=0o600)


def _comparable(cfg: TrainConfig) -> dict:
    # Rounds may grow on resume (continue a finished run for longer); nothing else may change.
    out = dataclasses.asdict(cfg)
    for key in ("rounds", "batched", "noise_seed"):  # the entropy is checked on its own
        out.pop(key)
    return out


ENGINES = ("local", "flower")


def train(
    data,
    cfg: TrainConfig,
    *,
    model: Any = None,
    loss: Any = None,
    metric: Any = None,
    model_name: str | None = None,
    device: str = "cpu",
    metrics_path: str | os.PathLike | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    overwrite: bool = False,
    on_round: Callable[[dict], None] | None = None,
    engine: str = "local",
    on_stage: Callable[[str], None] | None = None,
) -> TrainResult:
    """Run `cfg.rounds` rounds of `cfg.algo` on `data` (a trainers.data.FederatedData).

    `engine` "local" runs every silo in this process; "flower" runs each silo as a separate
    party (a Flower ClientApp on its own SuperNode) in Flower's simulation engine, with the
    same algorithm objects and the same round loop (`run`), so with a fixed --noise-seed both
    give the same rounds (trainers/flower); `on_stage(text)` hears its start-up's stages (Ray,
    the ClientApps, Protocol 1's keys) and its summary adds `startup_s`, the seconds before round 1.

    A checkpoint directory that already holds a checkpoint is continued with `resume` or replaced
    with `overwrite`; with neither, `InvalidParameter`: a run must not silently destroy another's.
    `on_round(row)` is called after every completed round, once the checkpoint (if any) is saved,
    so a caller interrupted after it may resume from that round; Ctrl-C, SIGTERM or SIGHUP during
    that commit (metrics row, checkpoint, on_round) is delivered after it (`uninterrupted`).

    `model`, `loss` and `metric` are what `own_model.resolve_model` takes (a built-in name, a
    reference `FILE.py:NAME`, a factory, an nn.Module; None: the data's own); `model_name` is
    the older name of `model`. The result's `model` is a fresh model with the final parameters.
    """
    spec = resolve_model(model if model is not None else model_name, data=data, loss=loss, metric=metric)
    options: dict[str, Any] = dict(
        model=spec,
        device=device,
        metrics_path=metrics_path,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        overwrite=overwrite,
        on_round=on_round,
    )
    if engine == "flower":
        from .flower.deployment import current_grid, deploy
        from .flower.simulation import simulate

        grid = current_grid()  # inside a deployed ServerApp (uldp.cli.flower_app)
        # Flower's engines are handed the round loop rather than import it: trainers/flower stays below it.
        if grid is None:
            return simulate(data, cfg, run, on_stage=on_stage, **options)
        return deploy(data, cfg, grid, run, on_stage=on_stage, **options)
    if engine != "local":
        raise InvalidParameter(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    return run(data, LocalSilos(build_silos(data, device), data.user_silo_counts()), cfg, **options)


def run(
    data,
    silos: Silos,
    cfg: TrainConfig,
    *,
    model: Any = None,
    loss: Any = None,
    metric: Any = None,
    model_name: str | None = None,
    device: str = "cpu",
    metrics_path: str | os.PathLike | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    overwrite: bool = False,
    on_round: Callable[[dict], None] | None = None,
    canaries: int = 0,
) -> TrainResult:
    """The server's round loop (ULDP-FL §3): plan, the silos' updates wherever `silos` runs them,
    aggregation, evaluation on `data`'s test records, accounting, metrics and checkpoint.

    The server reads of `data` only its description and test set; the silos' records are
    `silos`' business (`LocalSilos` here, `flower.FlowerSilos` at separate parties).
    `canaries` (`uldp audit`, trainers/audit.py): that many parameters appended to the model
    that its output never reads, one per canary (`canaries.CanaryBlock`).
    `model`, `loss`, `metric` and `model_name` as `train` takes them (or a resolved `ModelSpec`).
    """
    own = resolve_model(model if model is not None else model_name, data=data, loss=loss, metric=metric)
    # The metric's name is the history's key: every reader of `data.metric` agrees with it.
    if own.metric != data.metric:
        data = dataclasses.replace(data, metric=own.metric)
    task, metric = data.task, data.metric
    torch.manual_seed(cfg.seed)
    net = build_checked(own, data, device)
    if canaries:
        from .canaries import CanaryBlock

        net = CanaryBlock(net, canaries).to(device)
    params = {k: v.detach() for k, v in net.named_parameters()}
    # The model's buffers as built and checked: the released model carries these, whatever a
    # forward pass may have written since (per_user.user_deltas refuses such a write anyway).
    buffers = {k: v.detach().clone() for k, v in net.named_buffers()}
    identity = _identity(own)
    checkpoint = Path(checkpoint_dir) / CHECKPOINT_NAME if checkpoint_dir else None
    if checkpoint is not None and not resume and not overwrite and checkpoint.exists():
        raise InvalidParameter(
            f"--checkpoint: {checkpoint.parent} already holds a checkpoint; add --resume to "
            "continue that run, or --overwrite to replace it with a new one"
        )
    state = _load_checkpoint(checkpoint, cfg, data, device, params, identity) if resume else None
    noise_fixed = state["noise_fixed"] if state is not None else cfg.noise_seed is not None
    cfg = _with_entropy(cfg, state)
    spec = get_algorithm(cfg.algo)
    if spec.subject_level and cfg.item_q is None:  # before the silos get the settings
        from .subject_accounting import item_rate

        cfg = dataclasses.replace(cfg, item_q=item_rate(data, cfg.batch_size))
    algorithm, counts = silos.prepare(cfg, task, noise_fixed)
    algorithm.bind_silos(silos)
    ctx = Context(net, own.loss, data.n_users, data.n_silos, parameter_count(net), counts, data.user_q)
    personal = personal_accounting(cfg, data)
    subject = None
    if spec.subject_level:
        from .subject_accounting import SubjectAccounting

        subject = SubjectAccounting(cfg, data)
    x_test = torch.as_tensor(data.x_test, dtype=torch.float32, device=device)
    y_test = torch.as_tensor(
        data.y_test, dtype=torch.float32 if task == "survival" else torch.long, device=device
    )

    history: list[dict] = []
    start_round, elapsed_before = 1, 0.0
    if checkpoint is not None:
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
    if state is not None:
        params = state["params"]
        history = state["history"]
        start_round = state["round"] + 1
        elapsed_before = state["elapsed"]
        torch.set_rng_state(state["torch_rng"])
        algorithm.restore(history)
    metrics = MetricsFile(metrics_path, history) if metrics_path else None
    # What `uldp report` needs to account this run again, beside its metrics and in its checkpoint.
    plan_params = (
        algorithm.plan_params(cfg, cfg.rounds, data.n_silos) if kind_of(cfg.algo) == "plan" else None
    )
    record = run_record(cfg, data, plan_params, noise_fixed, rounds_done=len(history))
    if metrics_path:
        write_record(metrics_path, record)

    started = time.perf_counter()
    assert cfg.noise_seed is not None  # _with_entropy has drawn or kept the run's entropy
    for t in range(start_round, cfg.rounds + 1):
        server_rng, _ = round_rngs(cfg.noise_seed, t, data.n_silos)
        plan = algorithm.plan_round(t, ctx, cfg, server_rng)
        # A phased algorithm's aggregation drives its own message phases through `silos`.
        messages = [] if algorithm.phased else silos.updates(algorithm, t, params, plan, ctx, cfg)
        params = algorithm.aggregate(params, messages, plan, ctx, cfg)
        loss, value = evaluate(net, params, x_test, y_test, own.loss, own.metric_fn)
        if not _finite(params) or (len(x_test) and not math.isfinite(loss)):
            # Nothing of this round is kept: the checkpoint and metrics still hold round t - 1.
            raise TrainingDiverged(t, loss, spec.options, cfg.user_q)
        tiers: dict[str, float] = {}
        if personal is not None:
            tiers = personal.row(t)
            epsilon, server_epsilon = personal.headline(tiers)
        elif subject is not None:  # per subject, over the data's holdings (Marathe & Kanani)
            tiers = subject.row(t)
            epsilon, server_epsilon = tiers.pop("epsilon"), None
        elif spec.observed:  # accounted from what the rounds released (dp-fedavg-robust)
            epsilon, server_epsilon = algorithm.spent(cfg)
        else:
            epsilon, server_epsilon = user_epsilons(
                accounting_plan(cfg, t, data.n_silos, algorithm),
                cfg.delta,
                private_sampling=cfg.private_sampling,
            )
        others = {
            "round": t,
            "loss": loss,
            "epsilon": epsilon,
            **({} if server_epsilon is None else {"server_epsilon": server_epsilon}),
            **tiers,
            "delta": cfg.delta,
            **algorithm.round_fields(plan),
        }
        if metric in others or metric == "elapsed_s":
            raise InvalidParameter(
                f"--metric: its name {metric!r} is already a column of this run's rows "
                f"({', '.join([*others, 'elapsed_s'])}); give the function another name"
            )
        row = {
            "round": t,
            "loss": loss,
            metric: value,
            **{k: v for k, v in others.items() if k not in ("round", "loss")},
            "elapsed_s": round(elapsed_before + time.perf_counter() - started, 4),
        }
        history.append(row)
        # Metrics, checkpoint and on_round say the same round, whenever a signal comes.
        with uninterrupted():
            if metrics is not None:
                metrics.append(row)
            if checkpoint is not None:
                _atomic_save(
                    {
                        "round": t,
                        "params": params,
                        "history": history,
                        "config": _comparable(cfg),
                        "dataset": data_key(data),
                        "elapsed": row["elapsed_s"],
                        "torch_rng": torch.get_rng_state(),
                        "noise_entropy": cfg.noise_seed,
                        "noise_fixed": noise_fixed,
                        # The run record tolerates extra keys; the checkpoint's keys are fixed.
                        "run": {**record, "rounds_done": t, "trained_with": identity},
                    },
                    checkpoint,
                )
            if on_round is not None:
                on_round(row)

    summary = _summary(cfg, data, own.name, ctx, history, algorithm, in_process=isinstance(silos, LocalSilos))
    if personal is not None:
        summary["budget_check"] = personal.check(len(history))
        summary["tiers"] = [dataclasses.asdict(tier) for tier in personal.tiers]
        assumptions = _personal_assumptions(
            cfg, data, personal, algorithm, noise_fixed, silos.assumptions(cfg)
        )
    elif subject is not None:
        summary.update(subject.summary(cfg, len(history)))
        assumptions = _subject_assumptions(cfg, data, subject, algorithm, noise_fixed, silos.assumptions(cfg))
    elif spec.observed:
        assumptions = _observed_assumptions(cfg, data, algorithm, noise_fixed, silos.assumptions(cfg))
    else:
        final_plan = accounting_plan(cfg, cfg.rounds, data.n_silos, algorithm)
        assumptions = _assumptions(
            cfg, data, final_plan, algorithm, data.n_silos, noise_fixed, silos.assumptions(cfg)
        )
    if state is not None and DIGEST_KEY not in state:
        assumptions["resumed from"] = f"{checkpoint}, {UNVERIFIED}"
    if metrics is not None:
        write_record(
            metrics.path,
            run_record(
                cfg,
                data,
                plan_params,
                noise_fixed,
                finished=True,
                rounds_done=len(history),
                assumptions=assumptions,
                metrics_sha256=metrics.sha256,
            ),
        )
    return TrainResult(history, params, summary, assumptions, _trained(net, params, buffers))


def _trained(
    net: torch.nn.Module, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor]
) -> torch.nn.Module:
    """A copy of the run's model with `params` loaded, and the buffers it was built with (the
    run's own model stays untouched)."""
    model = copy.deepcopy(net)
    with torch.no_grad():
        for name, value in params.items():
            model.get_parameter(name).copy_(value)
        for name, value in buffers.items():
            model.get_buffer(name).copy_(value)
    return model


def _identity(own: ModelSpec) -> dict[str, str]:
    """What a checkpoint records of the model, loss and metric it was trained with: a resume
    with others is refused (`_load_checkpoint`). A reference where one exists, else the name
    (a lambda or instance: only its name is known)."""
    return {
        "model": own.reference or own.name,
        "loss": own.loss_reference or getattr(own.loss, "__name__", type(own.loss).__name__),
        "metric": own.metric,
    }


def personal_accounting(cfg: TrainConfig, data) -> PersonalAccounting | None:
    """Per-tier accounting when the data carries personalised budgets (issue 14), else None."""
    from .personal_accounting import accounting

    spec = get_algorithm(cfg.algo)
    if spec.record_level and data.record_q is None:
        raise InvalidParameter(f"{cfg.algo} needs each record's sampling rate: see trainers/rates.py")
    if data.user_q is not None and not spec.user_budgets:
        raise InvalidParameter(f"--user-budgets applies to {', '.join(user_budget_names())}, not {cfg.algo}")
    return accounting(cfg, data, spec.private)


def _subject_assumptions(
    cfg: TrainConfig, data, subject, algorithm: Algorithm, noise_fixed: bool, where: dict[str, str] | None
) -> dict:
    """What a subject-level run's figures rest on (`SubjectAccounting.describe_run`), where its
    randomness came from, and the `uldp subject` command that checks them."""
    out = _data_assumption(data)
    out.update(subject.describe_run(cfg, algorithm.run_assumptions(cfg, data.n_silos)))
    out["randomness"] = (
        f"noise and item sampling from --noise-seed {cfg.noise_seed}: reproducible, and NOT private "
        "against anyone who knows the seed (experiments only)"
        if noise_fixed
        else "noise and item sampling from 128 fresh bits of OS entropy (secrets); data allocation "
        f"and the initial model from --seed {cfg.seed}"
    )
    out.update(where or {})
    out["check"] = (
        f"`{subject.check_command()}` prints the final figures (HOLDINGS.csv: one (subject, member) "
        "row per training item)"
    )
    return out


def _personal_assumptions(
    cfg: TrainConfig,
    data,
    personal: PersonalAccounting,
    algorithm: Algorithm,
    noise_fixed: bool,
    where: dict[str, str] | None,
) -> dict:
    """What a run with personalised budgets assumes: the budgets, the rates, the run each
    record's (user's) epsilon is accounted for, and the final check."""
    from .personal_accounting import describe_run

    out = _data_assumption(data)
    out.update(data.rates_assumptions or {})
    out.update(describe_run(cfg, personal, len(data.y_train), data.n_users))
    out["randomness"] = (
        f"noise, silo, user and record sampling from --noise-seed {cfg.noise_seed}: reproducible, "
        "and NOT private against anyone who knows the seed (experiments only)"
        if noise_fixed
        else "noise, silo, user and record sampling from 128 fresh bits of OS entropy (secrets); "
        f"data allocation, budgets drawn and the initial model from --seed {cfg.seed}"
    )
    out.update(where or {})
    out.update(algorithm.run_assumptions(cfg, data.n_silos))
    return out


def _load_checkpoint(
    checkpoint: Path | None,
    cfg: TrainConfig,
    data,
    device: str,
    params: dict[str, torch.Tensor],
    identity: dict[str, str] | None = None,
) -> dict | None:
    """The saved state to resume from (None: no checkpoint yet, start from round 1), whose
    parameters fit the model `params` belong to, and whose model, loss and metric are
    `identity`'s (`_identity`; a checkpoint from before they were saved was a built-in model's,
    with the task's loss and metric)."""
    if checkpoint is None:
        raise InvalidParameter("--resume needs --checkpoint DIR")
    if not checkpoint.exists():
        return None
    state = read_checkpoint(checkpoint, device)
    if state["config"] != _comparable(cfg) or state["dataset"] != data_key(data):
        raise InvalidParameter(
            f"{checkpoint} was written by a different run (settings or data differ); "
            "use the same flags, or another --checkpoint directory"
        )
    saved = state["params"]
    if list(saved) != list(params) or any(
        saved[k].shape != params[k].shape or saved[k].dtype != params[k].dtype for k in params
    ):
        raise DataError(
            f"--checkpoint: {checkpoint} holds the parameters of another model; use the same "
            "flags, or another --checkpoint directory"
        )
    if identity is not None:
        _refuse_other_model(checkpoint, state, identity, data.task)
    if state["round"] > cfg.rounds:
        raise InvalidParameter(
            f"--rounds {cfg.rounds} is fewer than the {state['round']} rounds the "
            f"checkpoint already ran; give --rounds {state['round']} or more"
        )
    if cfg.noise_seed is not None and cfg.noise_seed != state["noise_entropy"]:
        raise InvalidParameter("--noise-seed differs from the one the checkpoint ran with")
    return state


def _refuse_other_model(checkpoint: Path, state: dict, identity: dict[str, str], task: str) -> None:
    """Refuse, in one line, a resume whose model, loss or metric is not the checkpoint's."""
    from .models import MODELS
    from .own_model import TASK_LOSSES, TASK_METRICS

    run = state.get("run")
    recorded = run.get("trained_with") if isinstance(run, dict) else None
    if isinstance(recorded, dict) and all(key in recorded for key in identity):
        saved = {key: recorded[key] for key in identity}
        differs = [key for key in identity if saved[key] != identity[key]]
    else:  # an older checkpoint: a built-in model with the task's loss and metric
        differs = [
            key
            for key, fits in (
                ("model", identity["model"] in MODELS),
                ("loss", identity["loss"] == TASK_LOSSES.get(task)),
                ("metric", identity["metric"] == TASK_METRICS.get(task)),
            )
            if not fits
        ]
        saved = {"model": "a built-in model", "loss": TASK_LOSSES.get(task), "metric": TASK_METRICS.get(task)}
    if differs:
        key = differs[0]
        raise InvalidParameter(
            f"--{key}: {checkpoint} was trained with {key} {saved[key]}, not {identity[key]}; resume "
            "with the same --model, --loss and --metric, or use another --checkpoint directory"
        )


def _with_entropy(cfg: TrainConfig, state: dict | None) -> TrainConfig:
    """cfg with the entropy of this run's noise: the checkpoint's, the user's, or fresh bits."""
    if state is not None:
        entropy = state["noise_entropy"]
    elif cfg.noise_seed is not None:
        entropy = cfg.noise_seed
    else:
        entropy = secrets.randbits(128)
    return dataclasses.replace(cfg, noise_seed=entropy)


def _summary(
    cfg: TrainConfig,
    data,
    model_name: str,
    ctx: Context,
    history: list[dict],
    algorithm: Algorithm,
    *,
    in_process: bool = True,
) -> dict:
    metric = data.metric
    last = history[-1] if history else {}
    values = [r[metric] for r in history if not math.isnan(r[metric])]
    out = {
        "algo": cfg.algo,
        "dataset": data.name,
        "source": data.source,
        "synthetic": data.synthetic,
        "model": model_name,
        "parameters": ctx.n_params,
        "users": data.n_users,
        "silos": data.n_silos,
        "train_records": int(len(data.y_train)),
        "test_records": int(len(data.y_test)),
        "rounds": len(history),
        "sigma": cfg.sigma,
        "clip": cfg.clip,
        "lr": cfg.lr,
        "global_lr": cfg.global_lr,
        "local_epochs": cfg.local_epochs,
        "user_q": cfg.user_q,
        **(
            {"private_sampling": True, "sampling_slots": cfg.sampling_slots, "audit_rate": cfg.audit_rate}
            if cfg.private_sampling
            else {}
        ),
        "delta": cfg.delta,
        "metric": metric,
        "final_loss": last.get("loss"),
        f"final_{metric}": last.get(metric),
        f"best_{metric}": max(values) if values else None,
        "epsilon": last.get("epsilon"),
        **({"server_epsilon": last["server_epsilon"]} if "server_epsilon" in last else {}),
        "elapsed_s": last.get("elapsed_s"),
    }
    out.update(algorithm.summary_fields())
    path = _training_path(cfg, ctx) if in_process else None
    if path is not None:
        out["training_path"] = path
    return out


def _training_path(cfg: TrainConfig, ctx: Context) -> str | None:
    """How this process trained: per user ("stacked", "vmap" or "loop", per_user.chosen_path) or
    per record ("vmap" or "loop" gradients, per_record); None where no batched step ran. Only
    for silos in this process (the Flower engine's silos decide in their own)."""
    from . import per_record, per_user

    if not cfg.batched:
        return "loop"
    return per_user.path_taken(ctx.model, ctx.loss_fn) or per_record.path_taken(ctx.model)
