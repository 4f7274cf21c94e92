"""LoRA (Hu et al. 2021, "Low-Rank Adaptation"): train low-rank adapters instead of the weights.

Each targeted linear layer computes

    y = W x + b + (alpha / r) B A x,    A: (r, in), B: (out, r), B = 0 at the start,

(GPT-2's ``Conv1D`` layers too, whose W is stored transposed, (in, out): merged, W + ((alpha / r) B A)^T),

with its weights W, b frozen: the adapted model starts as the base model, and only A and B train
(their AdamW state is all the optimizer holds). PEFT injects the adapters (``peft``'s LoRA
layers replace the targeted ``nn.Linear`` modules in place, so the policy stays the Hugging Face
model it was); this module adds what a trainer needs around them:

* :func:`merged_linear`: a layer's effective weights, W + (alpha / r) B A, for whatever reads
  weights instead of calling the modules (the native engine's prepared weights);
* :func:`merged_weights` / :func:`merge_adapters`: the whole model's weights merged, under the
  base model's names, as vLLM's weight sync and the checkpoint's Hugging Face export take them
  (an export that loads with ``from_pretrained``, no PEFT needed), from a model in memory or
  a sharded one's weights gathered one tensor at a time;
* :func:`save_adapter` / :func:`load_adapter`: the adapters alone in PEFT's format
  (``PeftModel.from_pretrained(base, DIR)`` loads them), which a one-process resume reads back;
* :func:`adapters_off`: the base model's forward, the KL penalty's reference, from the policy
  itself (no second copy of the base weights).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from dapo.errors import UserError

ADAPTER_DIR = "adapter"  # a checkpoint's adapters, in PEFT's format
ADAPTER_FILE = "adapter_model.safetensors"
# PEFT's saved names are the PeftModel's: the base model sits at base_model.model
_PEFT_PREFIX = "base_model.model."


def apply_lora(model: nn.Module, rank: int, alpha: float, target_modules: list[str]) -> None:
    """Inject LoRA adapters of ``rank`` into ``model`` in place and freeze everything else.
    ``target_modules``: module names (``q_proj``, ...) or ``["all-linear"]`` (every linear layer
    but the output layer, PEFT's choice). No dropout: the policy's dropout is off, so that the
    update's first forward reproduces the rollout's log-probs (ratio 1). The adapters are float32
    whatever the base weights' dtype, as PEFT's ``get_peft_model`` makes them: on a bfloat16 base
    (model.dtype=bfloat16) an AdamW step of a small lr would round away on A's weights."""
    try:
        from peft import LoraConfig, inject_adapter_in_model
        from peft.tuners.tuners_utils import cast_adapter_dtype
    except ImportError as error:
        installed = importlib.util.find_spec("peft") is not None  # an old PEFT fails on transformers 5
        raise ImportError(f"model.lora_rank > 0 needs PEFT >= 0.18{' (the installed one does not import)' if installed else ''}: "
                          "pip install -U 'dapo-rl[lora]' (or pip install -U 'peft>=0.18')") from error
    targets: str | list[str] = "all-linear" if target_modules == ["all-linear"] else list(target_modules)
    config = LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, bias="none",
                        task_type="CAUSAL_LM")  # (saved: AutoPeftModelForCausalLM loads the adapter directory)
    with warnings.catch_warnings():  # PEFT asks transformers 5 for a deprecated attribute
        warnings.simplefilter("ignore", FutureWarning)
        # (and says it reads a Conv1D's transposed weight as such: what it is to do)
        warnings.filterwarnings("ignore", "fan_in_fan_out is set to False but the target module is `Conv1D`")
        # (and, on a mixture of experts, of patterns it made itself for the fused experts: none is ours)
        warnings.filterwarnings("ignore", "The following (rank|alpha)_pattern keys did not match", RuntimeWarning)
        try:
            inject_adapter_in_model(config, model)
        except ValueError as error:  # PEFT's NoMatchingPeftModuleError: no module has one of those names
            raise UserError(f"model.lora_target_modules={list(target_modules)} names no linear layer of the model "
                            f"(its linear layers: {_linear_layer_names(model)}; or [all-linear])") from error
    cast_adapter_dtype(model, "default")  # 16-bit adapters to float32; the frozen base keeps its dtype
    adapted = {name: module.base_layer for name, module in model.named_modules()
               if hasattr(module, "lora_A") and hasattr(module, "base_layer")}
    # PEFT stops only when no name matches: a misspelt one (dwn_proj) would leave its layers
    # frozen without a word. A list name matches a module's name or its last dotted parts, as in PEFT.
    if targets != "all-linear" and (unmatched := [target for target in targets if not any(
            name == target or name.endswith(f".{target}") for name in adapted)]):
        raise UserError(f"model.lora_target_modules={list(target_modules)}: {', '.join(unmatched)} names no layer "
                        f"of the model (its linear layers: {_linear_layer_names(model)}; or [all-linear])")
    # PEFT also adapts embeddings, whose adapters the merge (rollout engines, checkpoints) and the
    # KL reference's adapters-off do not handle
    if other := sorted(f"{name} ({type(base).__name__})" for name, base in adapted.items() if not is_linear_layer(base)):
        raise UserError(f"model.lora_target_modules={list(target_modules)} puts adapters on layers that are not "
                        f"linear: {', '.join(other[:4])}{', ...' if len(other) > 4 else ''}; dapo-rl adapts "
                        f"linear layers only (this model's: {_linear_layer_names(model) or 'none'})")
    output = model.get_output_embeddings()
    if output is not None and is_lora_layer(output) and output.base_layer.weight is model.get_input_embeddings().weight:
        # merged, W + BA would be the output layer's alone, and the export or an engine's copy
        # shares one matrix between them: the input embeddings would change too, or the update be lost
        raise UserError(f"model.lora_target_modules={list(target_modules)} adapts the output layer, which this model "
                        "ties to its input embeddings: leave it out of the targets")


