"""The policy worker's update: exact global token-mean under micro-batching, and the NaN guard
(its log-prob passes, entropy and mismatch: test_trainer_response_logits.py)."""

import copy
import json
import math
import warnings

import pytest
import torch
from transformers import AutoModelForCausalLM

import dapo.trainer.policy as policy_module
from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.trainer.batch import Sample
from dapo.trainer.policy import PolicyWorker
from dapo.trainer.step_metrics import update_metrics


def make_samples(generator: torch.Generator) -> list[Sample]:
    samples = []
    for group in range(3):
        for k in range(4):
            prompt = torch.randint(3, 90, (2 + group,), generator=generator).tolist()
            response = torch.randint(3, 90, (1 + 3 * k + group,), generator=generator).tolist()
            samples.append(Sample(group, str(group), prompt, response, [-1.0] * len(response), False,
                                  advantage=float(k) - 1.5))
    return samples


def worker(model, micro_batch_tokens: int, mode: str = "token-mean") -> PolicyWorker:
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=micro_batch_tokens,
                            lr=1e-2, warmup_steps=0, weight_decay=0.0, grad_clip=1e9)
    algo = AlgorithmConfig(loss_agg_mode=mode)
    return PolicyWorker(model, algo, trainer, pad_token_id=0, temperature=1.0, total_steps=10, norm_const=16.0)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batching_gives_the_same_update_as_one_batch(tiny_model_dir, mode):
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).double()
    samples = make_samples(torch.Generator().manual_seed(0))
    results = []
    for budget in (100_000, 24):  # one micro-batch vs many of unequal token counts
        model = copy.deepcopy(base)
        w = worker(model, budget, mode)
        # plain SGD (lr 1): the weight change IS the gradient, so any normaliser error shows
        w.optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        logprobs = w.compute_logprobs(samples).logprobs
        for s, lp in zip(samples, logprobs):
            s.old_logprobs = [x - 0.05 for x in lp]  # ratio != 1 so clipping paths are exercised
        w.update(samples)
        results.append(model)
    for a, b in zip(results[0].parameters(), results[1].parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert any(not torch.equal(a, b) for a, b in zip(base.parameters(), results[0].parameters()))


def test_nan_loss_never_reaches_the_weights(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    before = copy.deepcopy(model.state_dict())
    w = worker(model, 1000)
    samples = make_samples(torch.Generator().manual_seed(1))
    for s, lp in zip(samples, w.compute_logprobs(samples).logprobs):
        s.old_logprobs = lp
    samples[5].advantage = math.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats = w.update(samples)
    assert stats.skipped and stats.skip_reason == "loss is nan" and w.num_nonfinite_skipped == 1
    # said once, by the update (its reason travels in the stats: the Ray driver says a rank's)
    assert [str(c.message) for c in caught] == ["skipped an optimizer update: loss is nan; weights left unchanged"]
    assert caught[0].filename == policy_module.__file__  # dapo-rl's own: the CLI's one line
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


def test_an_update_skipped_for_a_nan_loss_reports_no_partial_entropy(tiny_model_dir):
    """The micro-batches run shortest first and stop at the non-finite loss: the entropy and
    mismatch summed up to there covered the short responses only, and were logged as the batch's."""
    w = worker(AutoModelForCausalLM.from_pretrained(tiny_model_dir), 24)
    samples = make_samples(torch.Generator().manual_seed(1))
    for s, lp in zip(samples, w.compute_logprobs(samples).logprobs):
        s.rollout_logprobs = lp
    longest = max(samples, key=lambda s: len(s.prompt_ids) + len(s.response_ids))
    measured = w.update(samples, on_policy=True)
    assert not measured.skipped and measured.diagnostics.tokens == sum(len(s.response_ids) for s in samples)
    longest.advantage = math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats = w.update(samples, on_policy=True)
    assert stats.skipped and stats.diagnostics is None


def test_a_step_that_leaves_a_weight_non_finite_stops_the_run_before_a_checkpoint(tiny_model_dir):
    """Finite, clipped gradients, and AdamW on float16 weights (as model.dtype=float16 trained
    them, which the config now refuses): eps 1e-8 is 0 in float16 and a small gradient's second
    moment underflows to 0, so the step writes NaN/inf into the weights, which the gradient-norm
    guard cannot see. The update raises, naming the parameters, and counts no policy version
    (nothing may checkpoint them); the same update in float32 passes the check."""
    samples = make_samples(torch.Generator().manual_seed(1))
    for dtype in (torch.float32, torch.float16):
        w = worker(AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=dtype), 1000)
        for s, lp in zip(samples, w.compute_logprobs(samples).logprobs):
            s.old_logprobs = lp
        if dtype == torch.float32:
            w.update(samples)
            assert w.version == 1
            continue
        with pytest.raises(FloatingPointError, match=r"non-finite: model\..*\(on this rank\)"):
            w.update(samples)
        assert w.version == 0


def test_a_mini_batch_with_no_token_in_the_loss_makes_no_update(tiny_model_dir):
    """Every response masked (overlong filtering): the gradient is zero, and an AdamW step would
    still move the weights by its momentum and count a step in its bias correction."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    w = worker(model, 1000)
    samples = make_samples(torch.Generator().manual_seed(2))
    for s, lp in zip(samples, w.compute_logprobs(samples).logprobs):
        s.old_logprobs = lp
    assert not w.update(samples).empty and w.version == 1  # AdamW now has momentum
    weights, adam = copy.deepcopy(model.state_dict()), copy.deepcopy(w.optimizer.state_dict())
    for s in samples:
        s.loss_weight = 0.0
    stats = w.update(samples)
    assert stats.empty and not stats.skipped and w.version == 1
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, weights[name]), name
    assert [state["step"] for state in w.optimizer.state_dict()["state"].values()] == [
        state["step"] for state in adam["state"].values()]


def test_float16_autocast_scales_the_loss_so_small_gradients_do_not_flush_to_zero(tiny_model_dir):
    """The token-mean divides by the mini-batch's token count: at DAPO's scale (32 prompts x 16
    responses x ~5k tokens) float16 gradients flush to zero without loss scaling."""
    samples = make_samples(torch.Generator().manual_seed(3))
    num_tokens = 2.5e6

    def gradient(autocast: str) -> torch.Tensor:
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=1000,
                                autocast=autocast, grad_clip=1e9)
        w = PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0, total_steps=10,
                         norm_const=16.0)
        w.accumulate_gradients(samples, num_tokens, 12.0, on_policy=True)
        w.clip_gradients()  # divides by the loss scale
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    reference, half = gradient("none"), gradient("fp16")
    assert float((half - reference).norm() / reference.norm()) < 0.05
    assert float(((half == 0) & (reference != 0)).float().mean()) < 0.01


def test_a_float16_overflow_halves_the_loss_scale_and_skips_the_update(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=1000, autocast="fp16")
    w = PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0, total_steps=10,
                     norm_const=16.0)
    assert w.loss_scale == 2.0**16
    w.optimizer.param_groups[0]["loss_scale"] = 2.0**120  # float16 gradients overflow to inf
    weights = copy.deepcopy(model.state_dict())
    samples = make_samples(torch.Generator().manual_seed(4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats = w.update(samples, on_policy=True)
    assert stats.skipped and stats.skip_reason.startswith("gradient norm is ")
    said = [str(c.message) for c in caught if "skipped an optimizer update" in str(c.message)]
    assert len(said) == 1 and "(a float16 overflow: loss scale halved to 6.64614e+35); weights left unchanged" in said[0]
    assert all(torch.equal(t, weights[n]) for n, t in model.state_dict().items())
    assert w.optimizer.state_dict()["param_groups"][0]["loss_scale"] == 2.0**119  # saved with the checkpoint


def test_on_policy_update_equals_update_with_recomputed_old_logprobs(tiny_model_dir):
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).double()
    samples = make_samples(torch.Generator().manual_seed(2))
    models = [copy.deepcopy(base), copy.deepcopy(base)]
    explicit, shortcut = worker(models[0], 40), worker(models[1], 40)
    for w, model in zip((explicit, shortcut), models):
        w.optimizer = torch.optim.SGD(model.parameters(), lr=1.0)  # weight change == gradient
    fresh = copy.deepcopy(samples)  # sampled this step: no pi_old of their own
    for s, lp in zip(samples, explicit.compute_logprobs(samples).logprobs):
        s.old_logprobs = lp
    explicit_stats = explicit.update(samples)
    shortcut_stats = shortcut.update(fresh, on_policy=True)
    # stored old log-probs are float32, so the explicit ratio is 1 only to ~1e-7
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-8)
    tokens = float(explicit_stats.policy.token_count)
    assert shortcut_stats.diagnostics is not None and shortcut_stats.diagnostics.tokens == tokens
    assert shortcut_stats.policy.clip_low_count == shortcut_stats.policy.clip_high_count == 0  # ratio exactly 1
    assert float(shortcut_stats.policy.ratio_sum) == tokens


@pytest.mark.parametrize("schedule", ["constant", "cosine"])
def test_lr_schedule_counts_training_steps_not_optimizer_updates(tiny_model_dir, schedule):
    # verl's warm-up: 10 warm-up "steps" of the paper config are 10 rollout steps of 16 updates
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    trainer = TrainerConfig(prompts_per_step=4, mini_batch_prompts=1, lr=1e-3, warmup_steps=2,
                            lr_schedule=schedule, min_lr_ratio=0.0)
    w = PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=1.0, total_steps=4, norm_const=1.0)
    samples = make_samples(torch.Generator().manual_seed(3))
    for s, lp in zip(samples, w.compute_logprobs(samples).logprobs):
        s.old_logprobs = lp
    seen = []
    for _step in range(4):
        step_lrs = []
        for _update in range(4):  # 4 optimizer updates per training step
            w.update(samples[:4])
            step_lrs.append(w.lr)
        seen.append(step_lrs)
        w.end_step()
    assert all(len(set(lrs)) == 1 for lrs in seen)  # the lr moves between steps only
    per_step = [lrs[0] for lrs in seen]
    # warm-up (s + 1) / (warmup + 1) for s < 2, then constant, or cosine to 0 over steps 2..4
    expected = [1e-3 / 3, 2e-3 / 3, 1e-3, 1e-3 if schedule == "constant" else 0.5e-3]
    assert per_step == pytest.approx(expected, rel=1e-12)


def test_kl_penalty_to_the_reference_enters_the_loss_by_its_hand_value(tiny_model_dir):
    """kl_coef > 0: the loss minimised is pg_loss + kl_coef x token-mean k3(policy || reference),
    with the reference a frozen copy that the update leaves alone."""
    from dapo.algo.kl import kl_penalty

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).double()
    reference = copy.deepcopy(model)
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.05 * torch.randn_like(p))  # a reference the policy differs from
    frozen = copy.deepcopy(reference.state_dict())
    w = worker(model, 1000)
    w.ref_model, w.algo.kl_coef, w.algo.kl_estimator = reference, 0.1, "k3"
    samples = make_samples(torch.Generator().manual_seed(4))
    policy_lp = w.compute_logprobs(samples).logprobs
    ref_lp = PolicyWorker(reference, AlgorithmConfig(), w.cfg, 0, 1.0, 10, 16.0).compute_logprobs(samples).logprobs
    for s, lp in zip(samples, policy_lp):
        s.old_logprobs = lp
    kl = [kl_penalty(torch.tensor(p, dtype=torch.float64), torch.tensor(r, dtype=torch.float64), "k3")
          for p, r in zip(policy_lp, ref_lp)]
    expected_kl = float(torch.cat(kl).sum()) / sum(len(s.response_ids) for s in samples)
    stats = w.update(samples)
    assert stats.loss == pytest.approx(stats.pg_loss + 0.1 * expected_kl, rel=1e-6)
    assert expected_kl > 1e-4  # the term is really there
    # and actor/kl_ref logs it, before kl_coef (absent without the penalty)
    assert update_metrics([stats], samples, lr=0.0)["actor/kl_ref"] == pytest.approx(expected_kl, rel=1e-6)
    stats.ref_kl_sum = None
    assert "actor/kl_ref" not in update_metrics([stats], samples, lr=0.0)
    assert all(torch.equal(t, frozen[name]) for name, t in reference.state_dict().items())


@pytest.mark.parametrize("family", ["gpt2", "opt", "falcon", "persimmon"])
def test_the_policys_dropout_is_off_so_the_first_ratio_is_exactly_one(tmp_path, family):
    from transformers import (
        FalconConfig,
        FalconForCausalLM,
        GPT2Config,
        GPT2LMHeadModel,
        OPTConfig,
        OPTForCausalLM,
        PersimmonConfig,
        PersimmonForCausalLM,
    )

    from dapo.builtin import build_tokenizer
    from dapo.config import ModelConfig
    from dapo.trainer.setup import load_model_and_tokenizer

    tokenizer = build_tokenizer()
    if family == "gpt2":  # nn.Dropout modules
        GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                   resid_pdrop=0.5, embd_pdrop=0.5, attn_pdrop=0.5)).save_pretrained(tmp_path)
    elif family == "opt":  # functional dropout at float rates held by the modules
        OPTForCausalLM(OPTConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, ffn_dim=64,
                                 num_attention_heads=2, max_position_embeddings=64, word_embed_proj_dim=32,
                                 dropout=0.5, attention_dropout=0.5, pad_token_id=0)).save_pretrained(tmp_path)
    elif family == "falcon":  # rates read from the config in forward
        FalconForCausalLM(FalconConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, hidden_dropout=0.5,
                                       attention_dropout=0.5)).save_pretrained(tmp_path)
    else:
        PersimmonForCausalLM(PersimmonConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                             intermediate_size=64, num_attention_heads=2, max_position_embeddings=64,
                                             attention_dropout=0.5)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model, _, _ = load_model_and_tokenizer(ModelConfig(path=str(tmp_path)), torch.device("cpu"))
    w = worker(model, 1000)
    samples = make_samples(torch.Generator().manual_seed(5))
    for s, lp in zip(samples, w.compute_logprobs(samples).logprobs):  # eval mode
        s.old_logprobs = lp
    stats = w.update(samples)  # train mode, same weights
    metrics = stats.policy.to_metrics()
    assert metrics["approx_kl"] < 1e-9 and abs(metrics["ratio_mean"] - 1.0) < 1e-6
    assert metrics["clip_frac_low"] == metrics["clip_frac_high"] == 0.0
    # a checkpoint saved from it has the model's own rates
    from dapo.trainer.hf_export import save_hf_model

    save_hf_model(tmp_path / "saved", model, tokenizer)
    saved = json.loads((tmp_path / "saved" / "config.json").read_text())
    rate = {"gpt2": "resid_pdrop", "opt": "dropout", "falcon": "hidden_dropout", "persimmon": "attention_dropout"}
    assert saved[rate[family]] == 0.5


def test_an_on_policy_update_takes_a_carried_over_samples_pi_old_from_the_sample(tiny_model_dir):
    """With one update per step, pi_old is the update's own forward (ratio 1), except for dynamic
    sampling's surplus from the step before: it was sampled a policy ago and holds that policy's
    log-probs, so its ratio is pi_theta / pi_(step before), here exp(0.5) per token."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).double()
    w = worker(model, 1000)
    samples = make_samples(torch.Generator().manual_seed(3))
    current = w.compute_logprobs(samples).logprobs
    for s, lp in zip(samples[:4], current[:4]):  # group 0: carried over; the policy has moved since
        s.carried_over, s.old_logprobs = True, [x - 0.5 for x in lp]
    stats = w.update(samples, on_policy=True)
    carried_tokens = sum(len(s.response_ids) for s in samples[:4])
    ratio_sum, tokens = float(stats.policy.ratio_sum), float(stats.policy.token_count)
    assert tokens == sum(len(s.response_ids) for s in samples)
    # (pi_old is stored in float32)
    assert ratio_sum == pytest.approx(carried_tokens * math.exp(0.5) + (tokens - carried_tokens), rel=1e-6)
    # group 0's advantages are -1.5..1.5: its positive-advantage tokens are clipped at 1 + 0.28
    assert float(stats.policy.clip_high_count) == sum(len(s.response_ids) for s in samples[:4] if s.advantage > 0)


def test_an_update_without_pi_old_or_with_a_normaliser_below_its_share_is_refused(tiny_model_dir):
    """Zeros stood in for a missing log pi_old (ratios of e^-4: every token clipped), and a global
    token count below the rank's own share scaled its gradient up; both trained silently."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).double()
    before = [p.detach().clone() for p in model.parameters()]
    w = worker(model, 1000)
    samples = make_samples(torch.Generator().manual_seed(5))
    with pytest.raises(ValueError, match="needs every sample's old_logprobs"):
        w.update(samples)
    for s, lp in zip(samples, w.compute_logprobs(samples).logprobs):
        s.old_logprobs = lp
    with pytest.raises(ValueError, match="below this rank's share"):
        w.update(samples, num_tokens=1.0, num_seqs=1.0)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())) and w.version == 0


def test_a_ranks_empty_micro_batch_loss_is_zero_even_where_the_pad_logits_overflow(tiny_model_dir):
    """A rank out of samples forwards one pad token (joining FSDP's collectives) with loss 0 x
    logits; a float16 logit that overflowed made it 0 * inf = NaN, which skips every rank's step."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    w = worker(model, 1000)
    real = w._response_logits

    def overflowed(model, tensors):
        logits = real(model, tensors)
        return logits + torch.where(torch.arange(logits.shape[-1]) == 3, math.inf, 0.0)

    w._response_logits = overflowed
    loss = w._empty_loss()
    assert loss.item() == 0.0
    loss.backward()
    assert all(p.grad is None or torch.equal(p.grad, torch.zeros_like(p.grad)) for p in model.parameters())
    assert any(p.grad is not None for p in model.parameters())  # it reached the weights, as FSDP needs


def test_a_rank_skipping_for_another_ranks_non_finite_loss_does_not_blame_its_own(tiny_model_dir, monkeypatch):
    """(its warning read 'loss is -0.0607 (on this or another rank)', naming a finite loss)"""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    before = copy.deepcopy(model.state_dict())
    w = worker(model, 1000)
    samples = make_samples(torch.Generator().manual_seed(1))
    monkeypatch.setattr(policy_module, "all_ranks_true", lambda flag: False)  # as if another rank got a NaN
    with pytest.warns(UserWarning, match="skipped an optimizer update: another rank's loss is not finite"):
        assert w.update(samples, on_policy=True).skipped
    assert all(torch.equal(t, before[name]) for name, t in model.state_dict().items())


def test_a_k2_penalty_on_a_model_that_masks_its_pad_token_updates(tiny_model_dir):
    """Such a model gives the pad token -inf log-probs at padded response positions: k2's square
    sent NaN back through them, and every update was skipped for its NaN gradient norm."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).double()
    reference = copy.deepcopy(model)

    def mask_the_pad_token(_module, _inputs, logits):
        return logits.index_fill(-1, torch.tensor([0]), float("-inf"))  # pad_token_id 0, as worker()'s

    for m in (model, reference):
        m.get_output_embeddings().register_forward_hook(mask_the_pad_token)
    w = worker(model, 1000)  # one padded micro-batch: responses of 1 to 12 tokens
    w.ref_model, w.algo.kl_coef, w.algo.kl_estimator = reference, 0.1, "k2"
    samples = make_samples(torch.Generator().manual_seed(4))
    for s, lp in zip(samples, w.compute_logprobs(samples).logprobs):
        s.old_logprobs = lp
    stats = w.update(samples)
    assert not stats.skipped and math.isfinite(stats.grad_norm) and stats.grad_norm > 0
