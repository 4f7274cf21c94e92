"""What is trained, and on what: the ``model`` and ``data`` sections (fields documented by the
comment above each; ``dapo config --explain model``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from dapo.config.checks import check, finite_numbers, one_of

# What each data.template but "none" wraps text prompts in, as warnings name it (dapo.data.prompts
# holds the texts).
TEMPLATE_NAMES = {"dapo": "the DAPO instruction", "boxed": "the boxed-answer instruction",
                  "r1": "DeepSeek-R1-Zero's instruction"}

# apply_chat_template's own arguments, which the prompt rendering sets: no template variables
RENDERING_ARGUMENTS = frozenset({"conversation", "messages", "conversations", "chat_template", "tools", "documents",
                                 "add_generation_prompt", "continue_final_message", "tokenize", "padding", "truncation", "max_length",
                                 "return_tensors", "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs"})

# Bytes per element of the dtypes a config names (model.dtype, rollout.native_dtype)
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# model.attn_implementation values transformers knows (None: its default, sdpa)
ATTENTION_KERNELS = (None, "eager", "sdpa", "flash_attention_2", "flash_attention_3", "flash_attention_4",
                     "flex_attention")


@dataclass
class ModelConfig:
    # Hugging Face model directory (anything `AutoModelForCausalLM.from_pretrained` loads), or
    # "builtin" for the built-in tiny base model (its weights ship with the package and are
    # installed into model.cache_dir); "builtin:<name>" for another built-in recipe ("mixed",
    # "rare-trace": see dapo.builtin.BUILTIN_RECIPES, built and cached on first use), used by `dapo ablate`.
    path: str = "builtin"
    # Tokenizer directory; null means the model directory ("none" is a directory of that name).
    tokenizer_path: str | None = None
    # Parameter dtype of the trained policy (and of its optimizer state): "float32" or "bfloat16".
    # bfloat16 weights round an AdamW step of a small lr away (preflight warns; with LoRA only the
    # frozen base is bfloat16, the adapters and their AdamW state float32); bf16 compute over
    # float32 weights is trainer.param_dtype=bf16 or trainer.autocast=bf16, float16 compute
    # trainer.autocast=fp16.
    dtype: str = "float32"
    # Recompute activations in the backward pass to save memory (slower).
    gradient_checkpointing: bool = False
    # Turn the policy's dropout off (as TRL's disable_dropout): with it, the old log-probs (eval
    # mode) and the update's forward (train mode) differ before any update. Qwen and Llama have none.
    disable_dropout: bool = True
    # Attention kernel of the trained policy's forward, passed to `from_pretrained`: null keeps
    # transformers' default (sdpa); "eager" is faster for short sequences on CPU; GPUs may use
    # "flash_attention_2" when installed.
    attn_implementation: str | None = None
    # Where the built-in base model and other derived artefacts are cached.
    cache_dir: str = "~/.cache/dapo-rl"
    # LoRA rank r (Hu et al. 2021): 0 trains every weight; r > 0 freezes them and trains low-rank
    # adapters, y = W x + (lora_alpha / r) B A x, on the lora_target_modules (PEFT; in one process or
    # on FSDP2 ranks, each holding a shard of both). AdamW then holds state for the adapters only.
    # Checkpoints hold the merged weights (from_pretrained loads them) and the adapters alone
    # (adapter/, PEFT's format), which a resume continues on the same base model. LoRA usually
    # wants a larger trainer.lr than full fine-tuning (1e-5 to 1e-4 against 1e-6).
    lora_rank: int = 0
    # LoRA's alpha: the adapters' output is scaled by lora_alpha / lora_rank.
    lora_alpha: float = 16.0
    # The linear layers that get adapters: ["all-linear"] (every linear layer but the output layer,
    # PEFT's choice) or module names, e.g. [q_proj, k_proj, v_proj, o_proj], each matching a layer's
    # name or its last dotted parts (mlp.down_proj); a name that matches no layer is an error.
    # Linear layers only (torch.nn.Linear, GPT-2's Conv1D): an embedding is refused.
    lora_target_modules: list[str] = field(default_factory=lambda: ["all-linear"])

    def __post_init__(self) -> None:
        finite_numbers(self, "model")
        check(self.dtype != "float16",
              "model.dtype=float16 would train float16 weights with float16 AdamW state: its eps (1e-8) is 0 in "
              "float16 and a small gradient's second moment underflows to 0, so the first update writes NaN/inf "
              "into the weights. Use model.dtype=float32 with trainer.autocast=fp16 (float16 compute, loss "
              "scaling, float32 weights), and rollout.native_dtype=float16 to generate in float16")
        one_of("model.dtype", self.dtype, ("float32", "bfloat16"))
        check(self.attn_implementation in ATTENTION_KERNELS or any(c in (self.attn_implementation or "") for c in "/|"),
              f"model.attn_implementation={self.attn_implementation!r} is not one of {ATTENTION_KERNELS} "
              "(or a Hugging Face kernels repository, org/name, or a paged|kernel form)"
              + ("; null (not the text None) keeps transformers' default" if self.attn_implementation in ("None", "none")
                 else ""))
        check(bool(self.path), "model.path must name a model directory or 'builtin'")
        check(self.lora_rank >= 0, f"model.lora_rank={self.lora_rank} must be >= 0 (0: train every weight)")
        check(self.lora_alpha > 0, f"model.lora_alpha={self.lora_alpha} must be > 0")
        check(bool(self.lora_target_modules) and all(name.strip() for name in self.lora_target_modules),
              f"model.lora_target_modules={self.lora_target_modules} must name modules (or [all-linear])")
        # PEFT's all-linear is a shorthand only alone: in a longer list it is a module name that matches nothing
        check("all-linear" not in self.lora_target_modules or self.lora_target_modules == ["all-linear"],
              f"model.lora_target_modules={self.lora_target_modules}: all-linear already takes every linear layer "
              "(but the output layer); give it alone, or name the layers")
        check(bool(self.cache_dir.strip()), "model.cache_dir is empty: name a directory (default ~/.cache/dapo-rl)")
        if self.tokenizer_path is not None:  # (transformers takes an unexpanded ~/tok for a hub repo id)
            self.tokenizer_path = os.path.expanduser(self.tokenizer_path)


@dataclass
class DataConfig:
    # Training data: parquet, JSONL, JSON-array, CSV or TSV files (plain or .gz/.bz2/.xz), local
    # `datasets` directories, globs (shards/*.parquet), directories of data files such as a
    # downloaded Hub dataset (the split's files by their names: data/train-*, test/...; one of a
    # type not read, .arrow, .zst, ..., stops the load; see dapo.data.files), or "builtin:arithmetic".
    train_files: list[str] = field(default_factory=lambda: ["builtin:arithmetic"])
    # Held-out evaluation data, same forms as train_files; empty disables evaluation.
    eval_files: list[str] = field(default_factory=lambda: ["builtin:arithmetic"])
    # Dotted column path of the prompt (a chat list or raw text) in each row.
    prompt_key: str = "prompt"
    # Dotted column path of the ground-truth answer in each row (a `datasets` ClassLabel column,
    # MMLU's answer, reads as its names, A/B/C/D, as does any such column: dapo.data.class_labels).
    # null: the rows have none (a TRL dataset of prompts, judged by reward.functions alone, which
    # reward.verifier_weight=0 asks for); a function gets "" as the ground truth.
    answer_key: str | None = "reward_model.ground_truth"
    # Column holding the data source name (optional in the file). A row without one takes its
    # file's name (aime.jsonl -> "aime"), or, when that is only a split word (train.jsonl,
    # data/test-00000-of-00002.parquet), its folder's: eval/<data_source>/ metrics and logs use it.
    data_source_key: str = "data_source"
    # data.prompt_key of the data.eval_files rows; null: data.prompt_key (train on DAPO-Math's
    # `prompt` and evaluate a file whose prompt is `question`: eval_prompt_key=question).
    eval_prompt_key: str | None = None
    # data.answer_key of the data.eval_files rows; null: data.answer_key.
    eval_answer_key: str | None = None
    # data.data_source_key of the data.eval_files rows; null: data.data_source_key.
    eval_data_source_key: str | None = None
    # Drop repeated training prompts (DAPO-Math-17K repeats each about 100x); count is reported.
    dedup_train: bool = True
    # Skip and count malformed rows instead of stopping with an error naming file and row. A file
    # that cannot be read (not valid JSON as a whole, a corrupt parquet or .gz), or none of whose
    # rows is usable (another schema's columns), still stops the load.
    lenient: bool = False
    # Wrap raw problem text (chat-list prompts are used as written): "dapo" (solve step by step,
    # end with "Answer: $Answer"); "boxed" (Qwen2.5-Math's "Please reason step by step, and put
    # your final answer within \boxed{}." after the problem); "r1" (DeepSeek-R1-Zero's
    # instruction to answer in <think> and <answer> tags: a system message under the chat template,
    # else the completion prompt "... User: {problem}. Assistant:"); "none".
    template: str = "dapo"
    # Render chat-list prompts with the tokenizer's chat template when it has one.
    use_chat_template: bool = True
    # Extra variables for the chat template, e.g. {enable_thinking: false} for Qwen3's (TRL's
    # chat_template_kwargs, verl's data.apply_chat_template_kwargs); set one alone as
    # data.chat_template_kwargs.enable_thinking=false. A mapping merges into the one a config file
    # set, as Hydra's does; data.chat_template_kwargs=null empties it.
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # A chat prompt ending in an assistant message: true reads it as a prefill that the response
    # continues ("<think>\n", "Let's think step by step."; TRL's reading); false stops the load at
    # such a row, which is more often an SFT file's reference solution.
    assistant_prefill: bool = False
    # Longest prompt in tokens, once rendered (template, chat template) and tokenised.
    max_prompt_length: int = 2048
    # A longer prompt: "drop" it when the data is loaded (counted in data/<split>_overlong_dropped,
    # with a warning), or "error" (stop, naming it). Never cut: cut from the left it would lose its
    # BOS and chat header, from the right the generation prompt, and either way part of the question.
    overlong_prompts: str = "drop"
    # Shuffle the training problems each epoch (seeded by trainer.seed and the epoch).
    shuffle: bool = True
    # Built-in arithmetic task: number of training / held-out problems generated.
    builtin_train_size: int = 20000
    builtin_eval_size: int = 200
    # Built-in task difficulty: operand digit range and operators used.
    builtin_min_digits: int = 1
    builtin_max_digits: int = 3
    builtin_ops: list[str] = field(default_factory=lambda: ["+"])

    def __post_init__(self) -> None:
        finite_numbers(self, "data")
        check(len(self.train_files) > 0, "data.train_files is empty: name at least one dataset")
        for key in ("prompt_key", "answer_key"):  # (data_source_key may name no column: it is optional)
            check(key == "answer_key" and getattr(self, key) is None or bool((getattr(self, key) or "").strip()),
                  f"data.{key} is empty: name the column (a dotted path for a nested one, e.g. "
                  f"reward_model.ground_truth){', or null for rows without one' if key == 'answer_key' else ''}")
        for key in ("eval_prompt_key", "eval_answer_key"):
            check(getattr(self, key) is None or bool(getattr(self, key).strip()),
                  f"data.{key} is empty: name the column of the eval files, or null for data.{key[5:]}'s")
        one_of("data.template", self.template, (*TEMPLATE_NAMES, "none"))
        check(self.max_prompt_length > 0, "data.max_prompt_length must be > 0")
        taken = sorted(set(self.chat_template_kwargs) & RENDERING_ARGUMENTS)
        check(not taken, f"data.chat_template_kwargs sets {', '.join(taken)}, which the prompt rendering sets itself "
              "(a prefill: data.assistant_prefill); it holds the template's own variables, such as enable_thinking")
        check(self.use_chat_template or not self.chat_template_kwargs,
              f"data.chat_template_kwargs={self.chat_template_kwargs} is for the chat template, and "
              "data.use_chat_template=false renders the prompts without one: drop one of them "
              "(data.chat_template_kwargs=null)")
        one_of("data.overlong_prompts", self.overlong_prompts, ("drop", "error"))
        check(
            1 <= self.builtin_min_digits <= self.builtin_max_digits,
            "data.builtin_min_digits must be >= 1 and <= data.builtin_max_digits",
        )
        check(self.builtin_train_size >= 1 and self.builtin_eval_size >= 1,
              "data.builtin_train_size and data.builtin_eval_size must be >= 1")
        check(len(self.builtin_ops) > 0, "data.builtin_ops is empty: name the operators, e.g. [+, -, *]")
        for op in self.builtin_ops:
            one_of("data.builtin_ops[...]", op, ("+", "-", "*"))
