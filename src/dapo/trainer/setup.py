"""Build the pieces a run needs from its config: device, model, tokenizer, data, prompt encoder,
stop tokens and rollout engine (:func:`build_run`, shared by training and ``dapo eval``)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from dapo.algo import ADVANTAGE_ESTIMATORS, LOSS_AGG_MODES, POLICY_LOSSES
from dapo.algo.registry import defined_at
from dapo.algo.rehearsal import is_builtin, rehearse_plugins
from dapo.config import DAPOConfig, ModelConfig
from dapo.data import LoadedProblems, Problem, PromptEncoder, load_problems
from dapo.data.prompts import problem_text
from dapo.errors import DamagedWeightsError, UserError
from dapo.lora import apply_lora
from dapo.lora import describe as describe_adapters
from dapo.model_context import model_context
from dapo.rewards.user_functions import reward_formula
from dapo.rollout import RolloutEngine, create_engine
from dapo.rollout.base import SamplingParams
from dapo.rollout.batching import vocab_size_of
from dapo.rollout.stopping import model_stop_token_ids
from dapo.trainer.dropout import disable_dropout
from dapo.trainer.model_checks import (
    check_causal_lm,
    check_special_tokens,
    warn_about_length_following_rope,
)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def loss_norm_const(cfg: DAPOConfig) -> float:
    """The constant of the seq-mean-token-sum-norm aggregation: algorithm.loss_agg_norm_const, or
    the longest response (rollout.max_response_length), as verl defaults it."""
    return cfg.algorithm.loss_agg_norm_const or float(cfg.rollout.max_response_length)


def rehearse_plugins_of(cfg: DAPOConfig) -> None:
    """:func:`~dapo.algo.rehearsal.rehearse_plugins` with the run's algorithm settings."""
    algo = cfg.algorithm
    rehearse_plugins(algo.advantage, algo.policy_loss, algo.loss_agg_mode, advantage_eps=algo.advantage_eps,
                     clip_ratio_low=algo.clip_ratio_low, clip_ratio_high=algo.clip_ratio_high,
                     clip_ratio_c=algo.clip_ratio_c, norm_const=loss_norm_const(cfg), tis_cap=algo.tis_cap,
                     group_size=cfg.rollout.n, constant_group=not algo.dynamic_sampling,
                     masked_response=algo.overlong_filtering)


def plugins_in_use(cfg: DAPOConfig) -> str:
    """The selected entries that are not built in, each with its definition's file and line
    (``advantage median_baseline (my_algo.py:12)``); "" when none is."""
    algo = cfg.algorithm
    chosen = [(ADVANTAGE_ESTIMATORS, "advantage", algo.advantage), (POLICY_LOSSES, "policy_loss", algo.policy_loss),
              (LOSS_AGG_MODES, "loss_agg_mode", algo.loss_agg_mode)]
    return ", ".join(f"{key} {name} ({defined_at(registry[name])})" for registry, key, name in chosen
                     if not is_builtin(registry, name))


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"trainer.device={name!r} but CUDA is not available; use trainer.device=cpu")
    return device


def resolve_model_path(cfg: ModelConfig) -> Path:
    """``model.path`` as a directory; "builtin[:<name>]" builds (or reuses) a built-in base model."""
    if cfg.path.partition(":")[0] == "builtin":
        from dapo.builtin import ensure_base_model, recipe_for_model_path

        return Path(ensure_base_model(cfg.cache_dir, recipe_for_model_path(cfg.path)))
    path = Path(cfg.path).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(
            f"model.path={cfg.path!r} is not a local directory. dapo-rl never downloads at run time: "
            "download the model first (e.g. `hf download Qwen/Qwen2.5-0.5B --local-dir ...`)"
        )
    return path


def _load_kwargs(cfg: ModelConfig) -> dict:
    kwargs: dict = {"dtype": DTYPES[cfg.dtype]}
    if cfg.attn_implementation is not None:
        kwargs["attn_implementation"] = cfg.attn_implementation
    return kwargs


def model_structure(path: Path, cfg: ModelConfig) -> PreTrainedModel:
    """The model at ``path`` built on the meta device (no memory, no weights read), with the same
    dtype and attention as the loaded model would have."""
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), **_load_kwargs(cfg))


