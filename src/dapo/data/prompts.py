"""Turn problems into the prompt text and token ids the policy sees.

Rendering rules, in order:

1. A ``verbatim`` problem (the built-in task) is a completion prompt:
   its text is used verbatim, with no instruction and no chat template.
2. Raw problem text is wrapped in the DAPO instruction (``DAPO_TEMPLATE``) when
   ``cfg.template == "dapo"`` (unless it already begins with it: a DAPO-Math prompt flattened to
   text), then treated as a one-message chat ``[{"role": "user", ...}]``.
3. A chat list goes through ``tokenizer.apply_chat_template(..., add_generation_prompt=True)``
   when ``cfg.use_chat_template`` and the tokenizer has a chat template; otherwise the messages'
   contents are joined with blank lines as plain text.

Chat lists are not wrapped again: DAPO-style files already carry the instruction in the message.
Encoding keeps the last ``cfg.max_prompt_length`` tokens (left truncation keeps the question's
end and the generation prompt) and counts how many prompts were cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dapo.config.schema import DataConfig
from dapo.data.records import Problem

DAPO_TEMPLATE = (
    "Solve the following math problem step by step. The last line of your response should be of "
    "the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
    "{problem}\n\n"
    'Remember to put your answer on its own line after "Answer:".'
)

_DAPO_HEAD = DAPO_TEMPLATE.partition("{problem}")[0].strip()


@dataclass
class EncodedPrompts:
    token_ids: list[list[int]]  # one list per problem, at most max_prompt_length ids
    num_truncated: int  # prompts longer than max_prompt_length, cut from the left
    texts: list[str]  # the rendered prompts before tokenisation (for logs and debugging)


class PromptEncoder:
    """Renders problems with the configured template and tokenises them with left truncation."""

    def __init__(self, tokenizer: Any, cfg: DataConfig) -> None:
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.uses_chat_template = cfg.use_chat_template and bool(
            getattr(tokenizer, "chat_template", None)
        )

    def render(self, problem: Problem) -> str:
        """The prompt text for ``problem`` (see the module docstring for the rules)."""
        prompt = problem.prompt
        if problem.verbatim and isinstance(prompt, str):
            return prompt
        if isinstance(prompt, str):
            # a DAPO-Math prompt flattened to text already carries the instruction: not twice
            wrap = self.cfg.template == "dapo" and not prompt.lstrip().startswith(_DAPO_HEAD)
            prompt = [{"role": "user", "content": DAPO_TEMPLATE.format(problem=prompt) if wrap else prompt}]
        if self.uses_chat_template:
            return self.tokenizer.apply_chat_template(
                prompt, add_generation_prompt=True, tokenize=False
            )
        return "\n\n".join(message["content"] for message in prompt)

    def encode(self, problems: list[Problem]) -> EncodedPrompts:
        """Token ids of each rendered prompt, left-truncated to ``cfg.max_prompt_length``.

        Chat-templated text already holds the model's special tokens, so none are added then;
        plain text (a verbatim problem, or any prompt without a chat template) gets the
        tokenizer's usual ones (e.g. a BOS for Llama-style models).
        """
        texts = [self.render(problem) for problem in problems]
        templated = [self.uses_chat_template and not (p.verbatim and isinstance(p.prompt, str)) for p in problems]
        encoded: list[list[int]] = [[] for _ in texts]
        for chat in (True, False):  # one batched tokenizer call per kind
            rows = [i for i, is_chat in enumerate(templated) if is_chat == chat]
            if rows:
                batch = self.tokenizer([texts[i] for i in rows], add_special_tokens=not chat)["input_ids"]
                for i, ids in zip(rows, batch):
                    encoded[i] = list(ids)
        limit = self.cfg.max_prompt_length
        num_truncated = sum(len(ids) > limit for ids in encoded)
        token_ids = [ids[-limit:] if len(ids) > limit else ids for ids in encoded]
        return EncodedPrompts(token_ids=token_ids, num_truncated=num_truncated, texts=texts)
