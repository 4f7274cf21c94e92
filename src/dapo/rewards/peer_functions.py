"""Reward functions written for verl or TRL, called as those call them, so that a user moving to
dapo-rl brings them unchanged. Told apart from this project's contract,
``fn(response, ground_truth, extra)``, by their parameters' names:

* verl (``custom_reward_function.path``): ``compute_score(data_source, solution_str, ground_truth,
  extra_info=None)``, by keyword (a function that takes ``solution_str``; the names it leaves out
  are not passed); its batched reward manager's takes the plural names, lists.
* TRL (``GRPOTrainer(reward_funcs=...)``): ``reward(prompts, completions, **kwargs)`` (or
  ``completions`` first), by keyword, lists in and a list out, the dataset's other columns as
  keyword lists; a completion is the text, or ``[{"role": "assistant", "content": text}]`` where
  the prompt is a chat (TRL's conversational format), after the chat's closing assistant message
  where it has one (a prefill, which TRL moves from the prompt into the completion).

Each becomes a function of this project's contract (one response, or lists of each for
``batch_size`` > 0), whose ``extra`` holds the row's fields, ``prompt`` and ``data_source``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

# verl's four parameter names, singular (the batched manager's: plural)
VERL_PARAMETERS = ("data_source", "solution_str", "ground_truth", "extra_info")
# what TRL passes that dapo-rl has no value for: a function that requires one is refused
TRL_ONLY = ("completion_ids", "trainer_state", "log_extra", "log_metric")
# the columns TRL does not pass as columns (a row's prompt and completion are prompts and completions)
TRL_NOT_COLUMNS = {"prompt", "prompts", "completion", "completions", "completion_ids"}


class BadReturnValue(TypeError):
    """A peer's function returned what its contract does not allow (the scoring worker counts it a
    bad value, which stops a run at start, not an error it would only warn of there)."""


def called_as_its_peer_does(function: Callable) -> Callable | None:
    """``function`` wrapped to be called as verl or TRL calls it, or None when it is written to
    this project's contract."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    if not parameters:
        return None
    taken = {parameter.name for parameter in parameters}
    takes_any = any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters)
    for names in (VERL_PARAMETERS, tuple(f"{name}s" for name in VERL_PARAMETERS)):
        if parameters[0].name == names[0] or names[1] in taken:  # (verl's math_dapo: solution_str first)
            if unknown := [p.name for p in parameters if p.name not in names and p.default is inspect.Parameter.empty
                           and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]:
                # (fn(solution_str, ground_truth, extra): called by keyword, every call would fail)
                raise TypeError(f"a verl reward function (it takes {names[1] if names[1] in taken else names[0]}) that "
                                f"requires {', '.join(unknown)}: verl passes {', '.join(names)}, by keyword; give it "
                                "a default, or write it to dapo-rl's contract fn(response, ground_truth, extra)")
            return _called_as_verl_does(function, tuple(name if name in taken or takes_any else None for name in names))
    if parameters[0].name in ("prompts", "completions") and takes_any:  # TRL's: every call by keyword
        if required := [p.name for p in parameters if p.name in TRL_ONLY and p.default is inspect.Parameter.empty]:
            raise TypeError(f"a TRL reward function that requires {', '.join(required)}: dapo-rl passes prompts, "
                            "completions and the dataset's columns; give it a default")
        named = [p.name for p in parameters[1:] if p.default is inspect.Parameter.empty and p.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) and p.name not in ("prompts", "completions")]
        return _called_as_trl_does(function, named)
    return None


def _called_as_verl_does(function: Callable, names: tuple[str | None, ...]) -> Callable:
    """``function`` called by keyword with the row's ``data_source`` and its ``extra_info`` column
    (``{}`` for a row without one), the names it does not take (None) left out: once per response
    for the singular names, with lists for the plural ones, whichever way dapo-rl calls it (per
    response, or ``batch_size`` > 0). Positionally, as this project's contract calls, it got the
    response as ``data_source`` and the ground truth as the response: every response scored
    wrongly, without an error. Text values of its dicts are left out (verl logs them, they are no
    metric), but for ``"pred"``, the answer ``math_dapo`` read: maj@k's vote with the verifier off."""
    plural = names[1] == "solution_strs"

    def verl_fields(fields: dict) -> tuple[Any, dict]:
        info = fields.get("extra_info")
        return fields.get("data_source"), dict(info) if isinstance(info, dict) else {}

    def score(sources: Any, responses: Any, ground_truths: Any, infos: Any) -> Any:
        values = (sources, responses, ground_truths, infos)
        return function(**{name: given for name, given in zip(names, values, strict=True) if name is not None})

    def call(response: Any, ground_truth: Any, extra: Any) -> Any:
        batched = isinstance(extra, list)
        responses, ground_truths, rows = (response, ground_truth, extra) if batched else ([response], [ground_truth], [extra])
        fields = [verl_fields(row) for row in rows]
        if plural:  # lists in, a list out
            values = score([source for source, _ in fields], responses, ground_truths, [info for _, info in fields])
        else:  # a call per response (an async function's awaited together)
            values = [score(source, text, gold, info)
                      for (source, info), text, gold in zip(fields, responses, ground_truths, strict=True)]
            values = _finish(_gathered(values) if any(inspect.iscoroutine(value) for value in values) else values,
                             _one_score_each)
        return _finish(values, lambda values: _without_text(values if batched else _the_one(values)))

    return call


