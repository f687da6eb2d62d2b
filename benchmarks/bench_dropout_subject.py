"""Wall-clock time of `uldp dropout` and `uldp subject`, run as fresh processes.

    python benchmarks/bench_dropout_subject.py [--repeat 3] [--format table|json]

Median and best of `--repeat` runs after one warm-up run, with the machine they ran on.
"""

from __future__ import annotations

from bench_cli import run_commands  # same folder: run as a script

COMMANDS = {
    "dropout: Table 2 (3 dropouts x 6 round counts x 3 budgets, ours + paper)": [
        "dropout",
        "--sigma",
        "1",
        "--silo-q",
        "0.01",
        "--dropout",
        "0,0.1,0.3",
        "--silos-per-round",
        "50",
        "--rounds",
        "1,10,100,1000,10000,100000",
        "--epsilon",
        "2,4,8",
        "--format",
        "json",
    ],
    "dropout: one setting, PLD accountant": [
        "dropout",
        "--sigma",
        "1",
        "--silo-q",
        "0.01",
        "--dropout",
        "0.1",
        "--rounds",
        "1000",
        "--no-paper",
        "--accountant",
        "pld",
        "--format",
        "json",
    ],
    "subject: default holding (every member, one item), budget, LocalGroupDP Z = 1..4": [
        "subject",
        "--silos",
        "16",
        "--silos-per-round",
        "16",
        "--rounds",
        "100",
        "--local-steps",
        "10",
        "--record-q",
        "0.01",
        "--sigma",
        "1",
        "--epsilon",
        "4",
        "--k",
        "1,2,3,4",
        "--format",
        "json",
    ],
    "subject: default holding, PLD accountant": [
        "subject",
        "--silos",
        "16",
        "--silos-per-round",
        "16",
        "--rounds",
        "100",
        "--local-steps",
        "10",
        "--record-q",
        "0.01",
        "--sigma",
        "1",
        "--accountant",
        "pld",
        "--format",
        "json",
    ],
}


def main() -> None:
    run_commands(COMMANDS, default_repeat=3, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    main()