def is_linear_layer(module: nn.Module) -> bool:
    """A ``torch.nn.Linear``, or a Hugging Face ``Conv1D`` (GPT-2's linear layer, its weight (in, out))."""
    return type(module) is nn.Linear or _is_conv1d(module)


def _is_conv1d(module: nn.Module) -> bool:
    from transformers.pytorch_utils import Conv1D

    return type(module) is Conv1D


def _linear_layer_names(model: nn.Module) -> str:
    """The names (last part) of ``model``'s linear layers but its output layer, for an error;
    after adapters went in, an adapted layer's, not its adapters' own."""
    return ", ".join(sorted({name.removesuffix(".base_layer").rsplit(".", 1)[-1] for name, module in model.named_modules()
                             if is_linear_layer(module) and ".lora_" not in name
                             and module is not model.get_output_embeddings()}))


def has_lora(model: nn.Module) -> bool:
    """Whether ``model`` carries PEFT adapters (see :func:`apply_lora`)."""
    return bool(getattr(model, "peft_config", None))


def describe(model: nn.Module) -> str | None:
    """One line on ``model``'s adapters for the terminal (None without), as PEFT's
    ``print_trainable_parameters`` counts: trainable parameters of all, adapters included."""
    if not has_lora(model):
        return None
    config = model.peft_config["default"]
    layers = sum(1 for module in model.modules() if is_lora_layer(module))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return (f"policy: LoRA adapters of rank {config.r} (alpha {config.lora_alpha:g}) on {layers} linear layers: "
            f"{trainable:,} trainable parameters of {total:,} ({100 * trainable / total:.2f}%)")


def is_lora_layer(module: nn.Module) -> bool:
    """Whether ``module`` is a PEFT LoRA layer over a plain ``nn.Linear`` (or ``Conv1D``) whose merged
    weights are W + sum of its active adapters' (alpha / r) B A: not DoRA (which rescales the merged
    columns), not an adapter with its own bias, not one already merged into W."""
    base = getattr(module, "base_layer", None)
    if base is None or not is_linear_layer(base) or not hasattr(module, "get_delta_weight"):
        return False
    adapters = list(getattr(module, "active_adapters", []))
    return (not getattr(module, "merged", False)
            and not any(getattr(module, "use_dora", {}).get(name, False) for name in adapters)
            and not any(getattr(module, "lora_bias", {}).get(name, False) for name in adapters))


@dataclass
class MergedLinear:
    """A linear layer's effective parameters, as :class:`torch.nn.Linear` exposes them."""

    weight: torch.Tensor
    bias: torch.Tensor | None

    @property
    def out_features(self) -> int:
        return self.weight.shape[0]


def merged_weight(weight: torch.Tensor, lora_a: torch.Tensor, lora_b: torch.Tensor, scaling: float,
                  transposed: bool = False) -> torch.Tensor:
    """W + (alpha / r) B A, computed in float32 or W's wider dtype (as PEFT's ``get_delta_weight`` computes the product
    on CPU; on a GPU too here: a bf16 B A rounds each of its r-term sums) and rounded once to W's
    dtype: the sum of a bf16 W and a delta already rounded to bf16 rounded twice, one unit in the
    last place off in ~6% of a bf16 model's merged weights. ``transposed``: W is stored (in, out),
    as a ``Conv1D``'s (PEFT's ``fan_in_fan_out``), and the delta is added transposed."""
    dtype = torch.promote_types(weight.dtype, torch.float32)  # (float64 stays float64)
    delta = (lora_b.to(dtype) @ lora_a.to(dtype)).mul_(scaling)
    return (delta.T.contiguous() if transposed else delta).add_(weight).to(weight.dtype)


