#!/usr/bin/env bash
# Compare the ULDP-FL algorithms at one sigma on one data set (ULDP-FL §5.2, Figures 4-7):
# one `uldp train` run per algorithm, then a table (markdown) and a plot of utility, test loss
# and epsilon against rounds.
#
#   examples/compare-algorithms.sh [CONFIG.yaml] [OUT_DIR] [SIGMA]   (SIGMA: default the config's)
#   examples/compare-algorithms.sh examples/train-heart-disease.yaml out/heart 5
#   ALGOS="uldp-avg uldp-avg-w" examples/compare-algorithms.sh examples/train-creditcard.yaml
#
# Hyper-parameters are set per method, as in ULDP-FL §5.1: the silo-level algorithms (default,
# uldp-naive, uldp-group) average whole silo deltas and take their own global (and, for DP-SGD,
# local) learning rates below; the per-user algorithms keep the config's, whose global-lr ULDP-FL's
# server step divides by |U||S| (Algorithm 3 line 6).
set -euo pipefail

CONFIG=${1:-"$(dirname "${BASH_SOURCE[0]}")/train-heart-disease.yaml"}  # found from any directory
OUT=${2:-compare-out}
SIGMA=${3:-}
ALGOS=${ALGOS:-"default uldp-naive uldp-group uldp-avg uldp-avg-w uldp-sgd uldp-sgd-w"}
# ULDP and PYTHON: the uldp command and its Python (examples/find-uldp.sh).
source "$(dirname "${BASH_SOURCE[0]}")/find-uldp.sh"
EXTRA=${EXTRA:-}  # more flags for every run, e.g. EXTRA="--rounds 10 --threads 1"
KEEP=${KEEP:-0}   # KEEP=1: keep runs already in OUT_DIR, run only the missing ones

mkdir -p "$OUT"
for algo in $ALGOS; do
  extra=()
  case "$algo" in
    default) extra=(--global-lr 1) ;;
    # Its noise on the sum has std sigma * 2|S|C: a small server step keeps it from diverging.
    uldp-naive) extra=(--global-lr 0.05) ;;
    # DP-SGD takes ceil(Q / gamma) noisy steps per round: a smaller local step.
    uldp-group) extra=(--global-lr 1 --lr 0.05 --group-k median) ;;
  esac
  if [[ "$algo" == "uldp-group" ]] && grep -q "dataset: gbsg2" "$CONFIG"; then
    echo "skip uldp-group: not defined for survival data" >&2
    continue
  fi
  if [[ "$KEEP" == 1 && -s "$OUT/$algo.json" ]]; then
    echo "keep $OUT/$algo.json" >&2
    continue
  fi
  echo "== $algo" >&2
  # default adds no noise: `uldp train` refuses a --sigma it would ignore.
  [[ -n "$SIGMA" && "$algo" != default ]] && extra+=(--sigma "$SIGMA")
  "$ULDP" train --config "$CONFIG" --algo "$algo" "${extra[@]}" $EXTRA \
    --metrics "$OUT/$algo.jsonl" --format json > "$OUT/$algo.json"
done

"$PYTHON" - "$OUT" $ALGOS <<'PY'
"""Table (markdown) and plot from the runs' JSON summaries and metrics files."""
import json
import math
import sys
from pathlib import Path

from uldp.trainers.plot import plot_runs

out = Path(sys.argv[1])
runs, rows, metric, data = {}, [], None, None
for algo in sys.argv[2:]:
    path = out / f"{algo}.json"
    if not path.exists():
        continue
    doc = json.loads(path.read_text())
    s = doc["summary"]
    metric, data = s["metric"], s
    runs[s["algo"]] = doc["history"]
    eps = s["epsilon"]
    rows.append((s["algo"], s[f"final_{metric}"], s[f"best_{metric}"], s["final_loss"],
                 "inf (not private)" if eps is None else f"{eps:.3g}", s.get("group_k", ""), s["elapsed_s"]))
kind = "synthetic stand-in" if data["synthetic"] else "real data"
title = (f"{data['dataset']} ({kind}), {data['users']} users, {data['silos']} silos, "
         f"sigma {data['sigma']:g}, delta {data['delta']:g}, {data['rounds']} rounds")
lines = [title, "", f"| algo | final {metric} | best {metric} | final test loss | user-level epsilon | k | seconds |",
         "|---|---|---|---|---|---|---|"]
fmt = lambda v: "nan" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"  # noqa: E731
for algo, final, best, loss, eps, k, secs in rows:
    lines.append(f"| {algo} | {fmt(final)} | {fmt(best)} | {fmt(loss)} | {eps} | {k} | {secs:.1f} |")
(out / "table.md").write_text("\n".join(lines) + "\n")
(out / "compare.png").write_bytes(plot_runs(runs, metric, title=title))
print("\n".join(lines))
print(f"\nplot: {out / 'compare.png'}")
PY
