"""What surplus groups carry across a checkpoint: the settings they were made under, compared
on resume (:func:`changed_surplus_settings`: changed ones drop them), and their samples as plain
values and tensors (:func:`sample_state`, :func:`sample_from_state`)."""

from __future__ import annotations

import dataclasses

import torch

from dapo.config.loading import (
    absolute_function_path,
    absolute_local_path,
    reward_function_locations,
)
from dapo.trainer.batch import LOGPROB_FIELDS, Sample, as_logprobs
from dapo.user_code import edited_sources

# What a kept group's samples, rewards and advantages depend on, by config section: a resumed run
# with other values must not train the checkpoint's surplus as if made under its own.
# How a response is scored, and how a prompt is rendered: what kept groups and held-out metrics both
# depend on (loop_state's keep_best reads these too)
SCORING_SETTINGS = ("verifier", "verifier_weight", "functions", "correct_score", "incorrect_score", "extractor",
                    "max_response_chars")
RENDERING_SETTINGS = ("template", "use_chat_template", "chat_template_kwargs")
_SURPLUS_SETTINGS = {
    "model": ("tokenizer_path",),
    "rollout": ("engine", "n", "temperature", "top_p", "top_k", "max_response_length", "stop_strings",
                "native_dtype", "vllm_dtype"),
    "algorithm": ("advantage", "advantage_eps", "overlong_buffer_len", "overlong_filtering",
                  "overlong_penalty_factor", "overlong_soft_punishment"),
    "reward": SCORING_SETTINGS,
    "data": (*RENDERING_SETTINGS, "answer_key", "data_source_key"),
}


# one engine's own setting, which the others never read: no change where another engine made the groups
_ENGINE_SETTINGS = {"rollout.native_dtype": "native", "rollout.vllm_dtype": "vllm"}


def _in_effect(settings: dict) -> dict:
    """``settings`` without the settings of an engine other than the one they name (a resume with
    rollout.engine=hf and another rollout.native_dtype dropped the surplus groups for nothing)."""
    engine = settings.get("rollout.engine")
    return {key: value for key, value in settings.items() if _ENGINE_SETTINGS.get(key, engine) == engine}


_SOURCES = "reward.functions sources"  # surplus_settings' key of the reward functions' source digests


# surplus settings added to the list after checkpoints were written without them, and the one value
# those were made under (reward.verifier=math_dapo came later: an older checkpoint's groups are
# dapo-rl's); _UNKNOWN: any, taken as this run's
_UNKNOWN = object()
_SETTINGS_ADDED_SINCE = {"reward.verifier": "dapo-rl", "data.chat_template_kwargs": {}, "model.tokenizer_path": _UNKNOWN,
                         "data.answer_key": _UNKNOWN, "data.data_source_key": _UNKNOWN}


def surplus_settings(config: dict, filter_metric: str, sources: dict[str, str | None] | None = None) -> dict:
    """The settings of ``config`` (a run's config as a dict) that kept groups were made under, as
    ``{"section.key": value}``, with the resolved ``filter_metric``; its files named by their
    absolute paths (a reward function named relative in one attempt and absolute in the resume is
    one function); and of ``sources`` (the run's code's digests by absolute location,
    :attr:`dapo.trainer.run_state.RunState.user_code`) its reward functions' (one edited since scores otherwise)."""
    settings = {f"{section}.{key}": config[section][key] for section, keys in _SURPLUS_SETTINGS.items() for key in keys}
    settings = _absolute_function_paths({**settings, "algorithm.filter_metric": filter_metric})
    locations = reward_function_locations(settings["reward.functions"])
    return {**settings, _SOURCES: {location: (sources or {}).get(location) for location in locations}}


def _changed(key: str, before: object, now: object) -> bool:
    """Whether surplus setting ``key`` changed; its reward functions' sources, file by file (one
    not known on either side, as in a checkpoint written before they were kept, is no change)."""
    if key == _SOURCES:
        return isinstance(before, dict) and isinstance(now, dict) and bool(edited_sources(before, now))
    return before != now


def _absolute_function_paths(settings: dict) -> dict:
    """``settings`` with its reward functions' files (and its tokenizer's) named by absolute path (a
    checkpoint written before they were named so holds them as its command gave them)."""
    if isinstance(tokenizer := settings.get("model.tokenizer_path"), str):
        settings = {**settings, "model.tokenizer_path": absolute_local_path(tokenizer)}
    functions = settings.get("reward.functions")
    if not isinstance(functions, list):
        return settings
    return {**settings, "reward.functions": [
        {**spec, "path": absolute_function_path(spec["path"])} if isinstance(spec, dict) and "path" in spec else spec
        for spec in functions]}


def changed_surplus_settings(saved: dict | None, now: dict) -> list[str]:
    """The surplus settings (:func:`surplus_settings`) that differ between a checkpoint's ``saved``
    and this run's ``now``, sorted; none where the checkpoint kept none (``saved`` None: written
    before they were kept, taken as the same). A setting added to the list since the checkpoint was
    written counts at the one value it had then; an engine's own setting only where that engine ran."""
    if saved is None:
        return []
    added = {key: now[key] if value is _UNKNOWN else value for key, value in _SETTINGS_ADDED_SINCE.items() if key in now}
    saved, now = _in_effect(_absolute_function_paths({**added, **saved})), _in_effect(now)
    return sorted(key for key in {*saved, *now} if _changed(key, saved.get(key), now.get(key)))


# A sample's token ids and log-probs are saved as tensors: pickled Python lists took seconds per
# 100k tokens to save and to load (a reference-size surplus holds tens of millions). The log-probs
# are float32, as the sample holds them; an older checkpoint's float64 tensors or lists of them
# held float32 values (what the engines and the trainer compute), and load as those exactly.
_TENSOR_FIELDS = {"prompt_ids": torch.long, "response_ids": torch.long,
                  "rollout_logprobs": torch.float32, "old_logprobs": torch.float32}


def sample_state(sample: Sample) -> dict:
    """``sample`` as plain values and tensors (loads with ``torch.load(weights_only=True)``)."""
    fields = {f.name: getattr(sample, f.name) for f in dataclasses.fields(sample)}
    return {**fields, **{name: torch.tensor(fields[name], dtype=dtype) for name, dtype in _TENSOR_FIELDS.items()}}


def sample_from_state(fields: dict) -> Sample:
    """A Sample from :func:`sample_state`'s dict (or an older checkpoint's: float64 log-probs, or lists)."""
    return Sample(**{name: _field_from_state(name, value) for name, value in fields.items()})


def _field_from_state(name: str, value: object) -> object:
    if not isinstance(value, torch.Tensor):
        return value  # the Sample makes its log-probs float32 arrays
    return as_logprobs(value) if name in LOGPROB_FIELDS else value.tolist()