def merged_linear(module: nn.Module) -> nn.Module | MergedLinear:
    """``module`` itself for a plain linear layer; for a LoRA layer (:func:`is_lora_layer`), its
    weights merged: W + (alpha / r) B A (:func:`merged_weight`), its bias the base layer's."""
    if not is_lora_layer(module):
        return module
    base = module.base_layer
    (adapter,) = _adapters(module)
    weight = base.weight.T if _is_conv1d(base) else base.weight  # (out, in), as nn.Linear holds it
    return MergedLinear(merged_weight(weight, module.lora_A[adapter].weight, module.lora_B[adapter].weight,
                                      module.scaling[adapter]), base.bias)


def _adapters(module: nn.Module) -> list[str]:
    """The active adapters of LoRA layer ``module`` that hold weights: one (apply_lora injects one)."""
    adapters = [name for name in module.active_adapters if name in module.lora_A]
    if len(adapters) != 1:
        raise ValueError(f"a LoRA layer with {len(adapters)} active adapters ({adapters}): one is supported")
    return adapters


def lora_scalings(model: nn.Module) -> dict[str, float]:
    """alpha / r of each LoRA layer of ``model`` (:func:`is_lora_layer`), by module name."""
    return {name: module.scaling[_adapters(module)[0]] for name, module in model.named_modules() if is_lora_layer(module)}


# a LoRA layer's entries in a state dict: its base layer's weight and bias, its adapter's A and B
_LORA_ENTRY = re.compile(r"^(?P<layer>.+)\.(?:base_layer\.(?P<leaf>weight|bias)|lora_(?P<factor>[AB])\.[^.]+\.weight)$")


