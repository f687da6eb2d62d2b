#!/usr/bin/env bash
# Personalised budgets: rPDP-FL against uniform DP-SGD at the smallest budget and against no DP
# (rPDP-FL's headline comparison, its `fedavg_rpdp.py`: Ours, StrongForAll, PrivacyFree): one
# `uldp train` run per algorithm and noise seed, all with the same config, budgets and seeds, then
# a table (markdown) and one plot of the task metric against rounds.
#
#   examples/compare-personalized.sh CONFIG.yaml [OUT_DIR] [DISTRIBUTION]
#   examples/compare-personalized.sh examples/rpdp-heart-disease.yaml out/rpdp-heart
#   SEEDS="1 2 3" examples/compare-personalized.sh examples/rpdp-mnist.yaml out/mnist bounded-mix-gauss
#
# DISTRIBUTION (default: the config's) names the budget scenario (`uldp train --distribution`),
# drawn with the config's --seed, so every algorithm sees the same budgets. SEEDS are the noise
# seeds (`--noise-seed`, one run per algorithm and seed; default "1"): the table gives the mean and
# the range over them, the plot the mean and a band from the lowest to the highest.
# Per-algorithm flags (a learning rate tuned per method, say) go in RPDP_FLAGS, UNIDP_FLAGS and
# DEFAULT_FLAGS; EXTRA goes to every run. The config holds options of all three: each algorithm
# warns about and ignores the ones it does not use (e.g. rpdp: --batch-size; default:
# --local-steps, --silo-q). docs/results.md has the runs and the learning rates tuned for them.
set -euo pipefail

CONFIG=${1:?usage: examples/compare-personalized.sh CONFIG.yaml [OUT_DIR] [DISTRIBUTION]}
OUT=${2:-compare-personalized-out}
DISTRIBUTION=${3:-}
ALGOS=${ALGOS:-"rpdp unidp default"}
SEEDS=${SEEDS:-1}
# ULDP and PYTHON, require_config, kept, train_json (examples/find-uldp.sh).
source "$(dirname "${BASH_SOURCE[0]}")/find-uldp.sh"
require_config "$CONFIG"
EXTRA=${EXTRA:-}  # more flags for every run, e.g. EXTRA="--rounds 5"
KEEP=${KEEP:-0}   # KEEP=1: keep runs already in OUT_DIR, run only the missing ones

mkdir -p "$OUT"
for algo in $ALGOS; do
  case "$algo" in
    rpdp) flags=${RPDP_FLAGS:-} ;;
    unidp) flags=${UNIDP_FLAGS:-} ;;
    default) flags=${DEFAULT_FLAGS:-} ;;
    *) echo "Error: ALGOS: $algo is not one of rpdp, unidp, default" >&2; exit 2 ;;
  esac
  for seed in $SEEDS; do
    run="$OUT/$algo-seed$seed"
    kept "$run" && continue
    echo "== $algo, noise seed $seed" >&2
    dist=()
    [[ -n "$DISTRIBUTION" ]] && dist=(--distribution "$DISTRIBUTION")
    # shellcheck disable=SC2086  # flags and EXTRA are word lists
    train_json "$run" --config "$CONFIG" --algo "$algo" "${dist[@]}" --noise-seed "$seed" $flags $EXTRA
  done
done

"$PYTHON" - "$OUT" "$SEEDS" $ALGOS <<'PY'
"""Table (markdown) and one plot from the runs' JSON summaries: mean and range over noise seeds."""
import json
import statistics
import sys
from pathlib import Path

from uldp.trainers.atomic import atomic_write_bytes

out, seeds, algos = Path(sys.argv[1]), sys.argv[2].split(), sys.argv[3:]
LAST = 3  # the reference's "Performance": the mean of the last 3 rounds


def spread(values):
    """'mean' for one value, 'mean (min-max)' for several."""
    mean = statistics.fmean(values)
    return f"{mean:.3f}" if len(values) == 1 else f"{mean:.3f} ({min(values):.3f}-{max(values):.3f})"


def tier_epsilons(row, tiers):
    """Each tier's epsilon after the run and its rate q: `a (q ...)` when both threat models
    agree, else `a \\| b (q ...)` (untrusted parties | honest-but-curious server)."""
    cells = []
    for i, tier in enumerate(tiers, start=1):
        a, b = row[f"tier{i}_epsilon_untrusted"], row[f"tier{i}_epsilon_server"]
        if a is None:
            cells.append("unbounded")
        else:
            both = f"{a:.4g}" if b == a else f"{a:.4g} \\| {b:.4g}"
            cells.append(f"{both} (q {tier['q']:.3g})")
    return cells


