#!/usr/bin/env bash
# Dropouts with and without the noise calibration of Baek et al. 2021 (Algorithm 2; its Fig. 2):
# one `uldp train --algo dp-fedavg-robust` run per dropout rate, calibration on / off and noise
# seed, all with the same config, then a table (markdown) of the epsilon spent and the accuracy,
# the accuracy cost of calibration, and one plot of accuracy and epsilon (model) against rounds.
#
#   examples/compare-dropout.sh CONFIG.yaml [OUT_DIR]
#   SEEDS="1 2 3" examples/compare-dropout.sh examples/dropout-robust-mnist.yaml out/dropout
#   DROPOUTS="0 0.3" EXTRA="--rounds 10" examples/compare-dropout.sh examples/dropout-robust-mnist.yaml /tmp/d
#
# DROPOUTS are the rates (`--dropout`, lost before the upload unless EXTRA says `--dropout-at
# calibration`; default "0 0.1 0.3"); a rate of 0 runs calibrated only (without dropouts the two
# spend the same epsilon). SEEDS are the noise seeds (`--noise-seed`; default "1"): they fix the
# sampling, the dropouts and the noise, so the calibrated and uncalibrated runs of one seed lose
# the same participants in the same rounds. The table gives the mean and the range over the seeds,
# the plot the mean. EXTRA goes to every run. docs/dropout.md has the runs.
set -euo pipefail

CONFIG=${1:?usage: examples/compare-dropout.sh CONFIG.yaml [OUT_DIR]}
OUT=${2:-compare-dropout-out}
DROPOUTS=${DROPOUTS:-"0 0.1 0.3"}
SEEDS=${SEEDS:-1}
# ULDP and PYTHON, require_config, kept, train_json (examples/find-uldp.sh).
source "$(dirname "${BASH_SOURCE[0]}")/find-uldp.sh"
require_config "$CONFIG"
EXTRA=${EXTRA:-}  # more flags for every run, e.g. EXTRA="--rounds 10"
KEEP=${KEEP:-0}   # KEEP=1: keep runs already in OUT_DIR, run only the missing ones

mkdir -p "$OUT"
for rate in $DROPOUTS; do
  modes="calibration no-calibration"
  [[ "$rate" == 0 || "$rate" == 0.0 ]] && modes="calibration"
  for mode in $modes; do
    for seed in $SEEDS; do
      run="$OUT/dropout$rate-$mode-seed$seed"
      kept "$run" && continue
      echo "== dropout $rate, --$mode, noise seed $seed" >&2
      start=$(date +%s.%N)
      # shellcheck disable=SC2086  # EXTRA is a word list
      train_json "$run" --config "$CONFIG" --dropout "$rate" "--$mode" --noise-seed "$seed" $EXTRA
      end=$(date +%s.%N)
      awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f\n", b - a }' > "$run.wall"
    done
  done
done

"$PYTHON" - "$OUT" "$SEEDS" $DROPOUTS <<'PY'
"""Tables (markdown) and one plot from the runs' JSON summaries: mean and range over noise seeds."""
import json
import statistics
import sys
from pathlib import Path

from uldp.trainers.atomic import atomic_write_bytes

out, seeds, rates = Path(sys.argv[1]), sys.argv[2].split(), sys.argv[3:]
LAST = 3  # accuracy: the mean of the last 3 rounds of each run


def spread(values, digits=3):
    """'mean' for one value or equal values, else 'mean (min-max)'."""
    mean = statistics.fmean(values)
    if len(values) == 1 or max(values) - min(values) < 0.5 * 10 ** -digits:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def load(rate, mode):
    runs = []
    for seed in seeds:
        stem = f"dropout{rate}-{mode}-seed{seed}"  # the rate's dot is no suffix: no with_suffix
        doc = json.loads((out / f"{stem}.json").read_text())
        wall = out / f"{stem}.wall"
        doc["wall_s"] = float(wall.read_text()) if wall.exists() else doc["summary"]["elapsed_s"]
        runs.append(doc)
    return runs


settings = []  # (rate, mode, runs)
for rate in rates:
    modes = ["calibration"] if float(rate) == 0 else ["calibration", "no-calibration"]
    settings += [(rate, mode, load(rate, mode)) for mode in modes]

