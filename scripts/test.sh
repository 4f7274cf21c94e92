#!/usr/bin/env bash
# Set up (see setup.sh) and run the test suite: lint, the fast tests, then the slow end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
ruff check src tests benchmarks
python -m pytest -q
python -m pytest -q -m slow