runs, rows, first, assumptions = {}, [], None, {}
for algo in algos:
    docs = [json.loads((out / f"{algo}-seed{s}.json").read_text()) for s in seeds]
    s0 = docs[0]["summary"]
    if first is None:
        first, assumptions = s0, docs[0]["assumptions"]
    metric = s0["metric"]
    curves = [[r[metric] for r in d["history"]] for d in docs]
    runs[algo] = curves
    tiers = s0["tiers"]
    # Tiers and epsilons depend on the budgets and sigma, not on the noise seed: the first run's.
    eps = tier_epsilons(docs[0]["history"][-1], tiers)
    check = s0["budget_check"]
    over = f"{check['over_budget']} of {check['count']}"
    sigma = "none (no noise)" if s0["epsilon"] is None else f"{s0['sigma']:.4g}"
    rows.append(
        [algo, sigma, *eps, over,
         spread([c[-1] for c in curves]),
         spread([statistics.fmean(c[-LAST:]) for c in curves]),
         f"{statistics.fmean(d['summary']['elapsed_s'] for d in docs):.1f}"]
    )

s = first
metric = s["metric"]
kind = "synthetic stand-in" if s["synthetic"] else "real data"
budgets = [f"{t['label']} ({t['budget']:.3g})" if t["count"] is None else f"{t['budget']:g}" for t in s["tiers"]]
scenario = assumptions["budgets"].split(":")[0]  # e.g. "ThreeLevels", or the budgets file
title = (f"{s['dataset']} ({kind}), {s['silos']} silos, {s['rounds']} rounds, delta {s['delta']:g}, "
         f"budgets {scenario}, noise seeds {', '.join(seeds)}")
header = ["algo", "sigma", *[f"epsilon (rate q), budget {b}" for b in budgets], "records over budget",
          f"final {metric}", f"{metric}, mean of last {LAST} rounds", "seconds"]
lines = [title, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
lines += ["| " + " | ".join(row) + " |" for row in rows]
if len(seeds) > 1:
    lines += ["", f"{metric}: mean over the {len(seeds)} noise seeds (lowest-highest); seconds: mean."]
atomic_write_bytes(out / "table.md", ("\n".join(lines) + "\n").encode())

import matplotlib

matplotlib.use("Agg")
import io

from matplotlib import pyplot as plt
from matplotlib.ticker import MaxNLocator

LABELS = {"rpdp": "rPDP-FL (rpdp)", "unidp": "uniform DP-SGD, smallest budget (unidp)",
          "default": "no DP (default)"}
fig, ax = plt.subplots(figsize=(6.4, 4))
for algo, curves in runs.items():
    rounds = range(1, len(curves[0]) + 1)
    mean = [statistics.fmean(v) for v in zip(*curves)]
    (line,) = ax.plot(rounds, mean, label=LABELS.get(algo, algo))
    if len(curves) > 1:
        ax.fill_between(rounds, [min(v) for v in zip(*curves)], [max(v) for v in zip(*curves)],
                        color=line.get_color(), alpha=0.2, linewidth=0)
ax.set_xlabel("round")
ax.set_ylabel(f"test {metric.replace('_', '-')}")
ax.set_ylim(0, 1)  # the whole range: noise between rounds is not magnified into a trend
ax.xaxis.set_major_locator(MaxNLocator(integer=True))
ax.grid(alpha=0.3)
ax.legend(fontsize=8, loc="lower right")
band = ", band: lowest-highest seed" if len(seeds) > 1 else ""
tiers = s["tiers"]
shown = (" / ".join(f"{t['budget']:g}" for t in tiers) if tiers[0]["count"] is not None
         else f"{tiers[0]['budget']:.3g} to {tiers[-1]['budget']:.3g}")  # quantiles: the range
ax.set_title(f"{s['dataset']}, {scenario} budgets {shown}\nnoise seeds {', '.join(seeds)}{band}", fontsize=9)
fig.tight_layout()
buffer = io.BytesIO()
fig.savefig(buffer, format="png", dpi=110)
plt.close(fig)
atomic_write_bytes(out / "compare.png", buffer.getvalue())
print("\n".join(lines))
print(f"\nplot: {out / 'compare.png'}")
PY
