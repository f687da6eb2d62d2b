#!/usr/bin/env bash
# Subject-level DP in FL (Marathe & Kanani): their Fig. 1 and Fig. 2 on one config. Two sets of
# `uldp train` runs, each with the config and every noise seed:
#   1. the algorithms (ALGOS) on the config's allocation: final accuracy and the epsilons (the
#      worst subject's per member and federation-wide, the item-level and user-level LDP ones),
#      the largest subject group Z and the distinct subjects per mini-batch, accuracy against
#      rounds (FIGURES/subject-mnist.png);
#   2. the power allocation of §4.2 (`--allocation power --alpha A`, ALPHAS) for ALPHA_ALGOS:
#      accuracy, mean Z and subjects per mini-batch against alpha (FIGURES/subject-alpha.png).
# Then OUT_DIR/table.md (markdown, also printed): mean and range over the seeds.
#
#   examples/compare-subject.sh CONFIG.yaml [OUT_DIR]
#   SEEDS="1 2 3" FIGURES=docs/results examples/compare-subject.sh examples/subject-mnist.yaml out/subject
#   ALGOS="higradavgdp default" ALPHAS="1 16" EXTRA="--rounds 2" examples/compare-subject.sh examples/subject-mnist.yaml /tmp/s
#
# SEEDS: noise seeds (`--noise-seed`, default "1"). ALGOS: default "default localitemdp
# higradavgdp localgroupdp userldp". ALPHAS: default "1 4 16" (empty: no sweep). ALPHA_ALGOS:
# default "localitemdp higradavgdp localgroupdp". FIGURES: where the two PNGs go (default
# OUT_DIR). EXTRA goes to every run; KEEP=1 keeps runs already in OUT_DIR. Each run's summary is
# OUT_DIR/<run>.json (written whole or not at all), its rounds OUT_DIR/<run>.jsonl.
set -euo pipefail

CONFIG=${1:?usage: examples/compare-subject.sh CONFIG.yaml [OUT_DIR]}
OUT=${2:-compare-subject-out}
SEEDS=${SEEDS:-1}
ALGOS=${ALGOS:-"default localitemdp higradavgdp localgroupdp userldp"}
ALPHAS=${ALPHAS-"1 4 16"}
ALPHA_ALGOS=${ALPHA_ALGOS:-"localitemdp higradavgdp localgroupdp"}
# ULDP and PYTHON, require_config, kept, train_json (examples/find-uldp.sh).
source "$(dirname "${BASH_SOURCE[0]}")/find-uldp.sh"
require_config "$CONFIG"
EXTRA=${EXTRA:-}  # more flags for every run, e.g. EXTRA="--rounds 2"
KEEP=${KEEP:-0}   # KEEP=1: keep runs already in OUT_DIR, run only the missing ones
FIGURES=${FIGURES:-$OUT}

# one RUN ARGS...: one timed run into OUT/RUN.json (kept with KEEP=1), its wall-clock in RUN.wall.
one() {
  local run="$OUT/$1"
  shift
  kept "$run" && return 0
  echo "== $(basename "$run")" >&2
  local start end
  start=$(date +%s.%N)
  # shellcheck disable=SC2086  # EXTRA is a word list
  train_json "$run" --config "$CONFIG" "$@" $EXTRA
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f\n", b - a }' > "$run.wall"
}

mkdir -p "$OUT" "$FIGURES"
for seed in $SEEDS; do
  for algo in $ALGOS; do
    one "main-$algo-seed$seed" --algo "$algo" --noise-seed "$seed"
  done
  for alpha in $ALPHAS; do
    for algo in $ALPHA_ALGOS; do
      one "alpha$alpha-$algo-seed$seed" --algo "$algo" --allocation power --alpha "$alpha" --noise-seed "$seed"
    done
  done
done

"$PYTHON" - "$OUT" "$FIGURES" "$SEEDS" "$ALGOS" "$ALPHAS" "$ALPHA_ALGOS" <<'PY'
"""Tables (markdown) and two plots from the runs' JSON summaries: mean and range over noise seeds."""
import io
import json
import statistics
import sys
from pathlib import Path

