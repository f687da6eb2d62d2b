"""`uldp train --private-sampling` (issue 36; ULDP-FL §4.1): ULDP-AVG-w / ULDP-SGD-w whose user
sample the silos draw by oblivious transfer inside Protocol 1.

- the model is the plain-sampling run's given the same realised sample (up to fixed point);
- uldp's own Flower server and ClientApp give the local run (tests/flower/test_private_sampling_flower.py);
- the server's epsilon is the released model's, and the CLI refuses what it cannot run.
"""

from __future__ import annotations

import itertools
import json
import random
import secrets
import types

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from tests.trainers.synthetic import make_data
from uldp.cli.main import cli
from uldp.crypto.protocol import sampling, silo
from uldp.trainers.algorithms import TrainConfig, weighting
from uldp.trainers.algorithms import base as algorithm_base
from uldp.trainers.runner import train

MODEL = "logistic"


def _config(**settings) -> TrainConfig:
    base = dict(
        algo="uldp-avg-w",
        rounds=3,
        seed=1,
        noise_seed=3,
        sigma=1.0,
        user_q=0.5,
        secure=True,
        test_keys=True,
        key_bits=1024,
        private_sampling=True,
        sampling_slots=10,
        audit_rate=0.2,
    )
    base.update(settings)
    return TrainConfig(**base)


def fixed_draws(monkeypatch) -> None:
    """The seed R and the server's real slots from fixed seeds, so two runs draw alike (the
    protocol draws them from the OS; nothing else about it changes)."""
    seeds = itertools.count()
    monkeypatch.setattr(
        sampling,
        "secrets",
        types.SimpleNamespace(
            SystemRandom=lambda: random.Random(next(seeds)),
            token_bytes=secrets.token_bytes,
            randbelow=secrets.randbelow,
        ),
    )
    monkeypatch.setattr(
        silo,
        "secrets",
        types.SimpleNamespace(token_bytes=lambda n: bytes(range(n)), randbelow=secrets.randbelow),
    )


def _recorded_samples(monkeypatch) -> list[np.ndarray]:
    """Every round's realised sample (`WeightingSession.last_sample`), as the local run draws them."""
    samples: list[np.ndarray] = []
    call = weighting.SecureWeighting.__call__

    def recording(self, messages, sampled, round_index=None):
        total = call(self, messages, sampled, round_index)
        if sampled is None:  # a private-sampling round (a plain one is given its sample)
            samples.append(self.session.last_sample.copy())
        return total

    monkeypatch.setattr(weighting.SecureWeighting, "__call__", recording)
    return samples


@pytest.mark.parametrize("algo", ["uldp-avg-w", "uldp-sgd-w"])
def test_the_model_is_the_plain_sampling_runs_with_the_same_draws(algo, monkeypatch):
    data = make_data("binary", n=160, users=10, silos=3)
    samples = _recorded_samples(monkeypatch)
    private = train(data, _config(algo=algo), model_name=MODEL)
    assert len(samples) == 3 and any(s.any() for s in samples) and not all(s.all() for s in samples)
    at_half = train(data, _config(algo=algo, private_sampling=False, rounds=1), model_name=MODEL)
    # The plain run draws its sample on the server: give it the private run's, round by round.
    # Its q is the private run's expected rate (1 - a) m/P, which Algorithm 4 divides by.
    replayed = iter(samples)
    monkeypatch.setattr(algorithm_base, "sample_users", lambda n, q, rng: next(replayed))
    plain_q = 0.5 * (1 - 0.2)
    plain = train(data, _config(algo=algo, private_sampling=False, user_q=plain_q), model_name=MODEL)
    for name, value in plain.params.items():
        assert torch.allclose(private.params[name], value, rtol=0, atol=1e-6), name
    # Accounted at m/P = 0.5 (an upper bound: audited users sit out), so above the plain run's.
    assert private.history[0]["epsilon"] == at_half.history[0]["epsilon"] > plain.history[0]["epsilon"]
    # Against the server: amplified as the model (private), not amplified (plain).
    assert [r["server_epsilon"] for r in private.history] == [r["epsilon"] for r in private.history]
    assert all(r["server_epsilon"] > r["epsilon"] for r in plain.history)
    assert "sampled_users" not in private.history[0] and "sampled_users" in plain.history[0]


def test_two_runs_draw_different_samples_without_fixed_draws(monkeypatch):
    """The sample comes from the protocol's fresh secrets, not from --noise-seed."""
    data = make_data("binary", n=160, users=10, silos=3)
    samples = _recorded_samples(monkeypatch)
    train(data, _config(rounds=2), model_name=MODEL)
    train(data, _config(rounds=2), model_name=MODEL)
    assert not all(np.array_equal(a, b) for a, b in zip(samples[:2], samples[2:]))


def _train(*args: str):
    return CliRunner().invoke(
        cli,
        ["train", "--dataset", "heart-disease", "--users", "20", "--rounds", "1", *args],
    )


def test_the_cli_runs_it_and_says_the_server_view_is_amplified():
    result = _train(
        *("--algo", "uldp-avg-w", "--secure", "--test-keys", "--key-bits", "1024"),
        *("--private-sampling", "--user-q", "0.333", "--format", "json"),
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    summary = out["summary"]
    assert summary["user_q"] == 0.33 and summary["private_sampling"] is True
    assert summary["server_epsilon"] == summary["epsilon"]
    assert "--user-q 0.333 rounded" in out["assumptions"]["user sampling"]
    assert "--private-sampling --sampling-slots 100" in out["assumptions"]["check"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--algo", "uldp-avg-w", "--private-sampling", "--user-q", "0.5"), "--private-sampling"),
        (("--algo", "uldp-avg", "--secure", "--private-sampling", "--user-q", "0.5"), "--private-sampling"),
        (
            ("--algo", "uldp-avg-w", "--secure", "--test-keys", "--key-bits", "1024", "--private-sampling"),
            "--user-q",
        ),
        (
            ("--algo", "uldp-avg-w", "--secure", "--test-keys", "--key-bits", "1024", "--private-sampling")
            + ("--user-q", "0.001"),
            "--user-q",
        ),
        (
            ("--algo", "uldp-avg-w", "--secure", "--sampling-slots", "10", "--user-q", "0.5"),
            "--sampling-slots",
        ),
        (
            ("--algo", "uldp-avg-w", "--secure", "--private-sampling", "--sampling-slots", "1"),
            "--sampling-slots",
        ),
        (("--algo", "uldp-avg-w", "--secure", "--private-sampling", "--audit-rate", "1"), "--audit-rate"),
    ],
)
def test_the_cli_refuses_what_private_sampling_cannot_run(args, says):
    result = _train(*args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert says in result.output and "Traceback" not in result.output
    assert lines[-1].startswith("Error:") or "Error:" in result.output
