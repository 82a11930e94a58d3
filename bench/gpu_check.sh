#!/usr/bin/env bash
# One prepared check of the GPU path (bench/gpu_check.py), in under 8 minutes on one CUDA GPU.
#   bash bench/gpu_check.sh [--dry-run] [--json FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
test -x "$PY" || PY=python3
exec timeout 480 "$PY" bench/gpu_check.py "$@"