def load_weights(path: Path, cfg: ModelConfig) -> PreTrainedModel:
    """``from_pretrained`` of ``path``, a damaged weights file said in one line (it raised safetensors'
    bare "Error while deserializing header", with a traceback and no file name)."""
    try:
        return AutoModelForCausalLM.from_pretrained(path, **_load_kwargs(cfg))
    except SafetensorError as error:
        raise DamagedWeightsError(f"cannot read the weights of {path}: {_damaged_file(path) or 'a file'} is damaged "
                                  f"or incomplete ({error}; an interrupted download or copy?): fetch it again") from error


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """``AutoTokenizer.from_pretrained`` of ``path``, a tokenizer file it cannot read said in one line
    (a truncated tokenizer.json raised a JSONDecodeError, with a traceback and no file name). An
    OSError (no tokenizer there) passes as it is: transformers' own message says what is missing."""
    try:
        return AutoTokenizer.from_pretrained(path)
    except OSError:
        raise
    except Exception as error:  # (JSONDecodeError, KeyError, the tokenizers library's own Exception)
        raise UserError(f"cannot read the tokenizer of {path} ({type(error).__name__}: {error}): a tokenizer file "
                        "(tokenizer.json, tokenizer_config.json) is damaged or incomplete (an interrupted download or "
                        "copy?) or of a newer transformers: fetch it again, or name another in model.tokenizer_path"
                        ) from error


def _damaged_file(path: Path) -> str | None:
    """The first of ``path``'s safetensors files whose header cannot be read (reading a header is cheap)."""
    for file in sorted(path.glob("*.safetensors")):
        try:
            with safe_open(file, framework="pt"):
                pass
        except (SafetensorError, OSError):
            return file.name
    return None