s0 = settings[0][2][0]["summary"]
metric = s0["metric"]
last = {}  # (rate, mode) -> per-seed mean of the last rounds
rows = []
for rate, mode, runs in settings:
    hist = [d["history"] for d in runs]
    last[rate, mode] = [statistics.fmean(r[metric] for r in h[-LAST:]) for h in hist]
    sampled = sum(r["participants"] for h in hist for r in h)
    dropped = sum(r["dropped_upload"] + r["dropped_calibration"] for h in hist for r in h)
    rows.append([
        rate, "yes" if mode == "calibration" else "no",
        f"{dropped} of {sampled} ({dropped / sampled:.1%})",
        spread([d["summary"]["epsilon"] for d in runs]),
        spread([d["summary"]["server_epsilon"] for d in runs], 0),
        f"{runs[0]['summary']['target_epsilon']:.3f}",
        spread(last[rate, mode]),
        f"{statistics.fmean(d['wall_s'] for d in runs):.0f}",
    ])

kind = "synthetic stand-in" if s0["synthetic"] else "real data"
title = (f"{s0['dataset']} ({kind}), {s0['model']}, {s0['silos']} participants sampled at q = {s0['user_q']:g}, "
         f"z = {s0['sigma']:g}, C = {s0['clip']:g}, {s0['rounds']} rounds, delta {s0['delta']:g}, "
         f"noise seeds {', '.join(seeds)}")
header = ["dropout", "calibration", "participants dropped (of sampled)", "epsilon (model)",
          "epsilon (server)", "target epsilon", f"{metric}, mean of last {LAST} rounds", "seconds"]
lines = [title, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
lines += ["| " + " | ".join(row) + " |" for row in rows]
lines += ["", f"epsilon and {metric}: mean over the noise seeds (lowest-highest); seconds: mean wall-clock "
          "per run; target: the same run without dropouts (`uldp dropout --dropout 0`)."]

pairs = [r for r in rates if float(r) > 0]
if pairs:
    cost = ["", f"Accuracy cost of calibration ({metric}, mean of last {LAST} rounds, calibrated minus "
            "uncalibrated, same noise seed)", "",
            "| dropout | per seed | mean | epsilon (model) saved |", "|---|---|---|---|"]
    for rate in pairs:
        diff = [a - b for a, b in zip(last[rate, "calibration"], last[rate, "no-calibration"])]
        eps = {m: statistics.fmean(d["summary"]["epsilon"] for d in runs)
               for r, m, runs in settings if r == rate}
        cost.append(f"| {rate} | {' / '.join(f'{x:+.3f}' for x in diff)} | {statistics.fmean(diff):+.3f} | "
                    f"{eps['no-calibration']:.3f} -> {eps['calibration']:.3f} |")
    lines += cost
atomic_write_bytes(out / "table.md", ("\n".join(lines) + "\n").encode())

import matplotlib

matplotlib.use("Agg")
import io

from matplotlib import pyplot as plt
from matplotlib.ticker import MaxNLocator

COLOURS = ["black", "tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange"]
fig, (acc_ax, eps_ax) = plt.subplots(1, 2, figsize=(10, 4))
for i, rate in enumerate(rates):
    for r, mode, runs in settings:
        if r != rate:
            continue
        hist = [d["history"] for d in runs]
        rounds = [row["round"] for row in hist[0]]
        calibrated = mode == "calibration"
        label = f"dropout {rate}" + ("" if float(rate) == 0 else (", calibrated" if calibrated else ", not calibrated"))
        style = dict(color=COLOURS[i % len(COLOURS)], linestyle="-" if calibrated else "--",
                     linewidth=1.2 if calibrated else 1.0)
        acc_ax.plot(rounds, [statistics.fmean(v) for v in zip(*[[row[metric] for row in h] for h in hist])],
                    label=label, **style)
        eps_ax.plot(rounds, [statistics.fmean(v) for v in zip(*[[row["epsilon"] for row in h] for h in hist])],
                    label=label, **style)
acc_ax.set_ylabel(f"test {metric}")
acc_ax.set_ylim(0, 1)  # the whole range: noise between rounds is not magnified into a trend
eps_ax.set_ylabel("epsilon (model), delta %g" % s0["delta"])
eps_ax.set_ylim(bottom=0)
for ax in (acc_ax, eps_ax):
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
acc_ax.legend(fontsize=8, loc="lower right")
eps_ax.legend(fontsize=8, loc="lower right")
fig.suptitle(f"{s0['dataset']}, dp-fedavg-robust, q = {s0['user_q']:g}, z = {s0['sigma']:g}: mean over noise seeds "
             f"{', '.join(seeds)} (calibrated runs spend the dropout-0 epsilon)", fontsize=9)
fig.tight_layout()
buffer = io.BytesIO()
fig.savefig(buffer, format="png", dpi=110)
plt.close(fig)
atomic_write_bytes(out / "compare.png", buffer.getvalue())
print("\n".join(lines))
print(f"\nplot: {out / 'compare.png'}")
PY
