# Sourced by the examples/compare-*.sh scripts: sets ULDP and PYTHON to the `uldp` command and
# the Python that has it: those on the PATH (an activated venv), else the checkout's .venv
# (README set-up), so the scripts work before `. .venv/bin/activate` too; exits 2 with one
# `Error:` line when there is none. Also defines what the scripts' run loops share:
# `require_config`, `kept` and `train_json`.
VENV="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv"
if [[ -z "${ULDP:-}" ]] && ! command -v uldp >/dev/null 2>&1 && [[ -x "$VENV/bin/uldp" ]]; then
  ULDP="$VENV/bin/uldp"
  PYTHON=${PYTHON:-"$VENV/bin/python"}
fi
PYTHON=${PYTHON:-python}
ULDP=${ULDP:-uldp}
if ! command -v "$ULDP" >/dev/null 2>&1; then
  echo "Error: no uldp command: activate the venv (. .venv/bin/activate) or set ULDP=/path/to/uldp" >&2
  exit 2
fi

# require_config FILE: exit 2 with one Error: line unless the config FILE exists.
require_config() {
  if [[ ! -f "$1" ]]; then
    echo "Error: CONFIG: no such file: $1" >&2
    exit 2
  fi
}

# kept RUN: true (and says so) when KEEP=1 and RUN.json is already there: the run is not redone.
kept() {
  if [[ "${KEEP:-0}" == 1 && -s "$1.json" ]]; then
    echo "keep $1.json" >&2
    return 0
  fi
  return 1
}

# train_json RUN ARGS...: `uldp train ARGS... --metrics RUN.jsonl --format json` into RUN.json.
# The summary goes to a temporary file, renamed when the run is complete: a killed run leaves no
# half-written JSON for KEEP=1 to take as done. A failed run exits the script with status 2.
train_json() {
  local run=$1
  shift
  if ! "$ULDP" train "$@" --metrics "$run.jsonl" --format json > "$run.json.tmp"; then
    rm -f "$run.json.tmp"
    exit 2
  fi
  mv "$run.json.tmp" "$run.json"
}
