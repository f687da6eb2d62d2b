"""User-level DP for a user's own Flower ServerApp: `UserLevelDP`, a strategy wrapper.

Flower adds central DP to an existing app by wrapping its strategy
(`DifferentialPrivacyServerSideFixedClipping(FedAvg(...), ...)`); `UserLevelDP` wraps one the
same way and makes its training rounds ULDP-AVG or ULDP-SGD (ULDP-FL Algorithm 3), with
`user_mod.user_level_mod` answering them at each silo. The work is the registered algorithm's
(trainers/algorithms: `plan_round`, `silo_update`, `aggregate`), nothing written again here:

- before round 1 (in `configure_train`): one setup message to every silo (the run's settings
  and the initial model, whose buffers the silo keeps; back: which silo each SuperNode is and
  the model's parameter names);
- each round: the round's plan drawn from round_rngs(entropy, t)[0] (user sampling, the same
  draws as `uldp train`'s round loop), the global model and the plan to every silo (all of them:
  each silo's noise share is calibrated to |S|), their messages checked (`records.read_reply`)
  and aggregated, the next model returned as an ArrayRecord (buffers kept as they were);
- the user-level epsilon after t rounds, accounted as `uldp train` does it (runner.py
  `accounting_plan`, `user_epsilons`: RDP, both the released model's and, with user sampling,
  the server's own view), logged and returned as the round's train metrics.

Evaluation rounds are the wrapped strategy's (their replies are the app's own, not noised: the
epsilon covers the training messages and the model, as with Flower's DP wrappers); its training
config and aggregation are replaced (`start` warns when it is given one or overrides
`aggregate_train`). With the same model, records, seed and noise seed the rounds equal `uldp
train --engine local`'s (tests/flower/test_own_app.py).

ULDP-AVG-w and ULDP-SGD-w (weights n_{s,u} / N_u, ULDP-FL Eq. 3) run only with `secure=True`:
Protocol 1 (§4.1; protocol1.py, the same message rounds as `uldp train --engine flower
--secure`) computes the weights under Paillier encryption and multiplicative blinding, its setup
three more train messages to every silo before round 1, each round's message carrying
Enc(B_inv(N_u)) and each silo answering only its masked, encrypted sum. No party learns another
silo's n_{s,u}; the server decrypts only the sum over silos. Without it the server would need
every n_{s,u} and see each silo's weighted message, so the -w algorithms are refused in the clear.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import secrets
import time
from collections.abc import Callable, Iterable
from logging import INFO, WARNING
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy
from flwr.supercore import log

from uldp.errors import InvalidParameter, ProtocolError

from . import records
from .user_mod import PARAMS, PLAN, REFUSED, SETTINGS, SETUP

if TYPE_CHECKING:
    import torch

    from ..algorithms.base import Algorithm, Context, RoundPlan, TrainConfig
    from .protocol1 import ServerParty

#: The algorithms a user's app can run: per-user clipping (ULDP-FL Algorithms 3-4); the -w ones
#: (weights n_su / N_u) only through Protocol 1 (`secure=True`).
ALGORITHMS = ("uldp-avg", "uldp-sgd", "uldp-avg-w", "uldp-sgd-w")
WEIGHTED = ("uldp-avg-w", "uldp-sgd-w")
CONNECT_TIMEOUT = 120.0  # seconds to wait for every silo's SuperNode
#: `UserLevelDP.from_run_config`: a Flower run config's key (Flower's hyphenated style; `lr` and
#: `local-epochs` are the quickstart's own) -> the keyword it sets.
RUN_CONFIG_KEYS = {
    key: key.replace("-", "_")
    for key in (
        "users silos algo sigma clip local-epochs lr global-lr user-q local-batch-size delta "
        "noise-seed secure key-bits test-keys batched timeout"
    ).split()
}


class UserLevelDP(Strategy):
    """`strategy`'s training rounds made user-level DP (ULDP-AVG; ULDP-FL Algorithm 3).

    `users`: how many users the federation has (user ids 0..users-1 across silos); `silos`: how
    many SuperNodes train (partition-id 0..silos-1), every one of them in every round. The rest
    are `uldp train`'s options: `algo` (uldp-avg, uldp-sgd; uldp-avg-w or uldp-sgd-w with
    `secure=True`), `sigma`, `clip`, `local_epochs`, `lr`, `global_lr`, `user_q`,
    `local_batch_size`, `delta`, `noise_seed` (None or "": 128 fresh bits per party; an integer
    replays a run and is NOT private against anyone who knows it), `secure` (Protocol 1 for the
    -w weights), `key_bits` (its Paillier keys, 3072 by default, at least 2048; the DH group is
    RFC 3526's fixed 3072-bit one), `test_keys` (Paillier keys from 256 bits, for tests only:
    NOT secure), `batched`, `timeout` (seconds to wait for the silos' replies, in the setup and
    in every round). `on_round(row)` hears each round's row (round, epsilon, server_epsilon with
    user sampling, delta, sampled_users); `history` keeps them.
    """

    def __init__(
        self,
        strategy: Strategy,
        *,
        users: int,
        silos: int,
        algo: str = "uldp-avg",
        sigma: float = 5.0,
        clip: float = 1.0,
        local_epochs: int = 1,
        lr: float = 0.05,
        global_lr: float = 1.0,
        user_q: float = 1.0,
        local_batch_size: int | None = None,
        delta: float = 1e-5,
        noise_seed: int | str | None = None,
        secure: bool = False,
        key_bits: int = 3072,
        test_keys: bool = False,
        batched: bool = True,
        timeout: float = 600.0,
        on_round: Callable[[dict], None] | None = None,
    ) -> None:
        from ..algorithms.base import TrainConfig

        super().__init__()
        for name, flag in (("secure", secure), ("test_keys", test_keys), ("batched", batched)):
            if not isinstance(flag, bool):  # "false" is truthy: a string here would turn a flag on
                raise InvalidParameter(f"{name} must be True or False, got {flag!r}")
        if algo not in ALGORITHMS:
            raise InvalidParameter(
                f"algo must be one of {', '.join(ALGORITHMS)} for a Flower app, got {algo!r}"
            )
        if algo in WEIGHTED and not secure:
            raise InvalidParameter(
                f"algo: {algo} weights each user by n_su / N_u, which a Flower app computes only by "
                "Protocol 1: give secure=True (the server then sees masked, encrypted sums only), "
                "or use uldp-avg / uldp-sgd (weights 1/|S|)"
            )
        if secure and algo not in WEIGHTED:
            raise InvalidParameter(
                f"secure: Protocol 1 computes the weights n_su / N_u of {' and '.join(WEIGHTED)}; "
                f"{algo} weights 1/|S| and needs none: give algo='{algo}-w' or secure=False"
            )
        if secure:
            from uldp.crypto.paillier import check_key_bits

            check_key_bits(key_bits, test_keys=test_keys)  # before any silo is contacted
        for name, value in (("users", users), ("silos", silos)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameter(f"{name} must be an integer >= 1, got {value!r}")
        self.strategy = strategy
        self.n_users, self.n_silos = users, silos
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidParameter(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.timeout = self._wait = float(timeout)
        self.on_round = on_round
        noise_seed = _noise_seed(noise_seed)
        self.noise_fixed = noise_seed is not None
        self._noise_seed = noise_seed  # the user's: None draws the server's entropy afresh each run
        # Validated now (one line naming the setting), rounds set by `start`.
        self.cfg: TrainConfig = TrainConfig(
            algo=algo,
            rounds=1,
            sigma=sigma,
            clip=clip,
            local_epochs=local_epochs,
            lr=lr,
            global_lr=global_lr,
            user_q=user_q,
            local_batch_size=local_batch_size,
            delta=delta,
            noise_seed=noise_seed,
            secure=secure,
            key_bits=key_bits,
            test_keys=test_keys,
            batched=batched,
        )
        self.history: list[dict] = []
        self._reset()

    @classmethod
    def from_run_config(cls, strategy: Strategy, run_config: Any, **overrides: Any) -> UserLevelDP:
        """`strategy` wrapped with the settings a Flower run config holds (the app's
        `[tool.flwr.app.config]`, `flwr run --run-config`): each key of `RUN_CONFIG_KEYS` it has
        (`users`, `silos`, `sigma`, `algo`, `user-q`, `secure`, the quickstart's `lr` and
        `local-epochs`...); `overrides` (keywords) win over the run config. Keys it does not
        know are the app's own and are left alone; `users` and `silos` must be given."""
        settings = {
            word: _run_config_value(key, run_config[key])
            for key, word in RUN_CONFIG_KEYS.items()
            if key in run_config
        }
        settings.update(overrides)
        for word in ("users", "silos"):
            if word not in settings:
                raise InvalidParameter(
                    f"{word}: the run config has no {word!r}; add `{word} = N` to the app's "
                    f"[tool.flwr.app.config] (or give {word}=N)"
                )
        return cls(strategy, **settings)

    def _reset(self) -> None:
        self.nodes: dict[int, int] = {}  # silo -> node id
        self.param_names: list[str] = []
        self.algorithm: Algorithm | None = None
        self.ctx: Context | None = None
        self.job = ""
        self._round: tuple[int, ArrayRecord, dict[str, torch.Tensor], RoundPlan] | None = None
        self._sent: dict[int, Message] = {}  # silo -> the round's message to it
        self._initial: ArrayRecord | None = None  # the model `start` was given
        self.protocol: ServerParty | None = None  # Protocol 1's server, under secure=True

    def __repr__(self) -> str:
        return f"User-level DP strategy wrapper ({self.cfg.algo}, ULDP-FL Algorithms 3-4)"

    # --- the run -----------------------------------------------------------------------------
    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float | None = None,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        """Flower's `Strategy.start`, the rounds user-level DP: a fresh run each call (the
        server's entropy drawn again unless a noise seed was given). `timeout` (None: the
        wrapper's `timeout`) bounds each wait for the silos' replies: the setup's, Protocol 1's
        steps', each round's and evaluation's."""
        from flwr.serverapp.strategy import FedAvg

        # A fresh run: the server's entropy drawn again at setup unless the user fixed a seed.
        self.cfg = dataclasses.replace(self.cfg, rounds=max(1, num_rounds), noise_seed=self._noise_seed)
        self._wait = self.timeout if timeout is None else timeout
        self.history = []
        self._reset()
        self._initial = initial_arrays
        if train_config:
            log(
                WARNING,
                "uldp: train_config %s is not sent: the silos train with UserLevelDP's settings",
                dict(train_config),
            )
        if type(self.strategy).aggregate_train is not FedAvg.aggregate_train:
            log(
                WARNING,
                "uldp: %s's aggregate_train is not used: UserLevelDP aggregates the training "
                "rounds itself (ULDP-AVG's noised sum)",
                type(self.strategy).__name__,
            )
        return super().start(
            grid,
            initial_arrays,
            num_rounds,
            self.timeout if timeout is None else timeout,
            train_config,
            evaluate_config,
            evaluate_fn,
        )

    def summary(self) -> None:
        from ..algorithms import make_algorithm

        cfg = self.cfg
        log(INFO, "\t├──> User-level DP (uldp): %s", cfg.algo)
        log(INFO, "\t│\t├── %d users over %d silos, user q %g", self.n_users, self.n_silos, cfg.user_q)
        log(INFO, "\t│\t├── noise multiplier %g, clipping bound %g, delta %g", cfg.sigma, cfg.clip, cfg.delta)
        log(INFO, "\t│\t└── local epochs %d, lr %g, global lr %g", cfg.local_epochs, cfg.lr, cfg.global_lr)
        aggregation = (
            "Protocol 1 (ULDP-FL §4.1): the server decrypts only the sum over silos of their "
            "masked, encrypted messages; the epsilon covers that sum and the model"
            if cfg.secure
            else "in the clear at the server: the epsilon covers the training messages' aggregate "
            "and the model; the server sees each silo's message (its noise share only)"
        )
        assumptions = {
            **make_algorithm(cfg, [], "").run_assumptions(cfg, self.n_silos),
            "aggregation": aggregation + "; the app's evaluate replies are not noised",
        }
        for key, text in assumptions.items():
            log(INFO, "uldp: assumes %s: %s", key, text)
        if cfg.test_keys:
            log(WARNING, "uldp: test_keys: Protocol 1 runs on small test keys, which are NOT secure")
        if self.noise_fixed:
            log(
                WARNING,
                "uldp: fixed noise seed %s: the noise is reproducible and NOT private against anyone "
                "who knows the seed (experiments only)",
                cfg.noise_seed,
            )
        self.strategy.summary()

    # --- training: ULDP's rounds -------------------------------------------------------------
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        """The round's plan and the global model to every silo (set up first, once)."""
        import torch

        from ..round_rngs import round_rngs

        if self.algorithm is None:
            self._setup(grid, arrays)
        assert self.algorithm is not None and self.ctx is not None and self.cfg.noise_seed is not None
        missing = [name for name in self.param_names if name not in arrays]
        if missing:
            raise ProtocolError(f"the global model lacks the parameters {missing} the silos' model has")
        params = {name: torch.as_tensor(np.array(arrays[name].numpy())) for name in self.param_names}
        cfg = self._cfg(server_round)
        server_rng, _ = round_rngs(self.cfg.noise_seed, server_round, self.n_silos)
        plan = self.algorithm.plan_round(server_round, self.ctx, cfg, server_rng)
        self._round = (server_round, arrays, params, plan)
        model = records.params_record(params)
        header = ConfigRecord({"step": "round", "round": server_round, "job": self.job})
        # Protocol 1 round (a): each silo's copy of Enc(B_inv(N_u)) for the sampled users.
        weights = self.protocol.round_records(server_round, plan.sampled) if self.protocol else {}
        self._sent = {
            silo: Message(
                RecordDict(
                    {
                        SETTINGS: header,
                        PARAMS: model,
                        # Under Protocol 1 the silos are not told who is sampled (step 2(a)).
                        PLAN: records.plan_record(plan, silo, hide_sample=self.protocol is not None),
                        **weights.get(silo, {}),
                    }
                ),
                dst_node_id=node,
                message_type=MessageType.TRAIN,
            )
            for silo, node in sorted(self.nodes.items())
        }
        return list(self._sent.values())

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The silos' messages aggregated by the algorithm, the round accounted and logged."""
        from ..algorithms import get_algorithm
        from ..runner import TrainingDiverged, accounting_plan, user_epsilons

        if self._round is None or self._round[0] != server_round:
            raise ProtocolError(f"round {server_round}'s replies came before its messages were configured")
        assert self.algorithm is not None and self.ctx is not None
        _, arrays, params, plan = self._round
        cfg = self._cfg(server_round)
        contents = self._answers(list(replies), self._sent, server_round)
        like = next(iter(params.values()))
        messages: list = (
            [
                records.read_reply(
                    contents[silo],
                    silo=silo,
                    round=server_round,
                    expected=self.algorithm.reply_type(cfg),
                    n_params=self.ctx.n_params,
                    n_users=self.n_users,
                    like=like,
                )
                for silo in range(self.n_silos)
            ]
            if self.protocol is None
            else [
                self.protocol.read_masked(contents[silo], silo, server_round) for silo in range(self.n_silos)
            ]
        )
        params = self.algorithm.aggregate(params, messages, plan, self.ctx, cfg)
        if not all(bool(p.isfinite().all()) for p in params.values()):
            raise TrainingDiverged(server_round, 0.0, get_algorithm(cfg.algo).options, cfg.user_q)
        out = ArrayRecord(
            {
                name: Array(params[name].detach().cpu().numpy()) if name in params else arrays[name]
                for name in arrays.keys()
            }
        )
        epsilon, server_epsilon = user_epsilons(
            accounting_plan(cfg, server_round, self.n_silos, self.algorithm),
            cfg.delta,
            private_sampling=cfg.private_sampling,
        )
        row: dict[str, Any] = {"round": server_round, "epsilon": epsilon}
        if server_epsilon is not None:
            row["server_epsilon"] = server_epsilon
        row["delta"] = cfg.delta
        row.update(self.algorithm.round_fields(plan))
        self.history.append(row)
        log(
            INFO,
            "uldp: round %d: user-level epsilon %.4g at delta %g%s (%s, RDP)%s",
            server_round,
            epsilon,
            cfg.delta,
            "" if server_epsilon is None else f"; {server_epsilon:.4g} as the server sees it",
            cfg.algo,
            " (fixed noise seed: not private)" if self.noise_fixed else "",
        )
        if self.on_round is not None:
            self.on_round(row)
        metrics = {"epsilon": epsilon, "delta": cfg.delta}
        if server_epsilon is not None:
            metrics["server-epsilon"] = server_epsilon
        return out, MetricRecord(cast(Any, metrics))

    # --- evaluation: the wrapped strategy's --------------------------------------------------
    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return self.strategy.aggregate_evaluate(server_round, replies)

    # --- helpers -----------------------------------------------------------------------------
    def _cfg(self, server_round: int) -> TrainConfig:
        """The run's settings, its rounds at least `server_round` (a caller driving the rounds
        itself rather than through `start`)."""
        if server_round > self.cfg.rounds:
            self.cfg = dataclasses.replace(self.cfg, rounds=server_round)
        return self.cfg

    def _setup(self, grid: Grid, arrays: ArrayRecord) -> None:
        """Every silo told the run's settings and the initial model (the silo keeps its buffers);
        which SuperNode is which silo and the model's parameter names learnt; the server's algorithm
        built."""
        from ..algorithms import make_algorithm
        from ..algorithms.base import Context

        cfg = self.cfg
        entropy = cfg.noise_seed if cfg.noise_seed is not None else secrets.randbits(128)
        self.cfg = cfg = dataclasses.replace(cfg, noise_seed=entropy)
        settings = dataclasses.asdict(cfg)
        settings["noise_seed"] = None  # the server's entropy stays at the server
        self.job = secrets.token_hex(8)
        header = ConfigRecord(
            {
                "step": "setup",
                "config": json.dumps(settings),
                "users": self.n_users,
                "silos": self.n_silos,
                "noise_seed": str(entropy) if self.noise_fixed else "",
                "job": self.job,
            }
        )
        node_ids = _wait_for_nodes(grid, self.n_silos)
        # The model `start` was given (its buffers are never sent again), else the round's.
        initial = self._initial if self._initial is not None else arrays
        messages = [
            Message(
                RecordDict({SETTINGS: header, PARAMS: initial}),
                dst_node_id=node,
                message_type=MessageType.TRAIN,
            )
            for node in node_ids
        ]
        replies = list(grid.send_and_receive(messages, timeout=self._wait))
        # Pushing a message gives it its id (the grid sets it on the object it was handed).
        destination = {m.metadata.message_id: m.metadata.dst_node_id for m in messages}
        names: list[str] | None = None
        answered: set[str] = set()
        for reply in replies:
            to = reply.metadata.reply_to_message_id
            if to not in destination:
                raise ProtocolError(
                    f"a setup reply from SuperNode {reply.metadata.src_node_id} answers no message sent"
                )
            if to in answered:
                raise ProtocolError(f"SuperNode {destination[to]} answered the setup twice")
            answered.add(to)
            node = destination[to]
            content = _content(reply, f"SuperNode {node}", 0)
            found: Any = content.get(SETUP)
            silo = records.claim_silo(self.nodes, found, node, self.n_silos, f"SuperNode {node}")
            own = [str(name) for name in found.get("params", [])]
            if names is not None and own != names:
                raise records.MalformedReply(
                    silo, 0, f"its model's parameters {own} differ from another silo's {names}"
                )
            names = own
        absent = sorted(set(range(self.n_silos)) - set(self.nodes))
        if absent:
            raise records.SiloFailed([f"silo {s}" for s in absent], 0, "did not answer")
        assert names is not None
        for name in names:
            if name not in arrays:
                raise ProtocolError(f"the global model has no parameter {name!r}, which the silos' model has")
        self.param_names = names
        n_params = sum(int(np.prod(arrays[name].shape)) for name in names)
        algorithm = make_algorithm(cfg, [], "")
        if cfg.secure:
            from .protocol1 import ServerParty

            began = time.perf_counter()
            exchange = functools.partial(self._exchange, grid)
            self.protocol = ServerParty(exchange, self.n_silos, self.n_users, n_params, cfg)
            algorithm.secure = self.protocol.weighted_sum  # type: ignore[attr-defined]
            log(
                INFO,
                "uldp: Protocol 1 set up in %.1f s (keys, pairwise seeds, blinded histograms)",
                time.perf_counter() - began,
            )
        # Set up only once everything is: a failed setup leaves the strategy to set up again.
        model = cast(Any, None)  # the server never runs the model: plan and aggregation only
        self.ctx = Context(model, cast(Any, None), self.n_users, self.n_silos, n_params, None)
        self.algorithm = algorithm

    def _exchange(
        self, grid: Grid, contents: dict[int, RecordDict], kind: str, round: int
    ) -> dict[int, RecordDict]:
        """One setup step of Protocol 1 (protocol1.ServerParty's `exchange`): `contents` by silo
        as train messages the silos' mod answers, their replies' contents by silo. `kind` is
        uldp's own ServerApp's message type, the same step for every silo here."""
        header = ConfigRecord({"step": "protocol1", "job": self.job})
        sent = {
            silo: Message(
                RecordDict({SETTINGS: header, **dict(content.items())}),
                dst_node_id=self.nodes[silo],
                message_type=MessageType.TRAIN,
            )
            for silo, content in contents.items()
        }
        replies = list(grid.send_and_receive(list(sent.values()), timeout=self._wait))
        return self._answers(replies, sent, round, expected=set(contents))

    def _answers(
        self,
        replies: list[Message],
        sent: dict[int, Message],
        server_round: int,
        expected: set[int] | None = None,
    ) -> dict[int, RecordDict]:
        """Each silo's reply content to the messages `sent` (by silo), by silo; a silo of
        `expected` (all of them by default) that failed, refused or did not answer stops the run
        (its noise share is part of every round's noise; Protocol 1's setup needs every silo)."""
        # A reply is the answer to the message whose id it names, never filed by its source: the
        # SuperLink answers for a SuperNode gone offline from its own node id (server.py).
        by_id = {message.metadata.message_id: silo for silo, message in sent.items()}
        out: dict[int, RecordDict] = {}
        for reply in replies:
            silo = by_id.get(reply.metadata.reply_to_message_id)
            who = f"silo {silo} (SuperNode {self.nodes[silo]})" if silo is not None else "an unknown party"
            content = _content(reply, who, server_round)
            if silo is None:
                raise ProtocolError(f"a reply to no message of round {server_round} arrived")
            if silo in out:
                raise ProtocolError(f"{who} answered round {server_round} twice")
            out[silo] = content
        wanted = range(self.n_silos) if expected is None else sorted(expected)
        absent = [f"silo {s} (SuperNode {self.nodes[s]})" for s in wanted if s not in out]
        if absent:
            raise records.SiloFailed(absent, server_round, "did not answer")
        return out


