"""The native engine keeps its prepared (cast, fused, packed) weights across generate() calls
only while the model's weights stay as they were: every call samples from the current weights."""

from __future__ import annotations

import pytest
import torch
from conftest import PAD_ID, tiny_llama, tiny_qwen2

from dapo.rollout import NativeEngine, SamplingParams, native

PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12], [3]]
PARAMS = SamplingParams(n=2, max_new_tokens=6, seed=3)


def _outputs(engine: NativeEngine, params: SamplingParams = PARAMS) -> list[tuple[list[int], list[float]]]:
    return [(c.token_ids, c.logprobs) for c in engine.generate(PROMPTS, params).completions]


def _fresh(model: torch.nn.Module, compute_dtype: torch.dtype | None) -> list[tuple[list[int], list[float]]]:
    """What an engine that has prepared nothing yet samples from ``model`` now."""
    return _outputs(NativeEngine(model, PAD_ID, compute_dtype=compute_dtype))


@pytest.fixture()
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the weight preparations of every engine (one entry per build: its rows)."""
    made: list[int] = []
    real = native.LlamaWeights

    def counting(model, rows, compute_dtype=None):
        made.append(rows)
        return real(model, rows, compute_dtype)

    monkeypatch.setattr(native, "LlamaWeights", counting)
    return made


@pytest.mark.parametrize("compute_dtype", [None, torch.bfloat16])
def test_weights_are_prepared_once_while_they_stay_the_same(builds: list[int], compute_dtype) -> None:
    model = tiny_llama()
    engine = NativeEngine(model, PAD_ID, compute_dtype=compute_dtype)
    first, second = _outputs(engine), _outputs(engine)
    assert first == second == _fresh(model, compute_dtype)  # bit for bit
    assert builds == [6, 6]  # this engine's one, then the fresh engine's
    _outputs(engine, SamplingParams(n=1, max_new_tokens=6, seed=3))  # other rows: packed for them
    assert builds == [6, 6, 3]


def _adamw_step(model: torch.nn.Module, **kwargs) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, **kwargs)
    logits = model(torch.tensor([PROMPTS[1]])).logits
    logits.logsumexp(-1).sum().backward()
    optimizer.step()


def _load_other_weights(model: torch.nn.Module) -> None:
    model.load_state_dict(tiny_qwen2(seed=1).state_dict())


def _replace_a_tensor(model: torch.nn.Module) -> None:
    model.lm_head.weight.data = model.lm_head.weight.data * 2  # a new storage


def _write_in_place(model: torch.nn.Module) -> None:
    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight.mul_(-1)


def _scale_rope_frequencies(model: torch.nn.Module) -> None:
    model.model.rotary_emb.inv_freq.mul_(0.25)  # a buffer: the RoPE table is built from it


@pytest.mark.parametrize(
    "change", [_adamw_step, _load_other_weights, _replace_a_tensor, _write_in_place, _scale_rope_frequencies])
@pytest.mark.parametrize("compute_dtype", [None, torch.bfloat16])
def test_a_recorded_weight_change_is_sampled_from_without_a_sync(change, compute_dtype) -> None:
    """Optimizer steps, load_state_dict, in-place writes and replaced tensors move a parameter's
    (or the RoPE frequencies buffer's) version counter or storage: the next generate() prepares
    the weights again."""
    model = tiny_qwen2()
    engine = NativeEngine(model, PAD_ID, compute_dtype=compute_dtype)
    before = _outputs(engine)
    change(model)
    after = _outputs(engine)
    assert after == _fresh(model, compute_dtype) and after != before


@pytest.mark.parametrize(
    "change",
    [lambda m: m.model.norm.weight.data.mul_(3.0), lambda m: _adamw_step(m, fused=True)],
    ids=["write through .data", "fused AdamW"],
)
def test_writes_no_counter_records_are_sampled_from_after_sync_weights(change) -> None:
    """What the version counter does not see, sync_weights (which the trainer calls after every
    update, as every rollout engine needs) makes the next generate() prepare again."""
    model = tiny_qwen2()
    engine = NativeEngine(model, PAD_ID)
    before = _outputs(engine)
    change(model)
    engine.sync_weights(model)
    after = _outputs(engine)
    assert after == _fresh(model, None) and after != before


def test_sleep_releases_the_prepared_weights(builds: list[int]) -> None:
    engine = NativeEngine(tiny_qwen2(), PAD_ID)
    first = _outputs(engine)
    engine.sleep()
    assert engine._weights is None
    assert _outputs(engine) == first and len(builds) == 2


def test_a_model_made_under_inference_mode_is_prepared_at_every_call(builds: list[int]) -> None:
    """Its parameters keep no version counter: no write could be told, so nothing is kept."""
    with torch.inference_mode():
        model = tiny_qwen2()
    engine = NativeEngine(model, PAD_ID)
    first = _outputs(engine)
    with torch.inference_mode():
        model.lm_head.weight.mul_(2)  # tied to the embedding: both change
    assert _outputs(engine) == _fresh(model, None) != first
    assert len(builds) == 3


def test_a_replaced_tensors_old_storage_is_kept_while_the_key_holds_its_address() -> None:
    """The key names storages by address: the engine keeps the tensors it read alive, so a
    replacement cannot be allocated where the old one was and pass for it."""
    model = tiny_qwen2()
    engine = NativeEngine(model, PAD_ID)
    _outputs(engine)
    old_address = model.lm_head.weight.data_ptr()
    model.lm_head.weight.data = model.lm_head.weight.data.clone()
    assert any(t.data_ptr() == old_address for t in engine._key_tensors)
    assert model.lm_head.weight.data_ptr() != old_address
    engine.sleep()
    assert engine._key_tensors == []
