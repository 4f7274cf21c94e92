"""Datasets, prompt rendering, and the built-in arithmetic task.

- :func:`load_problems` reads parquet / JSONL / JSON / CSV / TSV files (plain or compressed),
  ``datasets`` directories and ``builtin:arithmetic``
  into :class:`Problem` records (de-duplicated for training, copies grouped by ``uid`` for eval).
- :class:`PromptEncoder` renders them (DAPO template, chat template) and tokenises them.
- :mod:`dapo.data.arithmetic` generates the built-in task.
"""

from dapo.data.loaders import (
    BUILTIN_ARITHMETIC,
    DataError,
    LoadedProblems,
    load_problems,
    prompt_uid,
)
from dapo.data.prompts import DAPO_TEMPLATE, EncodedPrompts, PromptEncoder
from dapo.data.records import Problem

__all__ = [
    "BUILTIN_ARITHMETIC",
    "DAPO_TEMPLATE",
    "DataError",
    "EncodedPrompts",
    "LoadedProblems",
    "Problem",
    "PromptEncoder",
    "load_problems",
    "prompt_uid",
]
