#!/usr/bin/env bash
# Create (or reuse) .venv and install dapo-rl into it. On machines without CUDA, a CPU build of
# torch==2.13.0 is installed first, so pip never pulls GPU packages. GPU users: install your own
# torch first, then `pip install -e '.[vllm]'` (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
if ! python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    python -m pip install -q torch
  else
    # TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu on machines without a cached CPU build
    python -m pip install -q "torch==2.13.0" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
  fi
fi
python -m pip install -q -e ".[${DAPO_EXTRAS:-test,ray,lora}]"
