"""The single documented list of every metric a run logs.

``METRICS`` is the one place a metric's meaning is written down: the table in ``docs/metrics.md``
is its output (``python -m dapo.trainer.metric_docs`` prints it; a test checks the two agree), and
a test checks that every key a run logs is in it (:func:`documented_name`).
"""

from __future__ import annotations

import re

METRICS: dict[str, str] = {
    # rollout: what the policy sampled in this step's generation rounds (all groups, pre-filter)
    "rollout/score_mean": "mean verifier/user reward over all generated responses, before overlong shaping",
    "rollout/reward_mean": "mean reward after soft overlong punishment (what advantages use), over trained responses, overlong-filtered "
    "ones included (another population than score_mean's: their difference is not overlong_penalty_mean)",
    "rollout/acc": "fraction of generated responses judged correct",
    "rollout/response_length_mean": "mean response length in tokens over generated responses",
    "rollout/response_length_max": "longest generated response in tokens",
    "rollout/response_tokens": "response tokens generated this step, every round's groups (filtered ones too)",
    "rollout/truncation_rate": "fraction of generated responses cut at rollout.max_response_length",
    "rollout/overlong_penalty_mean": "mean soft overlong penalty over trained responses, overlong-filtered ones included (<= 0)",
    "rollout/reward_timeouts": "responses whose scoring hit the reward deadline, or that a function taken for hung "
    "did not score (reward.skip_hung: failed unrun, as they would have; the function that timed out adds its "
    "failure score, the lower of weight x incorrect and weight x correct score; the response is incorrect when acc comes "
    "from that function: a user function's timeout leaves a verifier-correct answer correct)",
    "rollout/reward_errors": "responses whose reward function raised, returned a wrong type or died (its worker "
                             "process killed, or os._exit; or, taken for dying on a run of them, did not score "
                             "them: reward.skip_hung), or that no reward source applies to (every function "
                             "returned None, reward.verifier_weight=0)",
    "reward/<function>/score": "mean score a user reward function returned this step (over the responses it scored)",
    "reward/<function>/not_applicable": "fraction of this step's responses a user reward function returned None on "
                                        "(it does not apply to them, as TRL's convention: adds nothing, no failure)",
    "reward/<function>/<key>": "mean of each other number a user reward function returned in its dict",
    "reward_failures/<function>": "responses a user reward function (or math-verify, in its worker) timed out, raised, "
                                  "returned a bad value or died on this step; reward/<function>/score leaves them out; "
                                  "no-applicable-reward: responses no reward source applies to (every function returned "
                                  "None, reward.verifier_weight=0), scored as failures",
    # dynamic sampling
    "sampling/gen_rounds": "generation rounds used to fill this step's batch (<= algorithm.max_gen_rounds)",
    "sampling/groups_generated": "groups (prompts x G responses) generated in this step",
    "sampling/groups_trained": "groups in the training batch (prompts_per_step unless the round limit was hit)",
    "sampling/filtered_ratio": "fraction of the groups generated this step (carried-in ones not counted, as in every "
    "sampling/*_ratio) without signal: a constant filter metric (DAPO's: acc; soft overlong punishment may still "
    "set their rewards apart by length), or every response masked by overlong filtering (dropped under dynamic "
    "sampling, trained on without it); with rollout.n=1 (no dynamic sampling) every group is constant: 1.0, although "
    "grpo and dr_grpo give a lone response its reward as advantage",
    "sampling/all_correct_ratio": "fraction of generated groups with a constant filter metric and every response "
    "correct (acc; dropped under dynamic sampling)",
    "sampling/all_wrong_ratio": "fraction of generated groups with a constant filter metric and no response correct "
    "(acc; dropped under dynamic sampling)",
    "sampling/all_masked_ratio": "fraction of generated groups whose filter metric varies but whose every response "
    "overlong filtering masked out of the loss (all truncated: no token to train on; dropped under dynamic sampling)",
    "sampling/groups_carried_in": "surplus accepted groups from the previous step used in this one",
    "sampling/groups_carried_out": "surplus accepted groups kept for the next step, which uses them all "
    "(at most algorithm.max_surplus_fraction of its groups)",
    "sampling/groups_discarded": "accepted groups dropped: surplus when keeping is off or beyond "
    "algorithm.max_surplus_fraction of the next step (counted in the step that made it), or restored from a "
    "checkpoint and older than one step or made under other sampling, reward, shaping, template or tokenizer "
    "settings, other data or other answers to its prompts, than the resumed run's (said when it resumes)",
    "sampling/hit_round_limit": "1 when the round limit stopped generation before the batch was full",
    # policy update (token-weighted over the step's optimizer mini-batches)
    "actor/loss": "the loss minimised: actor/pg_loss - entropy_coef x entropy + kl_coef x KL to the reference, "
    "the extra terms aggregated as the policy-gradient loss (mean over the step's mini-batches)",
    "actor/pg_loss": "policy-gradient loss, the decoupled-clip term alone (mean over the step's mini-batches)",
    "actor/entropy": "mean per-token entropy of the policy before this step's update over the loss's tokens "
    "(overlong-filtered responses left out) of the trained responses (at rollout temperature), from the "
    "step's first pass over them: with algorithm.old_logprobs=recompute and several updates per step, those "
    "sampled this step (carried-over ones hold their own step's pi_old); with one update per step, all of them "
    "(the update's own forward, carried-over ones included); with rollout, the first mini-batch's (carried-over "
    "groups come last in the batch), or the first mini-batches' up to one with loss tokens that stepped); an update "
    "skipped for a non-finite loss measures none (it stopped partway), the next mini-batch's does; one skipped for "
    "a non-finite gradient measures its mini-batch and the next one's too (both still on pi_old); absent when none "
    "measured",
    "actor/clip_frac_low": "fraction of loss tokens clipped at 1 - clip_ratio_low (A < 0)",
    "actor/clip_frac_high": "fraction of loss tokens clipped at 1 + clip_ratio_high (A > 0)",
    "actor/clip_frac_dual": "fraction of loss tokens bounded by dual-clip c (A < 0, ratio > c)",
    "actor/approx_kl": "k3 estimate of KL(pi_old || pi_theta) per loss token, from each mini-batch's forward before "
    "its optimizer step (0 where pi_old is that forward's own: the first mini-batch with one update per step or "
    "old_logprobs=recompute; the KL to the engine that sampled is mismatch/rollout_trainer_kl)",
    "actor/kl_ref": "mean per loss token of the KL penalty's estimate (algorithm.kl_estimator) of the policy's KL "
    "to the reference model, before kl_coef (logged when algorithm.kl_coef > 0; verl's actor/kl_loss under token-mean with one mini-batch and one epoch a step (verl adds up the values of its mini-batches and epochs); k3's per-token "
    "estimate is clamped to [-10, 10] as verl's is, so a token far from the reference counts 10: it is what the penalty uses)",
    "actor/ratio_mean": "mean importance ratio pi_theta / pi_old per loss token during the update",
    "actor/plugin/<name>": "a plugin policy loss's own metric: the per-loss-token mean of what it returned as "
                           "`PolicyLossStats.extra_sums[name]`, a sum over the unmasked tokens, added up over the "
                           "step's micro-batches, updates and ranks as the clip counts are (docs/extending.md)",
    "actor/grad_norm": "gradient norm before clipping (mean over the step's optimizer updates)",
    "actor/lr": "learning rate of the step's updates (the schedule moves once per training step; logged on a step "
                "that made none too: the rate it would have used)",
    "actor/updates": "optimizer updates made in this step",
    "actor/skipped_updates": "updates dropped because the loss or gradient was not finite (in float16, also "
                             "dynamic loss scaling's overflows, which halve the scale); actor/loss, pg_loss, the "
                             "clip fractions, approx_kl, kl_ref, ratio_mean and grad_norm are of the updates made, "
                             "a skipped one's tokens counted in none of them",
    "actor/skipped_nonfinite_loss": "of actor/skipped_updates, those whose loss itself was not finite (a forward's "
                                    "NaN or inf, which float16's loss scaling neither causes nor mends)",
    "actor/empty_updates": "updates not made because no token of the mini-batch was in the loss (every response "
                           "masked by overlong filtering)",
    "actor/response_tokens": "response tokens in the step's trained batch (carried-over and overlong-filtered "
    "responses included; generated tokens dynamic sampling dropped are not)",
    "actor/advantage_abs_mean": "mean |advantage| per response (not per token) over the step's batch (overlong-filtered responses, which carry no loss, included)",
    "mismatch/rollout_trainer_logprob_diff": "mean |log pi_rollout - log pi_old_trainer| per token (engine/trainer mismatch; "
    "over every token of the responses sampled this step and trained in it, overlong-filtered ones included, not "
    "carried-over ones, whose gap includes a step of training, nor this step's surplus kept for the next; "
    "with algorithm.old_logprobs=rollout, measured on the first mini-batch, or the first mini-batches' up to one "
    "with loss tokens, as actor/entropy (not on an update skipped for a non-finite loss); absent when they hold no "
    "response sampled this step); with rollout.top_p<1 or rollout.top_k>0 the engine's log-probs are of the "
    "truncated, renormalised distribution it samples and the trainer's of the full one, so the truncation's gap "
    "dominates it, not numerics",
    "mismatch/rollout_trainer_kl": "k3 estimate of KL(pi_rollout || pi_old_trainer) per token, over the same tokens "
    "(with the same truncation gap under rollout.top_p<1 or top_k>0)",
    # timing and throughput
    "time/generate": "seconds generating responses this step (with the native engine, its preparing the new "
    "weights for decoding once per update too: their copy in `rollout.native_dtype`)",
    "time/reward": "seconds scoring responses this step",
    "time/old_logprob": "seconds recomputing old log-probs: the batch's (none with one update per step) and the "
    "surplus carried to the next step's (0 with algorithm.old_logprobs=rollout)",
    "time/update": "seconds in forward/backward/optimizer",
    "time/weight_sync": "seconds loading the trainer's new weights into the rollout engine (0 for engines that "
    "share the trainer's model, the native one preparing them in `time/generate`; an in-memory reload for vLLM), or, after a step without an update, waking a vLLM "
    "that slept through it (outside `time/generate`)",
    "time/step": "seconds for the whole step (without evaluation and checkpointing)",
    "perf/gen_tokens_per_s": "generated response tokens per second of generation time",
    "perf/tokens_per_s": "prompt + response tokens of trained samples per second of step time (counted on a step "
                        "whose updates were all skipped, loss not finite, too)",
    # evaluation
    "eval/avg@k": "mean accuracy over k samples per held-out problem (DAPO reports avg@32); a sample whose "
    "correctness scorer failed (math-verify; with reward.verifier_weight=0, the first reward function that scored "
    "or failed on it) counts as wrong, and is counted in eval/reward_failures/<function> and said in a warning; absent, with pass@k and "
    "maj@k, when that scorer failed on every sample: they would read 0 without measuring anything (`dapo eval` "
    "then stops with an error, a training run warns and goes on)",
    "eval/pass@k": "fraction of held-out problems with at least one correct sample among k (absent as avg@k is)",
    "eval/maj@k": "fraction of held-out problems whose majority-vote answer is correct (answers judged correct "
    "are one answer, extracted or not, others the same when they state the same integer or the same text up to LaTeX cosmetics, "
    "1/3 = \\dfrac{1}{3}, but 0.5 and \\frac{1}{2} apart, a sample whose scoring failed votes with a correct "
    "sample of the same answer, a sample scored and judged wrong votes apart even with a correct sample's answer "
    "(a hedged 34 or 35, 34 hours for 34 minutes), and a sample without an answer casts no vote; under "
    "reward.verifier=math_dapo the same string only, as it judges, and a sample without an Answer: line votes for "
    "[INVALID], as the reference's maj@k counts it (one whose line's answer normalises to \"\" votes for \"\", apart); "
    "with reward.verifier_weight=0 the answers are the \"pred\" strings of the reward function correctness comes "
    "from, the same string only, as verl's maj@k counts them (a sample without one votes for [INVALID]); "
    "ties: first seen; absent when no answers are extracted (reward.verifier_weight=0 and that function returns "
    "no \"pred\"), and as avg@k is)",
    "eval/score_mean": "mean reward (verifier and user functions, before overlong shaping) over the held-out "
    "samples, as rollout/score_mean: what a graded reward reads, which avg@k's verdicts do not (absent as avg@k is)",
    "eval/reward/<function>/<key>": "means of the scores and numbers a user reward function returned on the "
    "held-out samples (as reward/<function>/<key> in training)",
    "eval/response_length_mean": "mean response length on the held-out set",
    "eval/truncation_rate": "fraction of held-out responses cut at the length limit",
    "eval/num_problems": "held-out problems evaluated (eval.max_problems keeps the first ones in file order, "
                         "whatever their data_source; a prompt in two data sources counts once in each)",
    "eval/reward_timeouts": "held-out samples whose scoring hit the reward deadline (as rollout/reward_timeouts)",
    "eval/reward_errors": "held-out samples whose reward function (or math-verify) raised, returned a wrong type or "
                          "died, or that no reward source applies to (every function returned None, "
                          "reward.verifier_weight=0)",
    "eval/reward_failures/<function>": "held-out samples a reward function (or math-verify) timed out, raised, "
    "returned a bad value or died on (logged for the functions that failed on some); no-applicable-reward: samples "
    "no reward source applies to (every function returned None, reward.verifier_weight=0)",
    "eval/<data_source>/<metric>": "avg@k, pass@k, maj@k, score_mean and num_problems on the held-out problems of one "
    "data_source (logged when the held-out set has several; its @k absent when the correctness scorer failed on "
    "every sample of that data_source)",
    # data (logged once, at step 0 of a fresh run; split is train or eval)
    "data/<split>_problems": "unique problems loaded",
    "data/<split>_rows": "rows read from the data files (malformed ones included)",
    "data/<split>_duplicates_dropped": "repeated prompts dropped: training copies (data.dedup_train); held-out copies "
    "of a problem, each evaluated once (as the terminal's data summary says)",
    "data/<split>_malformed_skipped": "malformed rows skipped (data.lenient)",
    "data/<split>_conflicting_duplicates": "copies of a prompt labelled with another answer than its first copy, "
    "which alone is evaluated, and trained on with data.dedup_train (without it, every copy is)",
    "data/<split>_overlong_dropped": "problems left out: prompt longer than data.max_prompt_length (data.overlong_prompts)",
}


