"""Turn problems into the prompt text and token ids the policy sees.

Rendering rules, in order:

1. A ``verbatim`` problem (the built-in task) is a completion prompt:
   its text is used verbatim, with no instruction and no chat template.
2. Raw problem text is wrapped by ``cfg.template``, then treated as a one-message chat
   ``[{"role": "user", ...}]``: "dapo", the DAPO instruction (``DAPO_TEMPLATE``; not again where the
   text already begins with it: a DAPO-Math prompt flattened to text); "boxed", Qwen2.5-Math's
   instruction to put the answer in ``\\boxed{}`` (``BOXED_TEMPLATE``); "r1", DeepSeek-R1-Zero's
   (``R1_INSTRUCTION``, answers in ``<think>`` and ``<answer>`` tags) as the system message of a
   two-message chat where the chat template is used, and otherwise as R1-Zero's base model read it,
   the completion prompt ``R1_TEMPLATE`` ("... User: {problem}. Assistant:"); "none", nothing.
3. A chat list goes through ``tokenizer.apply_chat_template(..., add_generation_prompt=True)``
   when ``cfg.use_chat_template`` and the tokenizer has a chat template; otherwise the messages'
   contents are joined with blank lines as plain text; ``cfg.chat_template_kwargs`` are the
   template's extra variables (Qwen3's ``enable_thinking``). A chat that ends in an assistant message
   (a prefill, such as "<think>\n" or "Let's think step by step.") is left open instead
   (``continue_final_message=True``, TRL's rule): the response continues that message.

Chat lists are not wrapped again: DAPO-style files already carry the instruction in the message.
A prompt longer than ``cfg.max_prompt_length`` tokens is never cut (from the left it would lose
its BOS and chat header, from the right its generation prompt, and either way part of the
question): :meth:`PromptEncoder.drop_overlong` leaves such problems out when the data is loaded
(or stops, with data.overlong_prompts=error), and :meth:`PromptEncoder.encode` refuses one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dapo.config.model_data import TEMPLATE_NAMES
from dapo.config.schema import DataConfig
from dapo.context_checks import is_builtin
from dapo.data.records import DataError, Problem, closing_prefill, problem_key

if TYPE_CHECKING:
    from dapo.data.loaded import LoadedProblems

DAPO_TEMPLATE = (
    "Solve the following math problem step by step. The last line of your response should be of "
    "the form Answer: $Answer (without quotes) where $Answer is the answer to the problem.\n\n"
    "{problem}\n\n"
    'Remember to put your answer on its own line after "Answer:".'
)

# Chat roles that Hugging Face chat templates know (system, user, assistant, tool; developer in
# OpenAI-style ones, ipython in Llama 3's): another is likely a typo or another format's name.
KNOWN_ROLES = ("system", "user", "assistant", "tool", "developer", "ipython")

_DAPO_HEAD = DAPO_TEMPLATE.partition("{problem}")[0].strip()

# Qwen2.5-Math's chain-of-thought instruction, which Qwen's math evaluations and R1-Zero-like
# recipes (SimpleRL-Zoo, Dr. GRPO) ask for, after the problem.
BOXED_TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."

# DeepSeek-R1-Zero's instruction (the DeepSeek-R1 paper, Table 1), as its base model and the system
# prompts of R1-Zero reproductions (open-r1, TRL's GRPO examples) state it; the verifier reads the
# <answer> tag (reward.extractor auto, any or answer).
R1_INSTRUCTION = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
    "The assistant first thinks about the reasoning process in the mind and then provides the user with the "
    "answer. The reasoning process and answer are enclosed within <think> </think> and <answer> </answer> "
    "tags, respectively, i.e., <think> reasoning process here </think> <answer> answer here </answer>."
)
R1_TEMPLATE = R1_INSTRUCTION + " User: {problem}. Assistant:"


def problem_text(prompt: str | list[dict[str, str]]) -> str:
    """The problem a prompt states, for messages: its last message but an assistant's closing
    prefill (which many prompts share: "<think>"), without the DAPO instruction that every
    DAPO-Math prompt begins and ends with."""
    if isinstance(prompt, str):
        text = prompt
    else:
        prefilled = len(prompt) > 1 and closing_prefill(prompt) is not None
        text = prompt[-2 if prefilled else -1]["content"]
    head, _, tail = DAPO_TEMPLATE.partition("{problem}")
    return text.removeprefix(head).removesuffix(tail).strip()


@dataclass
class EncodedPrompts:
    token_ids: list[list[int]]  # one list per problem, at most max_prompt_length ids
    texts: list[str]  # the rendered prompts before tokenisation (for logs and debugging)


# Problems tokenised per call when only their lengths are needed (drop_overlong).
_LENGTH_BATCH = 4096


class PromptEncoder:
    """Renders problems with the configured template and tokenises them."""

    def __init__(self, tokenizer: Any, cfg: DataConfig, vocab_size: int | None = None) -> None:
        """``vocab_size``: the model's (its embedding's rows); a prompt holding an id past it is
        refused as the data loads, naming it, not at its first generation."""
        self.tokenizer = tokenizer
        self.cfg = cfg
        self.vocab_size = vocab_size
        self.uses_chat_template = cfg.use_chat_template and bool(
            getattr(tokenizer, "chat_template", None)
        )

    def plain_text_note(self, problems: list[Problem]) -> str | None:
        """A warning when data.use_chat_template asks for a chat template the tokenizer lacks (a
        base model's) and some of ``problems`` would have used it: their prompts go to the model as
        plain text, which is right for a base model, but should not happen unsaid. None otherwise."""
        if not self.cfg.use_chat_template or self.uses_chat_template:
            return None
        if all(problem.verbatim and isinstance(problem.prompt, str) for problem in problems):
            return None  # (the built-in task's completion prompts never use one)
        return ("warning: data.use_chat_template=true, but the tokenizer has no chat template (a base model's): "
                "prompts are plain text, a chat list's messages joined by blank lines; set "
                "data.use_chat_template=false to say so, or give the tokenizer a chat template")

    def unknown_roles_note(self, problems: list[Problem]) -> str | None:
        """A warning when chat prompts that go through the chat template hold a role outside
        KNOWN_ROLES (a typo such as "usr", or "human"/"gpt" of ShareGPT-style data): a template that
        does not check them renders the role as written, or drops the message, and the policy then
        trains on prompts unlike its chat format. Each distinct prompt is read once. None otherwise."""
        if not self.uses_chat_template:
            return None  # joined as plain text: roles are not rendered
        unknown: dict[str, Problem] = {}
        seen: set[int] = set()
        for problem in problems:
            if isinstance(problem.prompt, list) and id(problem.prompt) not in seen:
                seen.add(id(problem.prompt))  # copies of a prompt share their list
                for message in problem.prompt:
                    if message["role"] not in KNOWN_ROLES:
                        unknown.setdefault(message["role"], problem)
        if not unknown:
            return None
        role, first = next(iter(unknown.items()))
        at = f" at {first.where}" if first.where else ""
        return (f"warning: chat prompts use the role(s) {', '.join(map(repr, unknown))}, not one of "
                f"{', '.join(KNOWN_ROLES)}; the chat template renders them as it does unknown roles "
                f"(as written, or not at all): the first {role!r}{at}")

    def rendered_text_note(self, problems: list[Problem]) -> str | None:
        """A warning when text prompts hold the tokenizer's special tokens ("<|im_start|>"), as a
        prompt already rendered with a chat template does: the chat template, or the DAPO
        instruction, then renders it a second time, a template inside a template. Each distinct
        prompt is read once. None otherwise, and with data.template=none and
        data.use_chat_template=false, which use text prompts as they are."""
        how = ("the chat template" if self.uses_chat_template else
               f"{TEMPLATE_NAMES[self.cfg.template]} (data.template={self.cfg.template})"
               if self.cfg.template in TEMPLATE_NAMES else None)
        special = [token.content for token in getattr(self.tokenizer, "added_tokens_decoder", {}).values()
                   if token.special and token.content.strip()]
        if how is None or not special:
            return None
        marker = re.compile("|".join(map(re.escape, sorted(special, key=len, reverse=True))))
        seen: set[int] = set()
        for problem in problems:
            if problem.verbatim or not isinstance(problem.prompt, str) or id(problem.prompt) in seen:
                continue
            seen.add(id(problem.prompt))  # copies of a prompt share their text
            if found := marker.search(problem.prompt):
                at = f" at {problem.where}" if problem.where else ""
                return (f"warning: text prompts hold the tokenizer's special token {found.group()!r}, as a prompt "
                        f"already rendered with a chat template does: {how} renders them a second time; set "
                        f"data.template=none data.use_chat_template=false to use them as they are (the first{at})")
        return None

    def builtin_template_note(self, problems: list[Problem], model_path: str) -> str | None:
        """The built-in models learned their task from bare prompts (``18+73=``, data.template=none,
        as the embedded default renders them): the DAPO template (the schema's default, which a
        config of one's own starts from) wraps each text prompt in instructions they have never
        read, and they then answer next to nothing right, so no group has signal and no step updates
        the policy. A warning when ``model_path`` is a built-in model and some of ``problems`` are
        text prompts the template wraps (chat lists and verbatim prompts are used as they are)."""
        if not is_builtin(model_path) or self.cfg.template == "none":
            return None
        if not any(isinstance(problem.prompt, str) and not problem.verbatim for problem in problems):
            return None
        return (f"warning: model.path={model_path} was trained on bare prompts (data.template=none, as the embedded "
                f"default renders them), and data.template={self.cfg.template} wraps each text prompt in "
                "instructions it has never read: expect next to no correct answers and steps without updates. Set "
                "data.template=none, or start from the embedded default's settings: `dapo train default YOUR.yaml`")

    def render(self, problem: Problem) -> str:
        """The prompt text for ``problem`` (see the module docstring for the rules)."""
        prompt = problem.prompt
        if problem.verbatim and isinstance(prompt, str):
            return prompt
        if isinstance(prompt, str):
            if self.cfg.template == "r1" and not self.uses_chat_template:
                return R1_TEMPLATE.format(problem=prompt)  # a completion prompt, as R1-Zero's base model read it
            prompt = self._as_chat(prompt)
        if self.uses_chat_template:
            # a chat ending in an assistant message is a prefill: the response continues it, as in
            # TRL, rather than following it as a closed turn in a second assistant turn
            prefill = closing_prefill(prompt) is not None
            try:
                return self.tokenizer.apply_chat_template(
                    prompt, add_generation_prompt=not prefill, continue_final_message=prefill, tokenize=False,
                    **self.cfg.chat_template_kwargs)
            except Exception as error:  # jinja2's TemplateError (the template's raise_exception), or its code's
                roles = ", ".join(message["role"] for message in prompt)
                raise DataError(f"the tokenizer's chat template refused the prompt of {self._named(problem)} "
                                f"(roles: {roles}): {type(error).__name__}: {error}") from error
        return "\n\n".join(message["content"] for message in prompt)

    def _as_chat(self, text: str) -> list[dict[str, str]]:
        """Problem text wrapped by data.template as the chat the chat template renders (module rule 2)."""
        template = self.cfg.template
        if template == "r1":
            return [{"role": "system", "content": R1_INSTRUCTION}, {"role": "user", "content": text}]
        # a DAPO-Math prompt flattened to text already carries the instruction: not twice
        if template == "dapo" and not text.lstrip().startswith(_DAPO_HEAD):
            text = DAPO_TEMPLATE.format(problem=text)
        elif template == "boxed":
            text = BOXED_TEMPLATE.format(problem=text)
        return [{"role": "user", "content": text}]

    def encode(self, problems: list[Problem]) -> EncodedPrompts:
        """Token ids of each rendered prompt; a DataError names one longer than
        ``cfg.max_prompt_length`` (loaded data has had them dropped: :meth:`drop_overlong`).

        Chat-templated text already holds the model's special tokens, so none are added then;
        plain text (a verbatim problem, or any prompt without a chat template) gets the
        tokenizer's usual ones (e.g. a BOS for Llama-style models), less a second BOS and a
        closing EOS (:meth:`_plain_ids`).
        """
        texts, token_ids = self._tokenize(problems)
        for problem, ids in zip(problems, token_ids):
            if len(ids) > self.cfg.max_prompt_length:
                raise DataError(self._too_long(problem, len(ids)))
            self._check_vocabulary(problem, ids)
        return EncodedPrompts(token_ids=token_ids, texts=texts)

    def _check_vocabulary(self, problem: Problem, ids: list[int]) -> None:
        """Raise naming ``problem`` when its prompt holds an id the model has no embedding for: its
        tokenizer is not the model's (model.tokenizer_path another model's, or tokens added to it
        and the model's embeddings not resized)."""
        if self.vocab_size is None or not ids or (largest := max(ids)) < self.vocab_size:
            return
        raise DataError(f"the prompt of {self._named(problem)} holds token id {largest} "
                        f"({self.tokenizer.convert_ids_to_tokens(largest)!r}), outside the model's vocabulary of "
                        f"{self.vocab_size} ids: the tokenizer ({len(self.tokenizer)} ids) is not the model's (does "
                        "model.tokenizer_path name another model's? were tokens added to it without "
                        "model.resize_token_embeddings?)")

    def drop_overlong(self, loaded: LoadedProblems, split: str) -> None:
        """Apply data.overlong_prompts to ``loaded``: leave out (counted, with a warning) the
        problems whose rendered prompt is longer than data.max_prompt_length, or raise naming the
        first; raise naming a prompt the model has no embedding for (:meth:`_check_vocabulary`).
        Once per run (:meth:`_lengths`)."""
        limit = self.cfg.max_prompt_length
        lengths = self._lengths(loaded.problems)
        overlong = [i for i, length in enumerate(lengths) if length > limit]
        if not overlong:
            return
        first = loaded.problems[overlong[0]]
        if self.cfg.overlong_prompts == "error":
            raise DataError(f"{split} data: {len(overlong)} prompts are longer than data.max_prompt_length; the "
                            f"first: {self._too_long(first, lengths[overlong[0]])}")
        dropped = set(overlong)
        kept = [problem for i, problem in enumerate(loaded.problems) if i not in dropped]
        if not kept:
            raise DataError(f"no {split} prompt fits data.max_prompt_length={limit} tokens (the shortest has "
                            f"{min(lengths)}): raise it")
        # problems, as data/<split>_problems counts them: an eval file's copies of a problem are one
        loaded.num_overlong_dropped = len({problem_key(loaded.problems[i], split) for i in overlong})
        loaded.problems = kept
        # first: a summary, shown whatever number of row warnings follow it (LoadedProblems.describe)
        loaded.warnings.insert(0, f"{loaded.num_overlong_dropped} problems longer than data.max_prompt_length={limit} "
                               f"tokens were left out (data.overlong_prompts=drop); the first: "
                               f"{self._too_long(first, lengths[overlong[0]])}")

    def _lengths(self, problems: list[Problem]) -> list[int]:
        """Each problem's rendered prompt length in tokens. Copies of a problem (one uid, a hash of
        the prompt's content) render alike, so each distinct one is tokenised once: DAPO-Math-17K's
        1.8M rows kept with data.dedup_train=false are 18k prompts. Batched a few thousand at a time:
        the tokenizer's encodings of all of them at once would take gigabytes only to be counted."""
        first_copy: dict[tuple[str, bool], Problem] = {}
        for problem in problems:
            first_copy.setdefault((problem.uid, problem.verbatim), problem)
        distinct = list(first_copy.values())
        length_of: dict[tuple[str, bool], int] = {}
        for start in range(0, len(distinct), _LENGTH_BATCH):
            batch = distinct[start : start + _LENGTH_BATCH]
            for problem, ids in zip(batch, self._tokenize(batch)[1]):
                self._check_vocabulary(problem, ids)
                length_of[problem.uid, problem.verbatim] = len(ids)
        return [length_of[problem.uid, problem.verbatim] for problem in problems]

    def _too_long(self, problem: Problem, length: int) -> str:
        return (f"the prompt of {self._named(problem)} is {length} tokens "
                f"once rendered, more than data.max_prompt_length={self.cfg.max_prompt_length}")

    @staticmethod
    def _named(problem: Problem) -> str:
        at = f" at {problem.where}" if problem.where else ""
        return f"problem {problem.uid}{at} ({problem.data_source}: {problem_text(problem.prompt)[:60]!r})"

    def _tokenize(self, problems: list[Problem]) -> tuple[list[str], list[list[int]]]:
        """The rendered texts and their token ids (one batched tokenizer call per kind)."""
        texts = [self.render(problem) for problem in problems]
        templated = [self.uses_chat_template and not (p.verbatim and isinstance(p.prompt, str)) for p in problems]
        encoded: list[list[int]] = [[] for _ in texts]
        for chat in (True, False):
            rows = [i for i, is_chat in enumerate(templated) if is_chat == chat]
            if rows:
                batch = self.tokenizer([texts[i] for i in rows], add_special_tokens=not chat)["input_ids"]
                for i, ids in zip(rows, batch):
                    encoded[i] = list(ids) if chat else self._plain_ids(texts[i], list(ids))
        return texts, encoded

    def _plain_ids(self, text: str, ids: list[int]) -> list[int]:
        """Plain text's ids with the tokenizer's special tokens, less the two that would be wrong
        in a prompt: a BOS added before text that begins with its own (one kept from a rendered
        prompt: a doubled BOS, which Llama-style models were never trained on), and an EOS added at
        its end (a tokenizer saved with add_eos_token=true: a prompt that says the text is over
        before its answer)."""
        bos, eos = self.tokenizer.bos_token_id, self.tokenizer.eos_token_id
        if bos is not None and len(ids) > 2 and ids[0] == ids[1] == bos and text.startswith(self.tokenizer.bos_token):
            ids = ids[1:]
        if eos is not None and len(ids) > 1 and ids[-1] == eos and not text.endswith(self.tokenizer.eos_token):
            ids = ids[:-1]
        return ids
