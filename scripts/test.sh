#!/usr/bin/env bash
# Set up (see setup.sh) and run the test suite: lint, the fast tests, vLLM on CPU (its own venv,
# see test_vllm_cpu.sh), then the slow end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
ruff check src tests benchmarks scripts
# two workers, a module's tests on one of them and the Ray modules' on one (tests/conftest.py
# groups them): 10-12 minutes on 2 AVX2 cores (2026-12-02), 6-9 with AVX-512; 14-16 on one
python -m pytest -q -n 2 --dist loadgroup
bash scripts/test_vllm_cpu.sh
python -m pytest -q -m slow
