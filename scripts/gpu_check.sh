#!/usr/bin/env bash
# The checks only a GPU can run, in one go, six log files into OUT_DIR (default gpu-check/):
#   1. the accelerator tests (tests/*/test_*_accelerator.py: fused log-probs and layer kernels, native engine, update,
#      loop, resume);
#   2. the embedded default (`dapo train`) on the GPU: its held-out avg@4 and timings;
#   3. benchmarks/bench_gpu.py (generation, update MFU, DAPO step) at a size that takes minutes
#      (BENCH_ARGS="--update-layout native": the update through dapo-rl's forward and its GPU kernels).
# Run it in an environment where dapo-rl is importable and a CUDA GPU is visible:
#   bash scripts/gpu_check.sh [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python3 - <<'EOF' 2>&1 | tee "$out/versions.txt"
import torch, transformers
print("torch", torch.__version__, "transformers", transformers.__version__,
      "cuda", torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")
EOF
status=0
run() {  # run NAME SECONDS COMMAND...: its output in $out/NAME.log, its time and exit code after it
  local name=$1 seconds=$2
  shift 2
  local start=$SECONDS
  timeout "$seconds" "$@" >"$out/$name.log" 2>&1
  local code=$?
  echo "== $name: exit $code after $((SECONDS - start)) s" | tee -a "$out/summary.txt"
  [ "$code" = 0 ] || status=1
}
run tests "${TESTS_SECONDS:-240}" python3 -m pytest -q -rfE -p no:cacheprovider \
  tests/algo/test_algo_logprobs_accelerator.py tests/rollout/test_rollout_accelerator.py \
  tests/trainer/test_trainer_accelerator.py tests/trainer/test_trainer_layer_kernels_accelerator.py
tail -n 30 "$out/tests.log"
run_dir=$(mktemp -d)/default  # (checkpoints and TensorBoard stay there; the metrics come along)
run default "${DEFAULT_SECONDS:-240}" python3 -m dapo.cli.main train trainer.device=cuda \
  output_dir="$run_dir" logging.progress=false
cp "$run_dir/metrics.jsonl" "$out/default-metrics.jsonl" 2>/dev/null
tail -n 25 "$out/default.log"
run bench "${BENCH_SECONDS:-300}" python3 benchmarks/bench_gpu.py ${BENCH_ARGS:-}
tail -n 12 "$out/bench.log"
exit $status