def load_model_and_tokenizer(
    cfg: ModelConfig, device: torch.device, weights: bool = True, adapters: bool = True
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, Path]:
    """The model (``weights=False``: its structure on the meta device, no memory, for a driver
    whose policy ranks hold the weights, or a rank whose shard comes from rank 0), its tokenizer
    and resolved directory. ``adapters``: add model.lora_rank's LoRA adapters to the weights
    (:func:`add_adapters`; False for an evaluation: a LoRA run's checkpoint holds its merged
    weights, and new adapters start at zero; and for a policy rank, which adds them after it
    copies the base model for its rollout engine)."""
    path = resolve_model_path(cfg)
    check_causal_lm(path)
    tokenizer = load_tokenizer(cfg.tokenizer_path or path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if not weights:
        model = model_structure(path, cfg)
        with contextlib.suppress(OSError):  # the stop tokens are read from it
            model.generation_config = GenerationConfig.from_pretrained(path)
    else:
        model = load_weights(path, cfg).to(device)
    if cfg.disable_dropout:
        disable_dropout(model)
    if cfg.gradient_checkpointing:  # transformers 5 renamed it (the old name warns)
        (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)()
    if adapters:  # (on a structure too: the driver of policy ranks describes them)
        add_adapters(model, cfg)
    return model, tokenizer, path


def add_adapters(model: PreTrainedModel, cfg: ModelConfig) -> None:
    """model.lora_rank's LoRA adapters into ``model`` (nothing when it is 0); a model whose
    shard comes from rank 0 gets them on its meta-device structure, rank 0's values after."""
    if cfg.lora_rank == 0:
        return
    apply_lora(model, cfg.lora_rank, cfg.lora_alpha, cfg.lora_target_modules)
    if cfg.gradient_checkpointing:  # frozen embeddings: reentrant checkpointing needs inputs that require grad
        model.enable_input_require_grads()


def load_reference_model(path: Path, cfg: ModelConfig, device: torch.device, weights: bool = True) -> PreTrainedModel:
    """A frozen copy of the initial policy, loaded only when algorithm.kl_coef > 0 (``weights=False``:
    its structure on the meta device, for a policy rank whose shard of it comes from rank 0)."""
    model = load_weights(path, cfg).to(device) if weights else model_structure(path, cfg)
    model.eval().requires_grad_(False)
    return model


@dataclass
class RunData:
    train: LoadedProblems | None  # None when only evaluating
    eval: LoadedProblems | None

    def counts(self) -> dict[str, float]:
        """``data/*`` metrics: problems, rows, duplicates dropped and rows skipped, per split."""
        return {**(self.train.counts("train") if self.train else {}), **(self.eval.counts("eval") if self.eval else {})}


def load_run_data(
    cfg: DAPOConfig, train: bool = True, drop_overlong: Callable[[LoadedProblems, str], None] | None = None
) -> RunData:
    """The held-out problems, and with ``train`` the training ones (an evaluation reads none), each
    split passed through ``drop_overlong`` (:meth:`PromptEncoder.drop_overlong`) before the two are
    compared: an overlap counts only the problems that stay."""
    train_problems = load_problems(cfg.data.train_files, cfg.data, split="train") if train else None
    held_out = load_problems(cfg.data.eval_files, cfg.data, split="eval") if cfg.data.eval_files else None
    for split, loaded in (("train", train_problems), ("eval", held_out)):
        if loaded is not None and drop_overlong is not None:
            drop_overlong(loaded, split)
    if train_problems is not None and held_out is not None:
        trained = set(_problem_texts(train_problems.problems).values())
        texts = _problem_texts(held_out.problems)
        seen = {p.eval_key for p in held_out.problems if texts[p.uid] in trained}
        if seen:  # (the same file in both lists, a split read twice): held-out accuracy would flatter
            held_out.warnings.insert(0, f"warning: {len(seen)} of the {held_out.num_problems('eval')} held-out problems are "
                                        "training problems too (the same problem text)")
    return RunData(train=train_problems, eval=held_out)


def _problem_texts(problems: list[Problem]) -> dict[str, str]:
    """Each prompt's problem (:func:`problem_text`: the last message, without the DAPO instruction),
    its whitespace collapsed, by uid: a problem is found in both splits whether one holds it as chat
    messages and the other as plain text, in the DAPO template or without it."""
    texts: dict[str, str] = {}
    for problem in problems:
        if problem.uid not in texts:  # (1.8M rows of 18k prompts, kept with data.dedup_train=false)
            texts[problem.uid] = " ".join(problem_text(problem.prompt).split())
    return texts


# Evaluation samples with one fixed seed per run, so evaluations before and after training
# compare on common random numbers; eval.seed pins it across runs with different trainer seeds.
EVAL_SEED_OFFSET = 7_919


def stop_token_ids_of(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The ids that end a response: generation config EOS ids, tokenizer EOS, chat end-of-turn."""
    generation_config = getattr(model, "generation_config", None)
    return model_stop_token_ids(tokenizer, getattr(generation_config, "eos_token_id", None))


def eval_top_k(cfg: DAPOConfig) -> int:
    """Evaluation's top-k: eval.top_k, or rollout.top_k where it is null (0: off)."""
    return cfg.rollout.top_k if cfg.eval.top_k is None else cfg.eval.top_k


def make_sampling_params(
    cfg: DAPOConfig, stop_token_ids: list[int], seed: int | None = None, evaluation: bool = False
) -> SamplingParams:
    """Training rollouts sample with rollout.* and ``seed``; evaluation with eval.k / temperature /
    top_p / top_k (null: rollout.top_k) and eval.seed (or, when that is null, a seed derived from
    trainer.seed). Both stop on ``stop_token_ids`` (see :func:`stop_token_ids_of`) and rollout.stop_strings."""
    r, e = cfg.rollout, cfg.eval
    if evaluation:
        seed = e.seed if e.seed is not None else EVAL_SEED_OFFSET + cfg.trainer.seed
    if seed is None:
        raise ValueError("training rollouts need an explicit sampling seed")
    return SamplingParams(
        n=e.k if evaluation else r.n,
        temperature=e.temperature if evaluation else r.temperature,
        top_p=e.top_p if evaluation else r.top_p,
        top_k=eval_top_k(cfg) if evaluation else r.top_k,
        max_new_tokens=r.max_response_length,
        stop_token_ids=list(stop_token_ids),
        stop_strings=list(r.stop_strings),
        seed=seed,
    )


def vllm_options(cfg: DAPOConfig, model: PreTrainedModel, on_ranks: bool) -> dict:
    """Keyword arguments of a vLLM engine for this run (nothing for the in-process engines):
    the run's seed, a context as long as a prompt plus a response (within the model's, RoPE
    scaling's extension included, as preflight reads it), ``on_ranks`` (the policy ranks of a
    multi-rank run) one engine shard per rank (``spmd``; not in one process evaluating a
    multi-rank config, which has no process group), and the tokenizer the trainer loads where it is not
    the model directory's (model.tokenizer_path: vLLM would load the model's own, or fail on a
    directory of weights alone)."""
    if cfg.rollout.engine != "vllm":
        return {}
    longest = cfg.data.max_prompt_length + cfg.rollout.max_response_length
    context = model_context(model.config.to_dict())
    return {"seed": cfg.trainer.seed, "max_model_len": min(longest, context.tokens) if context else longest,
            "spmd": on_ranks and cfg.resources.world_size > 1, "tokenizer_path": cfg.model.tokenizer_path}


@dataclass
class RunSetup:
    """What training and evaluation both build from a config."""

    device: torch.device
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    model_path: Path  # the resolved model directory (a built-in model's cache directory)
    data: RunData
    encoder: PromptEncoder
    stop_token_ids: list[int]
    engine: RolloutEngine


def build_run(
    cfg: DAPOConfig, start_engine: Callable[[], RolloutEngine] | None = None, train_data: bool = True,
    check_data: Callable[[RunData], None] | None = None,
) -> RunSetup:
    """Everything a run needs. Given ``start_engine`` (which starts the policy ranks, which hold the
    weights, and returns their generation), the model is only its structure on the meta device,
    and the ranks start once the data has loaded: a malformed row is named before Ray starts them
    and they load the model (minutes on a cluster). ``train_data=False`` (an evaluation) leaves the
    training files unread; with rollout.engine=vllm, which loads its own copy of the weights, its
    model is only the structure too. ``check_data`` reads the data once it has loaded, before an
    engine starts (the reward functions' columns, :meth:`RewardScorer.check_data`)."""
    device = resolve_device(cfg.trainer.device)
    vllm_evaluation = not train_data and cfg.rollout.engine == "vllm"
    model, tokenizer, model_path = load_model_and_tokenizer(cfg.model, device,
                                                            weights=start_engine is None and not vllm_evaluation,
                                                            adapters=train_data)
    warn_about_length_following_rope(cfg, model)
    stop_token_ids = stop_token_ids_of(model, tokenizer)
    check_special_tokens(model, tokenizer, stop_token_ids)
    encoder = PromptEncoder(tokenizer, cfg.data, vocab_size=vocab_size_of(model))
    data = load_run_data(cfg, train=train_data, drop_overlong=encoder.drop_overlong)  # data.overlong_prompts
    said_already: set[str] = set()  # (a note true of both splits is printed once, with the training data's)
    notes = (encoder.plain_text_note, encoder.unknown_roles_note, encoder.rendered_text_note,
             functools.partial(encoder.builtin_template_note, model_path=cfg.model.path))
    for loaded in (data.train, data.eval):
        for note in notes:
            if loaded is not None and (said := note(loaded.problems)) is not None and said not in said_already:
                loaded.warnings.insert(0, said)
                said_already.add(said)
    if check_data is not None:
        check_data(data)
    if start_engine is not None:
        engine = start_engine()
    else:
        engine = create_engine(cfg.rollout, model, tokenizer, model_path=str(model_path),
                               **vllm_options(cfg, model, on_ranks=False))
    return RunSetup(
        device, model, tokenizer, model_path, data, encoder, stop_token_ids, engine,
    )


def start_lines(cfg: DAPOConfig, run: RunSetup, reward_labels: tuple[str, ...]) -> list[str]:
    """What a run says it starts with: its data (read and dropped), its reward's sum where it has
    functions (TRL's reward_funcs are the whole reward; here the verifier stays beside them), its
    adapters, its sequence-parallel groups."""
    lines = [loaded.describe(split, cfg.eval.max_problems if split == "eval" else 0)
             for split, loaded in (("train", run.data.train), ("eval", run.data.eval)) if loaded is not None]
    if cfg.reward.functions:
        lines.append(reward_formula(cfg.reward, reward_labels))
    if plugins := plugins_in_use(cfg):
        lines.append(f"algorithm plugins: {plugins}")
    if (adapters := describe_adapters(run.model)) is not None:
        lines.append(adapters)
    if (size := cfg.trainer.sequence_parallel_size) > 1:
        lines.append(f"policy: {cfg.resources.world_size} ranks in {cfg.resources.world_size // size} sequence-parallel "
                     f"group(s) of {size}, each rank computing 1/{size} of every packed row")
    return lines
