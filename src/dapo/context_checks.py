"""The run's sequences against the model's context (its config, read before anything loads):
what ``dapo train`` refuses or warns about in preflight, and ``dapo plan`` reports."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from dapo.config import DAPOConfig
from dapo.model_context import model_context


def is_builtin(path: str) -> bool:
    """Whether a model.path names the built-in model (``builtin``, ``builtin:<name>``)."""
    return path.partition(":")[0] == "builtin"


def context_problems(cfg: DAPOConfig) -> list[str]:
    """The run's sequences against the model's context, where its config is on this machine (the
    built-in recipe's, or model.path's config.json): what ``dapo train`` refuses, for ``dapo plan``."""
    if is_builtin(cfg.model.path):
        from dapo.builtin.recipes import builtin_model_problem, recipe_for_model_path  # torch-free

        if builtin_model_problem(cfg.model.path) is not None:
            return []
        return builtin_context_problems(cfg, recipe_for_model_path(cfg.model.path).max_position_embeddings)
    config_file = Path(cfg.model.path).expanduser() / "config.json"
    if not config_file.is_file():
        return []
    model_config, _ = read_model_config(config_file)
    return config_context_problems(model_config, config_file, cfg) if isinstance(model_config, dict) else []


def read_model_config(config_file: Path) -> tuple[object, str | None]:
    """(config.json's contents, None), or (None, the message of why it cannot be read)."""
    try:
        return json.loads(config_file.read_text()), None
    except (OSError, ValueError) as error:
        return None, f"{config_file} cannot be read: {error}"


def config_context_problems(model_config: dict, config_file: Path, cfg: DAPOConfig) -> list[str]:
    if (context := model_context(model_config)) is None:
        return []
    return sequence_problems(context.tokens, f"{context.source} in {config_file}", cfg, context.learned)


def builtin_context_problems(cfg: DAPOConfig, context: int) -> list[str]:
    """:func:`sequence_problems` of a built-in model of ``context`` positions, each saying what fits
    it: the likely cause is a config of one's own, layered on the schema's defaults (the paper's
    lengths), not on the embedded default's."""
    problems = sequence_problems(context, f"the built-in model {cfg.model.path}'s recipe", cfg)
    return [f"{problem}. The embedded default's settings fit it: `dapo train default YOUR.yaml` layers a config of "
            "your own on them" for problem in problems]


def sequence_problems(context: int, source: str, cfg: DAPOConfig, learned: bool = False) -> list[str]:
    """A response must fit the model's context of ``context`` tokens (read from ``source``); a
    prompt plus a response past it is an error under vLLM (which ends the request) and with
    ``learned`` positions (a table that ends there: the forward fails past it), a warning on the
    other engines."""
    prompt, response = cfg.data.max_prompt_length, cfg.rollout.max_response_length
    if response >= context:
        if prompt < context:
            fix, longest = f"set it below {context}, leaving data.max_prompt_length room beside it", context - prompt
        else:
            longest = context - context // 4
            fix = (f"set it and data.max_prompt_length={prompt} (past the context too) so that the two fit together, "
                   f"e.g. data.max_prompt_length={context // 4} rollout.max_response_length={longest}")
        a = cfg.algorithm  # (the next refusal otherwise: a buffer as long as the new length)
        if a.overlong_soft_punishment and a.overlong_buffer_len >= longest:
            fix += f", with algorithm.overlong_buffer_len (now {a.overlong_buffer_len}) below the new length"
        return [f"rollout.max_response_length={response} does not fit the model's context of {context} tokens "
                f"({source}); {fix}"]
    if prompt + response > context and learned:
        return [f"data.max_prompt_length + rollout.max_response_length = {prompt} + {response} is more than the "
                f"model's context of {context} tokens ({source}: a position past its table fails the forward, "
                "mid-run); lower one of the two"]
    if prompt + response > context and cfg.rollout.engine == "vllm":
        return [f"data.max_prompt_length + rollout.max_response_length = {prompt} + {response} is more than the "
                f"model's context of {context} tokens, where vLLM ends a request: a prompt of {prompt} tokens "
                f"would leave its response {context - prompt} tokens, cut there and flagged truncated before the "
                "overlong buffer (the native engine would generate on); lower one of the two"]
    if prompt + response > context:
        warnings.warn(
            f"data.max_prompt_length + rollout.max_response_length = {prompt} + {response} is more than the "
            f"model's context of {context} tokens: a prompt longer than {context - response} tokens leaves its "
            "response past the positions the model was trained on", stacklevel=1)  # one place: shown once
    return []
