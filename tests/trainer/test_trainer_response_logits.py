"""The policy worker's log-prob passes (dapo.trainer.response_logits): each response's log-probs,
exactly the columns of the pass, in every layout; the entropy and rollout/trainer mismatch sums
they read off (only responses sampled this step count for the mismatch; padding never enters);
and the entropy bonus, which the loss adds and actor/pg_loss leaves out."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from dapo.config import AlgorithmConfig, TrainerConfig
from dapo.trainer.policy import PolicyWorker
from tests.trainer.test_trainer_policy import make_samples, worker


def test_mismatch_counts_only_responses_sampled_this_step_and_pg_loss_excludes_the_entropy_bonus(tiny_model_dir):
    """A carried-over response's rollout log-probs are an older policy's: its gap to the trainer is
    a step of training, not engine/trainer mismatch. And actor/pg_loss is the clipped term alone,
    while the loss minimised adds -entropy_coef x entropy."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).double()
    w = worker(model, 1000)
    samples = make_samples(torch.Generator().manual_seed(3))
    for s, lp in zip(samples, w.compute_logprobs(samples).logprobs):
        s.rollout_logprobs = s.old_logprobs = lp  # this step's: an engine that agrees exactly
    for s in samples[:4]:  # group 0 was carried over: the policy has moved by 0.5 nats a token since
        s.carried_over, s.rollout_logprobs = True, [x - 0.5 for x in s.rollout_logprobs]
    samples[5].loss_weight = 0.0  # overlong-filtered: out of the loss, so out of actor/entropy too
    passed = w.compute_logprobs(samples)
    assert passed.tokens == sum(len(s.response_ids) for s in samples if s.loss_weight)
    assert passed.mismatch_tokens == sum(len(s.response_ids) for s in samples[4:])  # sampled, filtered or not
    assert passed.mismatch_abs_sum < 1e-5 * passed.mismatch_tokens  # float32 storage only

    w.algo.entropy_coef = 0.05
    stats = w.update(samples, diagnose=True)
    entropy = stats.diagnostics.entropy_sum / stats.diagnostics.tokens  # token-mean, as the loss
    assert stats.loss == pytest.approx(stats.pg_loss - 0.05 * entropy, rel=1e-9)
    w.algo.entropy_coef = -0.05  # an entropy penalty, as verl applies one (it was ignored: coef > 0 only)
    stats = w.update(samples, diagnose=True)
    entropy = stats.diagnostics.entropy_sum / stats.diagnostics.tokens
    assert stats.loss == pytest.approx(stats.pg_loss + 0.05 * entropy, rel=1e-9)


def test_the_entropy_and_mismatch_sums_ignore_whatever_padding_holds():
    """A model that masks its pad token gives it a -inf log-prob at padding positions: masking by
    a product (-inf * 0) made the step's entropy and rollout/trainer mismatch NaN."""
    from dapo.algo import entropy_from_logits
    from dapo.trainer.response_logits import add_diagnostics
    from dapo.trainer.update_stats import LogprobPass

    logits = torch.zeros(2, 3, 5)
    logits[1, 2] = float("nan")  # past row 1's length
    logprobs = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, float("-inf"), float("-inf")]])
    tensors = {"response_lengths": torch.tensor([3, 1]), "response_mask": torch.tensor([[1.0, 1, 1], [1, 0, 0]]),
               "sampled_this_step": torch.tensor([True, True]),
               "rollout_logprobs": torch.tensor([[-1.0, -2.0, -1.0], [-1.5, 0.0, 0.0]])}
    sums = LogprobPass()
    add_diagnostics(logprobs, entropy_from_logits(logits), tensors, sums)
    log5 = torch.log(torch.tensor(5.0)).item()  # uniform logits: entropy log 5 at each of the 4 tokens
    assert sums.tokens == 4 and sums.entropy_sum == pytest.approx(4 * log5)
    assert sums.mismatch_tokens == 4 and sums.mismatch_abs_sum == pytest.approx(0.5 + 0.5)
    k3 = torch.expm1(torch.tensor(0.5)).item() - 0.5  # exp(d) - 1 - d of each token's d = 0.5
    assert sums.mismatch_kl_sum == pytest.approx(2 * k3)


@pytest.mark.parametrize("layout", ["padded", "packed", "shared_prompt"])
def test_log_probs_are_each_responses_own_columns_of_the_pass_exactly(tiny_model_dir, layout):
    """compute_logprobs now cuts the rows from one flat float32 tensor (what a Ray rank sends the
    driver): the values must be those the padded (B, R) pass gives, bit for bit, in sample order,
    as the float32 arrays a Sample holds, across micro-batches of unequal widths."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    trainer = TrainerConfig(prompts_per_step=3, mini_batch_prompts=3, micro_batch_tokens=24,
                            packing=layout == "packed", shared_prompt=layout == "shared_prompt")
    w = PolicyWorker(model, AlgorithmConfig(), trainer, pad_token_id=0, temperature=0.7, total_steps=10, norm_const=16.0)
    samples = make_samples(torch.Generator().manual_seed(3))
    got = w.compute_logprobs(samples).logprobs
    assert w.cfg.layout == layout
    expected = []
    with torch.no_grad():
        model.eval()
        for micro in w._micro_batches(samples):  # the rows as computed before: each row's first len(response)
            tensors = w._collate(micro)
            rows = w._logprobs(w._response_logits(model, tensors), tensors).float().cpu().tolist()
            expected += [row[: len(s.response_ids)] for row, s in zip(rows, micro)]
    assert [row.tolist() for row in got] == expected
    assert all(isinstance(row, np.ndarray) and row.dtype == np.float32 for row in got)
    assert [len(row) for row in got] == [len(s.response_ids) for s in samples]
    _, flat = w.flat_logprobs(samples)
    assert flat.dtype == torch.float32 and flat.tolist() == [x for row in got for x in row.tolist()]
    assert w.compute_logprobs([]).logprobs == []


def test_the_entropy_bonus_trains_through_one_pass_with_the_two_passes_gradients(tiny_model_dir, monkeypatch):
    """With algorithm.entropy_coef the log-probs and the entropy come from one pass over the logits
    (one gradient of them in backward, not three): the update is the one the two passes gave."""
    import copy

    from dapo.algo import entropy_from_logits
    from dapo.trainer import policy
    from dapo.trainer.response_logits import padded, response_logprobs

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).double()
    samples = make_samples(torch.Generator().manual_seed(4))
    updated = []
    for passes in ("one", "two", "no bonus"):
        if passes == "two":
            monkeypatch.setattr(policy, "response_logprobs_and_entropy", lambda logits, tensors, t, fused: (
                response_logprobs(logits, tensors, t, fused),
                padded(entropy_from_logits(logits, temperature=t, fused=fused), tensors)))
        model = copy.deepcopy(base)
        w = worker(model, 1000)
        w.optimizer = torch.optim.SGD(model.parameters(), lr=1.0)  # the weight change is the gradient
        w.algo.entropy_coef = 0.0 if passes == "no bonus" else 0.3
        for s, lp in zip(samples, w.compute_logprobs(samples).logprobs):
            s.old_logprobs = [x - 0.05 for x in lp]
        w.update(samples)
        updated.append(model)
    for one, two in zip(updated[0].parameters(), updated[1].parameters()):
        torch.testing.assert_close(one, two, rtol=0, atol=1e-12)
    assert any((a - b).abs().max() > 1e-6 for a, b in zip(updated[2].parameters(), updated[0].parameters()))
