"""Your own torch model, trained with user-level DP: `uldp.train` on the bundled MNIST sample.

    python examples/own_model.py    # about 15 s on 2 cores

`make_model` is an ordinary torch factory (a small CNN). Its normalisation is GroupNorm, not
BatchNorm: BatchNorm mixes the records of a batch, so one user's update would depend on other
users' records and the per-user clipping would no longer bound a user's influence (Opacus'
`ModuleValidator` refuses it for the same reason; `uldp.train` does too). The same factory serves
the command line:

    uldp train --algo uldp-avg --data examples/own_data.py:load --model examples/own_model.py:make_model
"""

from __future__ import annotations

import math

from torch import nn

import uldp


def make_model(feature_shape: tuple[int, ...], n_classes: int) -> nn.Module:
    """A small CNN for images of shape (channels, height, width), one output per class: a
    convolution, GroupNorm, pooling, and a linear layer."""
    channels, height, width = feature_shape
    return nn.Sequential(
        nn.Conv2d(channels, 8, kernel_size=5, stride=2, padding=2),
        nn.GroupNorm(2, 8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(8 * ((height + 1) // 2 // 2) * ((width + 1) // 2 // 2), n_classes),
    )


def main() -> None:
    # 100 users, each sampled with probability 0.5 per round: the released model's epsilon is
    # amplified by the sampling, the server's (which draws the sample) is not (ULDP-FL Remark 1).
    run = uldp.train(
        make_model,
        "mnist",
        algo="uldp-avg",
        users=100,
        rounds=5,
        sigma=1.0,
        user_q=0.5,
        lr=0.2,
        global_lr=10.0,
        local_epochs=2,
        local_batch_size=16,
        seed=0,
        noise_seed=1,  # reproducible noise: an experiment, not a private release
    )
    print(f"data: {run.summary['dataset']}: {run.summary['source']}")
    print(
        f"model: {run.summary['model']}, {run.summary['parameters']} parameters ({type(run.model).__name__})"
    )
    for row in run.history:
        print(
            f"round {row['round']}: {run.metric} {row[run.metric]:.3f}  epsilon {row['epsilon']:.3f} "
            f"(server {row['server_epsilon']:.3f})"
        )
    server = run.server_epsilon if run.server_epsilon is not None else math.nan
    print(
        f"user-level epsilon after {len(run.history)} rounds at delta {run.delta:g}: {run.epsilon:.3f} "
        f"for the released model, {server:.3f} against the server"
    )


if __name__ == "__main__":
    main()
