"""A policy's Hugging Face export: the directory ``AutoModelForCausalLM.from_pretrained`` loads.

:func:`save_hf_model` writes a model in memory with ``save_pretrained``; a sharded policy's
ranks stream theirs (:func:`export_hf_from_shards`): one full tensor gathered at a time, rank 0
holding at most one safetensors file's worth, laid out as ``save_pretrained`` lays it out.
A checkpoint (:mod:`dapo.trainer.checkpoint`) holds one.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from dapo.lora import merge_adapters
from dapo.rollout.base import checkpoint_format, tied_duplicates
from dapo.rollout.stopping import model_stop_token_ids
from dapo.trainer.dropout import config_dropout_restored
from dapo.trainer.fsdp import gathered_weights


def save_hf_model(directory: str | Path, model: Any, tokenizer: Any, state_dict: dict | None = None) -> None:
    """The Hugging Face directory of ``model``: safetensors, config, generation config, tokenizer.
    ``state_dict``: the weights to write instead of the model's own (a sharded model's, gathered)."""
    if state_dict is not None:  # transformers 5's save_pretrained empties the dict it is given: a copy
        state_dict = dict(state_dict)
    # the config's own dropout rates, not the zeros the policy trains with; the stop tokens it trained with
    with config_dropout_restored(model), generation_config_stopping_as_trained(model, tokenizer):
        model.save_pretrained(directory, state_dict=state_dict, safe_serialization=True)
    tokenizer.save_pretrained(directory)


@contextlib.contextmanager
def generation_config_stopping_as_trained(model: Any, tokenizer: Any) -> Iterator[None]:
    """``model.generation_config`` with ``eos_token_id`` every id a response ended on in training
    (:func:`~dapo.rollout.stopping.model_stop_token_ids`: its own EOS ids, the tokenizer's EOS, the
    chat template's end-of-turn token), so that ``from_pretrained(export).generate`` and servers
    that read the file stop where the rollouts did: a Qwen2.5 base lists only <|endoftext|>, and
    a policy trained on chat prompts ends its answers with <|im_end|>. A copy: the model's own is
    left as it is. (rollout.stop_strings cannot be written there: ``generate`` refuses stop strings
    without the tokenizer passed to it.)"""
    generation_config = getattr(model, "generation_config", None)
    if generation_config is None:
        yield
        return
    stop_ids = model_stop_token_ids(tokenizer, generation_config.eos_token_id)
    as_trained = copy.deepcopy(generation_config)
    as_trained.eos_token_id = stop_ids[0] if len(stop_ids) == 1 else stop_ids or None
    model.generation_config = as_trained
    try:
        yield
    finally:
        model.generation_config = generation_config


HF_MAX_FILE_BYTES = 5 * 2**30  # the sharded Hugging Face export's weights per safetensors file


def export_hf_from_shards(directory: str | Path, model: torch.nn.Module, tokenizer: Any, rank: int,
                          max_file_bytes: int = HF_MAX_FILE_BYTES) -> None:
    """Rank 0 writes the Hugging Face export of a sharded ``model`` into ``directory``: config,
    generation config and tokenizer (by ``save_pretrained``), and the weights as save_pretrained
    lays them out (``model.safetensors``, or files of at most ``max_file_bytes`` listed in
    ``model.safetensors.index.json``; a tied output layer once; a MoE's experts one by one, as
    :func:`checkpoint_format` names them; a LoRA policy's merged, :func:`dapo.lora.merge_adapters`).
    Streamed: the ranks all-gather one full tensor at a time
    and rank 0 holds at most one file's worth in CPU memory, not the model (131 GB at 32B float32).
    Collective: every rank must call it. Rank 0 failing (a full disk, a tokenizer that will not
    save) still takes part in every all-gather left, so that no other rank waits in one for good
    and the ranks still take calls (as the weight sync does, ``PolicyRank.sync_engine``)."""
    weights = gathered_weights(model, skip=tied_duplicates(model))
    try:
        if rank != 0:
            return  # gathered in the finally
        save_hf_model_streamed(directory, model, tokenizer, merge_adapters(unclosed(weights), model), max_file_bytes)
    finally:  # (a gather that failed closed the generator: nothing left)
        collections.deque(weights, maxlen=0)


def save_hf_model_streamed(directory: str | Path, model: torch.nn.Module, tokenizer: Any,
                           weights: Iterator[tuple[str, torch.Tensor]], max_file_bytes: int = HF_MAX_FILE_BYTES) -> None:
    """:func:`save_hf_model` with ``weights`` (named as in ``model`` in memory, a tied output layer
    left out) written as they come, at most one file's worth held in CPU memory: the config,
    generation config and tokenizer by ``save_pretrained``, the weights laid out as it lays them
    out (``model.safetensors``, or files of at most ``max_file_bytes`` listed in its index; a
    MoE's experts one by one, as :func:`checkpoint_format` names them)."""
    # everything but the weights first: save_pretrained removes weight files it did not write
    save_hf_model(directory, model, tokenizer, state_dict={})
    writer = _SafetensorsWriter(Path(directory), max_file_bytes)
    for name, tensor in checkpoint_format(model, weights):
        writer.add(name, tensor.detach().cpu())  # a gathered copy already, or written before training moves it
    writer.close()


def unclosed(items: Iterator[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
    """``items`` behind an iterator without ``close``: a generator that consumes it by ``yield
    from`` (:func:`dapo.rollout.base.checkpoint_format`), stopped by an error and closed, would
    close ``items`` too, and a collective ``items`` (the ranks' all-gathers) could no longer be
    drained to its end, leaving the other ranks waiting in the next gather."""
    return itertools.chain(items)


class _SafetensorsWriter:
    """Writes named tensors, as they come, into safetensors files of at most ``max_file_bytes``
    (a larger tensor gets a file of its own); ``close`` gives them save_pretrained's names."""

    def __init__(self, directory: Path, max_file_bytes: int) -> None:
        self.directory, self.max_file_bytes = directory, max_file_bytes  # save_pretrained made it
        self.pending: dict[str, torch.Tensor] = {}
        self.pending_bytes = 0
        self.written: list[list[str]] = []  # the tensor names of each file written
        self.total_bytes = 0

    def add(self, name: str, tensor: torch.Tensor) -> None:
        size = tensor.numel() * tensor.element_size()
        if self.pending and self.pending_bytes + size > self.max_file_bytes:
            self._flush()
        self.pending[name] = tensor.contiguous()
        self.pending_bytes += size

    def _part(self, index: int) -> Path:
        return self.directory / f".part-{index:05d}.safetensors"

    def _flush(self) -> None:
        from safetensors.torch import save_file

        save_file(self.pending, str(self._part(len(self.written))), metadata={"format": "pt"})
        self.written.append(list(self.pending))
        self.total_bytes += self.pending_bytes
        self.pending, self.pending_bytes = {}, 0

    def close(self) -> None:
        if self.pending or not self.written:
            self._flush()
        count = len(self.written)
        if count == 1:
            os.replace(self._part(0), self.directory / "model.safetensors")
            return
        weight_map = {}
        for index, names in enumerate(self.written):
            filename = f"model-{index + 1:05d}-of-{count:05d}.safetensors"
            os.replace(self._part(index), self.directory / filename)
            weight_map.update(dict.fromkeys(names, filename))
        index_file = {"metadata": {"total_size": self.total_bytes}, "weight_map": weight_map}
        (self.directory / "model.safetensors.index.json").write_text(json.dumps(index_file, indent=2) + "\n")