def _one_score_each(values: list[Any]) -> list[Any]:
    """A singular verl function's values, one per response, refused where one is a list: verl calls
    it once per response, whatever batch_size says, for one score."""
    for item in values:
        if isinstance(item, (list, tuple)) or getattr(item, "ndim", 0) >= 1:
            raise BadReturnValue(f"the return value is a {type(item).__name__}, not one score (verl calls a function "
                                 "of its singular names, solution_str, once per response: it returns one score; its "
                                 "plural names, solution_strs, make it a batched one)")
    return values


async def _gathered(values: list[Any]) -> list[Any]:
    """The values of a batch's calls of an ``async def`` function, awaited together."""
    import asyncio

    return list(await asyncio.gather(*values))


def _called_as_trl_does(function: Callable, named: list[str]) -> Callable:
    """``function`` called with lists (of one response where it is not batched): ``prompts``,
    ``completions`` and each column of the rows, as TRL's GRPOTrainer calls its reward functions;
    its list's one value returned where not batched. A row without a column has None there, as a
    dataset holds it (a column the function ``named``, requires, that no row of the data has is
    refused before the run starts: ``required_columns``, :mod:`dapo.rewards.start_checks`)."""

    def call(response: Any, ground_truth: Any, extra: Any) -> Any:
        batched = isinstance(extra, list)
        responses, rows = (response, extra) if batched else ([response], [extra])
        pairs = [_trl_prompt_and_completion(row.get("prompt"), text) for text, row in zip(responses, rows, strict=True)]
        prompts, completions = [prompt for prompt, _ in pairs], [completion for _, completion in pairs]
        columns = ({key for row in rows for key in row} | set(named)) - TRL_NOT_COLUMNS
        keywords = {key: [row.get(key) for row in rows] for key in sorted(columns)}
        value = function(prompts=prompts, completions=completions, **keywords)
        return _finish(value, lambda values: values if batched else _the_one(values))

    call.required_columns = tuple(name for name in named if name not in TRL_NOT_COLUMNS)  # type: ignore[attr-defined]
    return call


def _trl_prompt_and_completion(prompt: Any, text: str) -> tuple[Any, Any]:
    """The prompt and completion TRL gives its reward functions for ``text``, the response to
    ``prompt``: as they are for a text prompt; for a chat, the completion as an assistant message,
    which begins with the prompt's closing assistant message (a prefill the response continued),
    then left out of the prompt."""
    if prompt is None or isinstance(prompt, str):
        return prompt, text
    if prompt and prompt[-1]["role"] == "assistant":
        return prompt[:-1], [{"role": "assistant", "content": prompt[-1]["content"] + text}]
    return prompt, [{"role": "assistant", "content": text}]


def _the_one(values: Any) -> Any:
    """The value a peer's batched function returned for one response, in its list of one."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__") or len(values) != 1:
        raise BadReturnValue(f"a function of lists (TRL's, or verl's batched one) returns a list with one value "
                             f"per response; for one, it returned {repr(values)[:80]}")
    return values[0]


def _finish(value: Any, then: Callable[[Any], Any]) -> Any:
    """``then(value)``, after ``value`` is awaited where the function is ``async def``."""
    if inspect.iscoroutine(value):
        async def awaited() -> Any:
            return then(await value)

        return awaited()
    return then(value)


def _without_text(value: Any) -> Any:
    """A verl function's return with its dicts' text values (not score, acc or pred) left out."""
    if isinstance(value, dict):
        return {key: field for key, field in value.items()
                if key in ("score", "acc", "pred") or not isinstance(field, str)}
    if isinstance(value, list):
        return [_without_text(item) for item in value]
    return value
