"""ULDP-AVG-w with Protocol 1 on a loopback Flower deployment: the heart-disease data's four
hospitals as four silos, each a SuperNode that reads only its own hospital's records.

    python examples/flower/heart_disease.py [--rounds 3] [--metrics run.jsonl] [--test-keys]

Writes each hospital's training records to its own partition file (uldp.trainers.flower.
partitions), then `federation.py` brings up a SuperLink (TLS, SuperNode authentication) and one
SuperNode per file, submits `uldp train --algo uldp-avg-w --secure --engine flower` as the
ServerApp's run (examples/flower/uldp_app), streams its table, and tears everything down,
leaving no process behind (also on Ctrl-C). Exit status: the run's (federation.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import federation  # noqa: E402  (examples/flower/federation.py)

USERS = 200  # `uldp train --dataset heart-disease`'s default
SEED = 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="training rounds (default 3)")
    parser.add_argument(
        "--metrics", type=Path, default=Path("heart-disease-flower.jsonl"), help="JSONL per round"
    )
    parser.add_argument("--noise-seed", type=int, default=None, help="fix the noise (experiments only)")
    parser.add_argument(
        "--test-keys", action="store_true", help="1024-bit Paillier keys: INSECURE, tests only"
    )
    parser.add_argument("--keep-dir", action="store_true", help="keep the deployment's directory (logs)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")

    from uldp.trainers.data import load_dataset
    from uldp.trainers.flower.partitions import write_partitions

    data = load_dataset("heart-disease", users=USERS, seed=SEED)
    train_args = [
        "--algo uldp-avg-w --dataset heart-disease --secure",
        f"--users {USERS} --seed {SEED} --rounds {args.rounds} --metrics {args.metrics.resolve()}",
    ]
    if args.test_keys:
        train_args.append("--key-bits 1024 --test-keys")
    if args.noise_seed is not None:
        train_args.append(f"--noise-seed {args.noise_seed}")
    with tempfile.TemporaryDirectory(prefix="uldp-hospitals-") as directory:
        files = write_partitions(data, directory)  # one file per hospital: all a SuperNode gets
        print(f"heart-disease: {data.n_silos} hospitals, {len(data.y_train)} training records, {USERS} users")
        command = ["--app", str(HERE / "uldp_app"), "--run-config", f"train-args='{' '.join(train_args)}'"]
        for path in files:
            command += ["--data-file", str(path)]
        if args.keep_dir:
            command.append("--keep-dir")
        return federation.main(command)


if __name__ == "__main__":
    sys.exit(main())
