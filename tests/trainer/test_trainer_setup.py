"""Model loading honours the model config (attention kernel, dtype); sampling seeds; stop tokens."""

import pytest
import torch

from dapo.builtin import build_tokenizer
from dapo.config import ConfigError, DAPOConfig, ModelConfig, load_config
from dapo.rollout.stopping import model_stop_token_ids
from dapo.trainer.setup import (
    EVAL_SEED_OFFSET,
    load_model_and_tokenizer,
    make_sampling_params,
    stop_token_ids_of,
    vllm_options,
)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_attention_kernel_and_dtype_reach_the_model(tiny_model_dir, attn):
    cfg = ModelConfig(path=str(tiny_model_dir), attn_implementation=attn, dtype="bfloat16")
    model, tokenizer, _ = load_model_and_tokenizer(cfg, torch.device("cpu"))
    assert model.config._attn_implementation == attn
    assert next(model.parameters()).dtype == torch.bfloat16 and tokenizer.pad_token_id is not None


def test_eval_seed_is_pinned_by_eval_seed_or_derived_from_the_trainer_seed():
    def eval_seed(*overrides: str) -> int:
        cfg: DAPOConfig = load_config([], list(overrides))
        return make_sampling_params(cfg, stop_token_ids=[2], evaluation=True).seed

    assert eval_seed("trainer.seed=3") == EVAL_SEED_OFFSET + 3 != eval_seed("trainer.seed=4")
    assert eval_seed("trainer.seed=3", "eval.seed=11") == eval_seed("trainer.seed=4", "eval.seed=11") == 11
    assert make_sampling_params(load_config([], []), stop_token_ids=[2], seed=5).seed == 5
    with pytest.raises(ValueError, match="seed"):
        make_sampling_params(load_config([], []), stop_token_ids=[2])


def test_evaluation_samples_with_eval_top_k_or_else_the_rollouts():
    """verl's val_kwargs.top_k: the held-out sampling's own top-k (DAPO evaluates without one, a
    rollout may train with one); null keeps the rollout's, as every config before it did."""
    def top_k(*overrides: str, evaluation: bool = True) -> int:
        return make_sampling_params(load_config([], list(overrides)), stop_token_ids=[2], seed=0,
                                    evaluation=evaluation).top_k

    assert top_k("rollout.top_k=50") == 50 and top_k("rollout.top_k=50", "eval.top_k=0") == 0
    assert top_k("rollout.top_k=50", "eval.top_k=0", evaluation=False) == 50
    assert top_k("eval.top_k=20") == 20
    with pytest.raises(ConfigError, match="eval.top_k must be >= 0"):
        load_config([], ["eval.top_k=-1"])


def test_vllm_context_counts_the_rope_scaling_extension():
    """A model extended by YaRN (factor 4 x 64 positions) gives vLLM the run's whole context, not
    its 64 pre-extension positions, which would cut every request past them."""
    from types import SimpleNamespace

    from transformers import Qwen2Config

    cfg = load_config([], ["rollout.engine=vllm", "data.max_prompt_length=100", "rollout.max_response_length=100", "algorithm.overlong_buffer_len=20",
                           "rollout.top_p=1.0"])
    scaled = Qwen2Config(max_position_embeddings=64,
                         rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64})
    assert vllm_options(cfg, SimpleNamespace(config=scaled), on_ranks=False)["max_model_len"] == 200
    plain = SimpleNamespace(config=Qwen2Config(max_position_embeddings=64))
    assert vllm_options(cfg, plain, on_ranks=False)["max_model_len"] == 64


def test_vllm_is_given_the_tokenizer_the_trainer_loads():
    """model.tokenizer_path (a directory of weights alone, the tokenizer elsewhere, as preflight
    suggests): vLLM loaded the model directory's own, or failed on a directory without one."""
    from types import SimpleNamespace

    from transformers import Qwen2Config

    plain = SimpleNamespace(config=Qwen2Config(max_position_embeddings=64))
    cfg = load_config([], ["rollout.engine=vllm", "rollout.top_p=1.0", "model.tokenizer_path=/base/tokenizer"])
    assert vllm_options(cfg, plain, on_ranks=False)["tokenizer_path"] == "/base/tokenizer"
    assert vllm_options(load_config([], ["rollout.engine=vllm", "rollout.top_p=1.0"]), plain, on_ranks=False)["tokenizer_path"] is None


