"""Wall-clock time of `uldp report` run as a fresh process, as a user would run it (issue 17).

    python benchmarks/bench_report.py [--repeat 5] [--format table|json]

The goal: a report for a 1e5-step plan with PLD and PRV in under 5 s. Each statement accounts
every claim by RDP, PLD and PRV (the defaults) and computes each one's attack bound from its
privacy curve; the report also re-reads a run's record. Median and best of `--repeat` runs after
one warm-up (`bench_cli.run_commands`). Figures go to docs/performance.md.
"""

from __future__ import annotations

from bench_cli import run_commands  # same folder: run as a script

FIG2 = ["--sigma", "5", "--q", "0.01", "--steps", "100000"]
COMMANDS = {
    "report (Fig. 2: record level, rdp + pld + prv)": ["report", *FIG2, "--format", "json"],
    "report (Fig. 2: record level and k = 8, rdp + pld + prv; groups rdp, normal, pld)": [
        "report",
        *FIG2,
        "--k",
        "8",
        "--format",
        "json",
    ],
    "report (uldp-avg, 1e5 rounds at q 0.01: user level and the server's view)": [
        "report",
        *["--algo", "uldp-avg", "--sigma", "5", "--rounds", "100000", "--user-q", "0.01"],
        "--format",
        "json",
    ],
    "account (Fig. 2: record level, rdp + pld + prv), for comparison": [
        "account",
        *FIG2,
        "--accountant",
        "rdp,pld,prv",
        "--format",
        "json",
    ],
}


def main() -> None:
    run_commands(COMMANDS, default_repeat=5, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    main()