from uldp.trainers.atomic import atomic_write_bytes

out, figures = Path(sys.argv[1]), Path(sys.argv[2])
seeds, algos, alphas, alpha_algos = (arg.split() for arg in sys.argv[3:7])
NAMES = {"default": "FedAvg (default)", "localitemdp": "LocalItemDP", "higradavgdp": "HiGradAvgDP",
         "localgroupdp": "LocalGroupDP", "userldp": "UserLDP"}
EPS_STYLE = {"higradavgdp": dict(linewidth=4, alpha=0.6), "localgroupdp": dict(linewidth=2, linestyle="--"),
             "userldp": dict(linewidth=1.5, linestyle=":")}
COLOURS = {"default": "black", "localitemdp": "tab:blue", "higradavgdp": "tab:green",
           "localgroupdp": "tab:orange", "userldp": "tab:red"}


def load(stem):
    runs = []
    for seed in seeds:
        doc = json.loads((out / f"{stem}-seed{seed}.json").read_text())
        wall = out / f"{stem}-seed{seed}.wall"
        doc["wall_s"] = float(wall.read_text()) if wall.exists() else doc["summary"]["elapsed_s"]
        runs.append(doc)
    return runs


def spread(values, digits=3):
    """'mean' for one value or equal values, else 'mean (min-max)'; '-' when there is none."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) == 1 or max(values) - min(values) < 0.5 * 10 ** -digits:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def final(runs, key):
    return [d["history"][-1].get(key) for d in runs]


def pooled(runs, kind):
    """A mini-batch histogram (summary batch_z / batch_subjects) pooled over the runs."""
    counts = {}
    for d in runs:
        for value, n in (d["summary"].get(f"batch_{kind}") or {}).items():
            counts[int(value)] = counts.get(int(value), 0) + n
    return dict(sorted(counts.items()))


def mean_of(hist):
    total = sum(hist.values())
    return sum(v * n for v, n in hist.items()) / total if total else None


def share(hist):
    """'1: 2%, 2: 60%, ...' (the shares of the mini-batches)."""
    total = sum(hist.values())
    return ", ".join(f"{v}: {n / total:.0%}" for v, n in hist.items()) if total else "-"


def quantiles(hist):
    """'mean (min, median, max)' of a histogram."""
    if not hist:
        return "-"
    values = [v for v, n in hist.items() for _ in range(n)]
    return f"{statistics.fmean(values):.1f} ({min(values)}, {statistics.median(values):g}, {max(values)})"


def group_z(runs):
    zs = {d["summary"].get("group_size") for d in runs} - {None}
    return ", ".join(str(z) for z in sorted(zs)) or "-"


main = {algo: load(f"main-{algo}") for algo in algos}
sweep = {(alpha, algo): load(f"alpha{alpha}-{algo}") for alpha in alphas for algo in alpha_algos}
s0 = next(iter(main.values()))[0]["summary"] if main else next(iter(sweep.values()))[0]["summary"]
metric = s0["metric"]
targets = {d["summary"].get("epsilon_target") for runs in [*main.values(), *sweep.values()] for d in runs} - {None}
budget = ", ".join(f"{t:g}" for t in sorted(targets)) or "-"  # --epsilon of the private runs
kind = "synthetic stand-in" if s0["synthetic"] else "real data"
steps = {d["summary"].get("local_steps") for runs in [*main.values(), *sweep.values()] for d in runs} - {None}
title = (f"{s0['dataset']} ({kind}), {s0['model']}, {s0['users']} subjects over {s0['silos']} members, "
         f"{s0['train_records']} training items, {s0['rounds']} rounds of {', '.join(map(str, sorted(steps)))} local "
         f"step(s), lr {s0['lr']:g}, C = {s0['clip']:g}, delta {s0['delta']:g}, noise seeds {', '.join(seeds)}")
lines = [title, ""]
if main:
    header = ["algorithm", "sigma", "q", "Z", f"final {metric}", "epsilon (subject, member)",
              "epsilon (subject, federation)", "epsilon (item)", "epsilon (user-level LDP)", "seconds"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for algo, runs in main.items():
        s = runs[0]["summary"]
        private = s.get("item_q") is not None
        lines.append("| " + " | ".join([
            algo,
            f"{s['sigma']:.4g}" if private else "- (no noise)",
            f"{s['item_q']:.3f}" if private else "-",
            group_z(runs),
            spread([d["summary"][f"final_{metric}"] for d in runs]),
            spread(final(runs, "subject_epsilon_member"), 2),
            spread(final(runs, "subject_epsilon_federation"), 2),
            spread(final(runs, "item_epsilon"), 2),
            spread(final(runs, "user_ldp_epsilon"), 2),
            f"{statistics.fmean(d['wall_s'] for d in runs):.0f}",
        ]) + " |")
    lines += ["", f"final {metric}: after the last round, mean over the noise seeds (lowest-highest); epsilons "
              "after the last round (the worst subject's; the same for every seed); q: each item's Poisson rate "
              "per mini-batch (B / the smallest member); Z: LocalGroupDP's group size (--group-k); seconds: "
              "mean wall-clock per run."]
    batched = [algo for algo in algos if pooled(main[algo], "z")]
    if batched:
        lines += ["", "Mini-batches (all members, rounds and noise seeds): the largest subject group Z (share of the "
                  "mini-batches) and the distinct subjects per mini-batch, mean (min, median, max)", "",
                  "| algorithm | mini-batches | largest group Z per mini-batch | mean Z | subjects per mini-batch |",
                  "|---|---|---|---|---|"]
        for algo in batched:
            z = pooled(main[algo], "z")
            lines.append(f"| {algo} | {sum(z.values())} | {share(z)} | {mean_of(z):.2f} | "
                         f"{quantiles(pooled(main[algo], 'subjects'))} |")
if sweep:
    lines += ["", f"Power allocation (--allocation power --alpha A): {metric} after the last round, mean "
              "(lowest-highest) over the noise seeds", "",
              "| alpha | algorithm | sigma | q | Z | epsilon (subject, federation) | epsilon (item) | "
              f"mean Z per mini-batch | subjects per mini-batch | final {metric} |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for (alpha, algo), runs in sweep.items():
        s = runs[0]["summary"]
        private = s.get("item_q") is not None
        z = pooled(runs, "z")
        lines.append("| " + " | ".join([
            alpha, algo, f"{s['sigma']:.4g}" if private else "- (no noise)",
            f"{s['item_q']:.3f}" if private else "-", group_z(runs),
            spread(final(runs, "subject_epsilon_federation"), 2), spread(final(runs, "item_epsilon"), 2),
            f"{mean_of(z):.2f}" if z else "-", quantiles(pooled(runs, "subjects")),
            spread([d["summary"][f"final_{metric}"] for d in runs]),
        ]) + " |")
atomic_write_bytes(out / "table.md", ("\n".join(lines) + "\n").encode())

import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt
from matplotlib.ticker import MaxNLocator


def save(fig, path):
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def mean_curve(runs, key):
    rows = list(zip(*[[row.get(key) for row in d["history"]] for d in runs]))
    return [statistics.fmean(v) if None not in v else None for v in rows]


written = []
if main:
    fig, (acc_ax, eps_ax) = plt.subplots(1, 2, figsize=(11, 4))
    for algo, runs in main.items():
        rounds = [row["round"] for row in runs[0]["history"]]
        style = dict(color=COLOURS.get(algo), label=NAMES.get(algo, algo))
        acc = mean_curve(runs, metric)
        acc_ax.plot(rounds, acc, **style)
        if len(runs) > 1:
            lows = [min(v) for v in zip(*[[row[metric] for row in d["history"]] for d in runs])]
            highs = [max(v) for v in zip(*[[row[metric] for row in d["history"]] for d in runs])]
            acc_ax.fill_between(rounds, lows, highs, color=COLOURS.get(algo), alpha=0.15, linewidth=0)
        federation = mean_curve(runs, "subject_epsilon_federation")
        if None not in federation:  # the calibrated ones coincide at the budget: told apart by style
            eps_ax.plot(rounds, federation, **style, **EPS_STYLE.get(algo, {}))
        item = mean_curve(runs, "item_epsilon")
        if algo == "localitemdp" and None not in item:
            eps_ax.plot(rounds, item, color=COLOURS[algo], linestyle="--", linewidth=1,
                        label=f"{NAMES[algo]}, item-level")
    acc_ax.set_ylabel(f"test {metric}")
    acc_ax.set_ylim(0, 1)  # the whole range: noise between rounds is not magnified into a trend
    acc_ax.legend(fontsize=8, loc="lower right")
    eps_ax.set_yscale("log")
    eps_ax.set_ylabel(f"subject-level epsilon, federation (delta {s0['delta']:g})")
    eps_ax.legend(fontsize=8, loc="upper left")
    for ax in (acc_ax, eps_ax):
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    fig.suptitle(f"{s0['dataset']}, {s0['users']} subjects over {s0['silos']} members: subject-level epsilon "
                 f"{budget} federation-wide (LocalItemDP: item-level)\nmean over noise seeds {', '.join(seeds)} "
                 "(band: lowest-highest)", fontsize=9)
    fig.tight_layout()
    save(fig, figures / "subject-mnist.png")
    written.append(figures / "subject-mnist.png")
if sweep:
    fig, (acc_ax, batch_ax) = plt.subplots(1, 2, figsize=(11, 4))
    xs = [float(a) for a in alphas]
    for algo in alpha_algos:
        finals = [[d["summary"][f"final_{metric}"] for d in sweep[a, algo]] for a in alphas]
        means = [statistics.fmean(v) for v in finals]
        errors = [[m - min(v) for m, v in zip(means, finals)], [max(v) - m for m, v in zip(means, finals)]]
        acc_ax.errorbar(xs, means, yerr=errors, marker="o", capsize=3, color=COLOURS.get(algo),
                        label=NAMES.get(algo, algo))
    acc_ax.set_ylabel(f"final test {metric}")
    acc_ax.set_ylim(0, 1)
    acc_ax.legend(fontsize=8, loc="lower left")
    first = alpha_algos[0]
    z_means = [mean_of(pooled(sweep[a, first], "z")) for a in alphas]
    subject_means = [mean_of(pooled(sweep[a, first], "subjects")) for a in alphas]
    if None not in z_means:
        batch_ax.plot(xs, z_means, marker="o", color="tab:purple", label="mean largest group Z")
    batch_ax.set_ylabel("mean largest subject group Z per mini-batch", color="tab:purple")
    batch_ax.set_ylim(bottom=0)
    twin = batch_ax.twinx()
    if None not in subject_means:
        twin.plot(xs, subject_means, marker="s", color="tab:brown", label="mean subjects per mini-batch")
    twin.set_ylabel("mean distinct subjects per mini-batch", color="tab:brown")
    twin.set_ylim(bottom=0)
    for ax in (acc_ax, batch_ax):
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x:g}" for x in xs])
        ax.set_xlabel("alpha of the power allocation P(x; alpha)")
        ax.grid(alpha=0.3)
    fig.suptitle(f"{s0['dataset']}, {s0['users']} subjects over {s0['silos']} members by P(x; alpha): subject-level "
                 f"epsilon {budget} federation-wide (LocalItemDP: item-level)\nmean over noise seeds {', '.join(seeds)} "
                 "(bars: lowest-highest); right: the mini-batches of every member and round", fontsize=9)
    fig.tight_layout()
    save(fig, figures / "subject-alpha.png")
    written.append(figures / "subject-alpha.png")
print("\n".join(lines))
for path in written:
    print(f"plot: {path}")
PY