QWEN_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def chat_tokenizer():
    """The built-in tokenizer with Qwen's chat tokens and template (its EOS stays <eos>)."""
    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]})
    tokenizer.chat_template = QWEN_CHAT_TEMPLATE
    return tokenizer


def test_stop_tokens_are_every_eos_of_the_generation_config_the_tokenizer_and_the_chat_template():
    tokenizer = chat_tokenizer()
    vocab = tokenizer.get_vocab()
    im_end, text_end = vocab["<|im_end|>"], vocab["<|endoftext|>"]
    # Qwen2.5-Instruct's generation_config: eos_token_id = [<|im_end|>, <|endoftext|>]
    assert model_stop_token_ids(tokenizer, [im_end, text_end]) == [im_end, text_end, tokenizer.eos_token_id]
    # a base model's single EOS id: the template's end-of-turn token is added
    assert model_stop_token_ids(tokenizer, text_end) == [text_end, tokenizer.eos_token_id, im_end]
    # no chat template: <|im_end|> is just a token
    plain = build_tokenizer()
    assert model_stop_token_ids(plain, None) == [plain.eos_token_id]
    # an end-of-turn token in the vocabulary that the template does not write is no stop (the
    # Qwen template does not write Llama 3's <|eot_id|>: it would cut a response short)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|eot_id|>"]})
    assert model_stop_token_ids(tokenizer, text_end) == [text_end, tokenizer.eos_token_id, im_end]


def test_a_harmony_template_ends_the_turn_at_return_not_at_the_end_of_its_thinking():
    """gpt-oss's harmony format closes every message with <|end|>, its thinking ("analysis") one too;
    the turn ends at <|return|> (or <|call|>). <|end|> was added as a stop token: every response
    ended after its thinking, never reaching the final answer, unsaid (finish "stop")."""
    tokenizer = build_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|start|>", "<|channel|>", "<|message|>", "<|end|>",
                                                                "<|return|>", "<|call|>"]})
    tokenizer.chat_template = ("{% for m in messages %}<|start|>{{ m['role'] }}<|message|>{{ m['content'] }}<|end|>"
                               "{% endfor %}{% if add_generation_prompt %}<|start|>assistant{% endif %}"
                               "{# <|channel|>final<|message|> ... <|return|> #}")
    vocab = tokenizer.get_vocab()
    stops = model_stop_token_ids(tokenizer, None)
    assert stops == [tokenizer.eos_token_id, vocab["<|return|>"], vocab["<|call|>"]] and vocab["<|end|>"] not in stops
    # gpt-oss's own list, [<|return|>, <|endoftext|>, <|call|>], is kept as it is
    assert vocab["<|end|>"] not in model_stop_token_ids(tokenizer, [vocab["<|return|>"], vocab["<|call|>"]])


def test_the_model_directory_decides_the_stop_tokens(tiny_model_dir, tmp_path):
    model, tokenizer, _ = load_model_and_tokenizer(ModelConfig(path=str(tiny_model_dir)), torch.device("cpu"))
    assert stop_token_ids_of(model, tokenizer) == [tokenizer.eos_token_id]
    model.generation_config.eos_token_id = [5, tokenizer.eos_token_id]
    model.save_pretrained(tmp_path)
    chat_tokenizer().save_pretrained(tmp_path)
    model, tokenizer, _ = load_model_and_tokenizer(ModelConfig(path=str(tmp_path)), torch.device("cpu"))
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert stop_token_ids_of(model, tokenizer) == [5, tokenizer.eos_token_id, im_end]
    params = make_sampling_params(load_config([], []), stop_token_ids_of(model, tokenizer), seed=0)
    assert params.stop_token_ids == [5, tokenizer.eos_token_id, im_end]