def documented_name(key: str) -> str:
    """The METRICS entry of a logged key: ``eval/avg@32`` -> ``eval/avg@k``, ``reward/fmt/len`` ->
    ``reward/<function>/<key>``, ``data/train_rows`` -> ``data/<split>_rows``, ``eval/aime/avg@32`` ->
    ``eval/<data_source>/<metric>``, ``eval/reward_failures/judge`` ->
    ``eval/reward_failures/<function>``."""
    key = re.sub(r"@\d+$", "@k", key)
    if key.startswith("reward_failures/"):
        return "reward_failures/<function>"
    if key.startswith("eval/reward_failures/"):
        return "eval/reward_failures/<function>"
    if key.startswith("eval/reward/"):
        return "eval/reward/<function>/<key>"
    if key.startswith("reward/"):
        for leaf in ("score", "not_applicable"):
            if key.endswith(f"/{leaf}"):
                return f"reward/<function>/{leaf}"
        return "reward/<function>/<key>"
    if key.startswith("data/"):
        return re.sub(r"^data/(train|eval)_", "data/<split>_", key)
    parts = key.split("/")
    if parts[0] == "eval" and len(parts) > 2:
        return "eval/<data_source>/<metric>"
    return key


def metrics_markdown() -> str:
    rows = "\n".join(f"| `{k}` | {v} |" for k, v in METRICS.items())
    return f"| metric | meaning |\n|---|---|\n{rows}\n"


if __name__ == "__main__":
    print(metrics_markdown(), end="")