def merge_adapters(weights: Iterable[tuple[str, torch.Tensor]], model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``weights`` (``model``'s state dict, or a sharded model's gathered one tensor at a time)
    with every LoRA layer merged (:func:`merged_weight`) under the base model's names
    (``q_proj.weight``, not ``q_proj.base_layer.weight``), as they come: a layer's W is held only
    until its A and B follow it. ``weights`` unchanged for a model without adapters."""
    if not has_lora(model):
        yield from weights
        return
    scalings = lora_scalings(model)
    transposed = {name for name, module in model.named_modules() if is_lora_layer(module) and _is_conv1d(module.base_layer)}
    pending: dict[str, dict[str, torch.Tensor]] = {}  # layer -> its W, A and B seen so far
    for name, tensor in weights:
        entry = _LORA_ENTRY.match(name)
        if entry is None:
            yield name, tensor
            continue
        layer = entry["layer"]
        if layer not in scalings:
            raise ValueError(f"{layer} holds adapters that cannot be merged "
                             "(DoRA, adapter biases or merged adapters are not supported)")
        if entry["leaf"] == "bias":  # (the base layer's: is_lora_layer rules out adapter biases)
            yield f"{layer}.bias", tensor
            continue
        parts = pending.setdefault(layer, {})
        parts[entry["factor"] or "W"] = tensor
        if len(parts) == 3:
            del pending[layer]
            yield f"{layer}.weight", merged_weight(parts["W"], parts["A"], parts["B"], scalings[layer], layer in transposed)
    if pending:
        raise ValueError(f"LoRA layers given without their weight or adapters: {sorted(pending)[:3]}")


def merged_weights(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """``model``'s state dict with every LoRA layer merged (:func:`merge_adapters`), one tensor
    at a time; a model without adapters gives its state dict as it is."""
    return merge_adapters(((name, tensor.detach()) for name, tensor in model.state_dict().items()), model)


def adapter_names(model: nn.Module) -> set[str]:
    """The state-dict names of ``model``'s adapter weights (A and B of each LoRA layer)."""
    return {name for name in model.state_dict() if (entry := _LORA_ENTRY.match(name)) and entry["factor"]}


@contextlib.contextmanager
def adapters_off(model: nn.Module) -> Iterator[None]:
    """``model`` computes its base model inside (every LoRA layer's forward is its base layer's),
    in eval mode (no dropout, as a frozen reference): the KL penalty's reference for a LoRA
    policy, without a second copy of the base weights. (PEFT's ``enable_adapters(False)`` would
    also clear the adapters' ``requires_grad``, which a sharded policy's optimizer relies on.)"""
    layers = [module for module in model.modules() if is_lora_layer(module)]
    was_training = model.training
    model.eval()
    for layer in layers:
        layer._disable_adapters = True
    try:
        yield
    finally:
        for layer in layers:
            layer._disable_adapters = False
        model.train(was_training)


def save_adapter(model: nn.Module, directory: str | Path, base_model_path: str,
                 state: Mapping[str, torch.Tensor] | None = None) -> None:
    """The adapters of ``model`` in PEFT's format into ``directory``: ``adapter_config.json`` and
    ``adapter_model.safetensors`` (``PeftModel.from_pretrained(base, directory)`` loads them on
    the base model read from ``base_model_path``). ``state``: the adapter weights by state-dict
    name (:func:`adapter_names`; a sharded model's, gathered), instead of ``model``'s own."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = model.peft_config["default"]
    # a local base model by its absolute path: a relative one (model.path=./base) would load only
    # from the training's working directory (AutoPeftModelForCausalLM reads it from here)
    local = Path(base_model_path)
    config.base_model_name_or_path = str(local.resolve()) if local.is_dir() else base_model_path
    config.save_pretrained(str(directory))
    # no embeddings to save (apply_lora refuses adapters on them; the vocabulary is never resized):
    # PEFT's "auto" would look the base model's config.json up on the Hub, a network call per save
    adapters = get_peft_model_state_dict(model, state_dict=None if state is None else dict(state),
                                         save_embedding_layers=False)
    state = {_PEFT_PREFIX + name: tensor.detach().contiguous() for name, tensor in adapters.items()}
    save_file(state, str(directory / ADAPTER_FILE), metadata={"format": "pt"})


def adapted_layers(model: nn.Module) -> set[str]:
    """The names of ``model``'s layers that carry adapters (``model.layers.0.self_attn.q_proj``, ...)."""
    return {entry["layer"] for name in adapter_names(model) if (entry := _LORA_ENTRY.match(name))}


def saved_adapted_layers(directory: str | Path) -> set[str]:
    """The names of the layers whose adapters :func:`save_adapter` wrote into ``directory``, as
    :func:`adapted_layers` names them (from the file's header: no tensor is read)."""
    from safetensors import safe_open

    with safe_open(str(Path(directory) / ADAPTER_FILE), framework="pt") as file:
        names = file.keys()  # (a safetensors file, not a dict: iterating it is not its names)
    return {name.removeprefix(_PEFT_PREFIX).split(".lora_", 1)[0] for name in names if ".lora_" in name}


def adapter_config_mismatch(model: nn.Module, directory: str | Path) -> str | None:
    """Why the adapters saved in ``directory`` (:func:`save_adapter`) are not ``model``'s kind
    (another rank or alpha, or on other layers), or None when they are. The layers are compared,
    not the target lists: [all-linear] and the list of every projection by name adapt the same."""
    saved = json.loads((Path(directory) / "adapter_config.json").read_text())
    config = model.peft_config["default"]
    layers = layers_difference(saved_adapted_layers(directory), adapted_layers(model))
    if (saved.get("r"), saved.get("lora_alpha")) == (config.r, config.lora_alpha) and not layers:
        return None
    return (f"the adapters in {directory} (rank {saved.get('r')}, alpha {saved.get('lora_alpha')}, targets "
            f"{_as_list(saved.get('target_modules'))}) are not this run's (model.lora_rank={config.r}, lora_alpha="
            f"{config.lora_alpha}, targets {_as_list(config.target_modules)}){layers}: resume with the "
            "checkpoint's model.lora_* settings, or start over with checkpoint.resume=never")


def layers_difference(saved: set[str], run: set[str]) -> str:
    """A clause naming a few of the layers adapted in a checkpoint (``saved``) or in this run alone,
    or "" when both adapt the same layers."""
    parts = [f"{where}: {', '.join(sorted(only)[:3])}{', ...' if len(only) > 3 else ''}"
             for where, only in (("only the checkpoint adapts", saved - run), ("only this run adapts", run - saved))
             if only]
    return f" ({'; '.join(parts)})" if parts else ""


def load_adapter(model: nn.Module, directory: str | Path) -> None:
    """Load the adapters :func:`save_adapter` wrote into ``directory`` into ``model``, whose
    adapters must have the same rank and targets (every one of its adapter weights is given)."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    directory = Path(directory)
    if (mismatch := adapter_config_mismatch(model, directory)) is not None:
        raise ValueError(mismatch)
    device = next(model.parameters()).device
    state = {name.removeprefix(_PEFT_PREFIX): tensor for name, tensor in load_file(str(directory / ADAPTER_FILE), device=str(device)).items()}
    result = set_peft_model_state_dict(model, state)
    missing = [name for name in result.missing_keys if ".lora_" in name]
    if missing or result.unexpected_keys:
        raise ValueError(f"the adapters in {directory} do not match the model: missing {missing[:4]}, "
                         f"unexpected {list(result.unexpected_keys)[:4]}")


def _as_list(targets: object) -> list[str] | str:
    """Target modules as PEFT holds them, to say: sorted, or a count where [all-linear] became
    the names of every layer (hundreds on a large model)."""
    if targets is None:
        return []
    if isinstance(targets, str):
        return [targets]
    return sorted(targets) if len(targets) <= 8 else f"{len(targets)} layers"