def test_held_out_problems_that_are_training_problems_too_are_said(tmp_path):
    """The same file in train_files and eval_files (or a split read twice): held-out accuracy
    would measure memorisation, so the data line says how many."""
    import json

    from dapo.trainer.setup import load_run_data

    rows = [{"prompt": f"What is {i}+1?", "reward_model": {"ground_truth": str(i + 1)}} for i in range(4)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "held_out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[2:] + [
        {"prompt": "What is 9+9?", "reward_model": {"ground_truth": "18"}}]))
    cfg = load_config([], [f"data.train_files=[{tmp_path / 'train.jsonl'}]",
                           f"data.eval_files=[{tmp_path / 'held_out.jsonl'}]"])
    data = load_run_data(cfg)
    assert "warning: 2 of the 3 held-out problems are training problems too" in data.eval.describe("eval")
    disjoint = load_config([], [f"data.train_files=[{tmp_path / 'train.jsonl'}]", "data.eval_files=[builtin:arithmetic]"])
    assert "training problems too" not in load_run_data(disjoint).eval.describe("eval")



def test_a_held_out_problem_is_found_in_training_whatever_form_its_prompt_takes(tmp_path):
    """The same problem as chat messages in the DAPO template in train (DAPO-Math-17K's form) and
    as plain text in eval (an AIME file of another source) is one problem: its prompts' hashes
    differ, and the overlap went unsaid."""
    import json

    from dapo.data import DAPO_TEMPLATE
    from dapo.trainer.setup import load_run_data

    problems = [f"What is {i} + 1?" for i in range(3)]
    train = [{"prompt": [{"role": "user", "content": DAPO_TEMPLATE.format(problem=p)}],
              "reward_model": {"ground_truth": str(i + 1)}} for i, p in enumerate(problems)]
    held_out = [{"prompt": "  What is 1 +\n1? ", "reward_model": {"ground_truth": "2"}},
                {"prompt": "What is 7 + 1?", "reward_model": {"ground_truth": "8"}}]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    (tmp_path / "held_out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held_out))
    cfg = load_config([], [f"data.train_files=[{tmp_path / 'train.jsonl'}]",
                           f"data.eval_files=[{tmp_path / 'held_out.jsonl'}]"])
    assert "warning: 1 of the 2 held-out problems are training problems too" in load_run_data(cfg).eval.describe("eval")


def test_prompts_sharing_an_assistant_prefill_are_compared_by_their_question(tmp_path):
    """Chats ending in the same assistant prefill ("<think>") were compared by it: every held-out
    problem was said to be a training problem, and one asked in train without it was not found."""
    import json

    from dapo.trainer.setup import load_run_data

    def chat(question: str, prefill: bool) -> list[dict[str, str]]:
        return [{"role": "user", "content": question}] + ([{"role": "assistant", "content": "<think>"}] if prefill else [])

    train = [{"prompt": chat(f"What is {i}+1?", prefill=i > 0), "reward_model": {"ground_truth": str(i + 1)}} for i in range(3)]
    held_out = [{"prompt": chat(q, prefill=True), "reward_model": {"ground_truth": "1"}} for q in ("What is 0+1?", "Name 1.")]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    (tmp_path / "held_out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in held_out))
    cfg = load_config([], [f"data.train_files=[{tmp_path / 'train.jsonl'}]",
                           f"data.eval_files=[{tmp_path / 'held_out.jsonl'}]", "data.assistant_prefill=true"])
    assert "warning: 1 of the 2 held-out problems are training problems too" in load_run_data(cfg).eval.describe("eval")


def test_the_overlap_counts_only_the_held_out_problems_that_stay(tmp_path):
    """A problem dropped as longer than data.max_prompt_length is not held out: the same file as
    both splits said "4 of the 4 held-out problems" where 3 were evaluated."""
    import json

    from dapo.data import PromptEncoder
    from dapo.trainer.setup import load_run_data

    rows = [{"prompt": f"What is {i}+1?", "reward_model": {"ground_truth": str(i + 1)}} for i in range(3)]
    rows.append({"prompt": "What is " + "1+" * 300 + "1?", "reward_model": {"ground_truth": "301"}})
    (tmp_path / "both.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = load_config([], [f"data.train_files=[{tmp_path / 'both.jsonl'}]", f"data.eval_files=[{tmp_path / 'both.jsonl'}]",
                           "data.max_prompt_length=400"])
    encoder = PromptEncoder(build_tokenizer(), cfg.data)
    data = load_run_data(cfg, drop_overlong=encoder.drop_overlong)
    assert data.eval.num_problems("eval") == 3 and data.train.num_problems("train") == 3
    assert "warning: 3 of the 3 held-out problems are training problems too" in data.eval.describe("eval")

def test_an_evaluation_with_vllm_loads_no_second_copy_of_the_weights(tiny_model_dir, reward_file, tmp_path, monkeypatch):
    """vLLM loads the model directory itself: `dapo eval` with rollout.engine=vllm materialised a
    full Hugging Face copy beside it that nothing used (131 GB for the 32B config's float32)."""
    from dapo.trainer import setup
    from tests.trainer.conftest import tiny_config

    built = {}
    monkeypatch.setattr(setup, "create_engine", lambda rollout, model, tokenizer, **kwargs: built.update(
        model=model, path=kwargs["model_path"]) or "engine")
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "rollout.engine=vllm")
    run = setup.build_run(cfg, train_data=False)
    assert run.engine == "engine" and built["path"] == str(tiny_model_dir)
    assert {p.device.type for p in run.model.parameters()} == {"meta"}
    trained = setup.build_run(tiny_config(tiny_model_dir, tmp_path / "run2", reward_file, "rollout.engine=vllm"))
    assert {p.device.type for p in trained.model.parameters()} == {"cpu"}  # training's policy holds them