#: What each `from_run_config` key takes: (the Python types, in words). Flower's run config holds
#: TOML's strings, integers, floats and booleans, never None: "" stands for None where None is
#: the keyword's default (`local-batch-size`, `noise-seed`).
_RUN_CONFIG_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    **{key: ((int,), "an integer") for key in ("users", "silos", "local-epochs", "key-bits")},
    **{
        key: ((int, float), "a number")
        for key in ("sigma", "clip", "lr", "global-lr", "user-q", "delta", "timeout")
    },
    **{key: ((bool,), "true or false") for key in ("secure", "test-keys", "batched")},
    "algo": ((str,), "a string"),
    "local-batch-size": ((int,), 'an integer, or "" for all of a user\'s records in one step'),
    "noise-seed": ((int, str), 'an integer, or "" for fresh noise'),
}


def _run_config_value(key: str, value: Any) -> Any:
    """The run config's `key` as UserLevelDP's keyword takes it, or one line naming the key."""
    if key == "local-batch-size" and value == "":
        return None
    types, words = _RUN_CONFIG_TYPES[key]
    if isinstance(value, bool) and bool not in types or not isinstance(value, types):
        raise InvalidParameter(f"run config {key}: expected {words}, got {value!r}")
    return value


def _noise_seed(value: int | str | None) -> int | None:
    """The noise seed as an integer; None or "" (a Flower run config holds no null) for none."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidParameter(
            f'noise_seed must be an integer >= 0, or None or "" for fresh entropy; got {value!r}'
        )
    return value


def _content(reply: Message, who: str, server_round: int) -> RecordDict:
    """A reply's content, or `SiloFailed` for an error reply or a refusal."""
    if reply.has_error():
        reason = " ".join(str(reply.error.reason or "").split())
        raise records.SiloFailed([who], server_round, "failed", f"Flower error {reply.error.code}: {reason}")
    content = reply.content
    refused: Any = content.get(REFUSED)
    if isinstance(refused, ConfigRecord):
        raise records.SiloFailed([who], server_round, "refused", str(refused.get("message", "")))
    return content


def _wait_for_nodes(grid: Grid, count: int) -> list[int]:
    """The ids of the connected SuperNodes once there are at least `count`."""
    deadline = time.monotonic() + CONNECT_TIMEOUT
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= count:
            return nodes
        if time.monotonic() > deadline:
            raise ProtocolError(
                f"only {len(nodes)} of {count} silos' SuperNodes connected within {CONNECT_TIMEOUT:g} s"
            )
        time.sleep(0.2)
