# Sourced by the examples/compare-*.sh scripts: sets ULDP and PYTHON to the `uldp` command and
# the Python that has it: those on the PATH (an activated venv), else the checkout's .venv
# (README set-up), so the scripts work before `. .venv/bin/activate` too; exits 2 with one
# `Error:` line when there is none.
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