def test_one_process_evaluating_a_multi_rank_config_builds_one_whole_vllm_engine(tiny_model_dir, reward_file,
                                                                                  tmp_path, monkeypatch):
    """evaluate_model runs a multi-rank config in one process: its vLLM engine was built as one
    shard of an SPMD group (external_launcher), which needs the process group it does not have."""
    from dapo.trainer import setup
    from tests.trainer.conftest import tiny_config

    built = {}
    monkeypatch.setattr(setup, "create_engine", lambda rollout, model, tokenizer, **kwargs: built.update(kwargs) or "e")
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, "rollout.engine=vllm", "resources.devices_per_node=2")
    setup.build_run(cfg, train_data=False)
    assert built["spmd"] is False
    plain = type("Model", (), {"config": setup.AutoConfig.from_pretrained(tiny_model_dir)})()
    assert setup.vllm_options(cfg, plain, on_ranks=True)["spmd"] is True  # a policy rank's engine: one shard


def test_a_warning_true_of_both_splits_is_said_once(tiny_model_dir, reward_file, tmp_path, monkeypatch):
    """Chat prompts in the training and the held-out files, and a tokenizer without a chat
    template: "no chat template" was printed for each split, word for word."""
    import json

    from dapo.trainer import setup
    from tests.trainer.conftest import tiny_config

    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": f"{i} + 1?"}], "answer": str(i + 1)}) + "\n"
                            for i in range(4)))
    monkeypatch.setattr(setup, "create_engine", lambda *args, **kwargs: "engine")
    cfg = tiny_config(tiny_model_dir, tmp_path / "run", reward_file, f"data.train_files=[{chat}]",
                      f"data.eval_files=[{chat}]", "data.prompt_key=prompt", "data.answer_key=answer",
                      "data.use_chat_template=true")
    run = setup.build_run(cfg)
    said = [w for loaded in (run.data.train, run.data.eval) for w in loaded.warnings if "no chat template" in w]
    assert len(said) == 1 and said[0] in run.data.train.warnings
