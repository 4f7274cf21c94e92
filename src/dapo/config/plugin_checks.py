"""Whether a registered plugin (an advantage estimator, policy loss or loss aggregation mode) can
be called as the trainer calls it, checked when the config is built, before anything loads: its
parameters bind the call, in its order (a function ported from verl keeps verl's names and order),
and a policy loss takes the TIS weights algorithm.tis_cap gives it.
"""

from __future__ import annotations

import inspect

from dapo.config.checks import ConfigError, check

# How the trainer calls each registry's entries (docs/extending.md's signatures), positional
# argument names and keyword argument names, is check_callable's positional and keywords:
# ADVANTAGE_CALL, POLICY_LOSS_CALL and LOSS_AGG_CALL of dapo.algo's advantages, policy_loss and
# aggregation, each read off the one function that calls that registry's entries (imported in
# AlgorithmConfig.__post_init__, with the registries: torch).


def _signature(fn: object) -> inspect.Signature | None:
    """``fn``'s signature, or None for a callable without a Python one (a builtin, a C extension's)."""
    try:
        return inspect.signature(fn)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def check_callable(what: str, fn: object, positional: tuple[str, ...], keywords: tuple[str, ...],
                   optional: tuple[str, ...] = ()) -> None:
    """Refuse, before anything loads, a registered entry the trainer cannot call as it will
    (a plugin's function missing a parameter or its ``**kwargs``), naming it and its file. Of
    ``optional``, the trainer passes those the function names (an estimator's ``response_lengths``)."""
    from dapo.algo.registry import defined_at

    if (signature := _signature(fn)) is None:  # its call will tell
        return
    keywords = (*keywords, *(name for name in optional if name in signature.parameters))
    call = ", ".join([*positional, *(["*", *keywords] if keywords else [])])
    try:
        signature.bind(*positional, **dict.fromkeys(keywords))
    except TypeError as error:
        raise ConfigError(f"{what} ({defined_at(fn)}) cannot be called as the trainer calls it, fn({call}): "
                          f"{error} (docs/extending.md)") from None
    in_order = [p for p in signature.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for position, (parameter, passed) in enumerate(zip(in_order, positional)):
        name = parameter.name
        verl = _VERL_ARGUMENTS.get(name)
        if name != passed and (name in positional or verl is not None and verl[0] != passed):
            meant = f"the trainer's argument {positional.index(name) + 1}" if name in positional else verl[1]
            raise ConfigError(f"{what} ({defined_at(fn)}) takes {name!r} as its argument {position + 1}, where the "
                              f"trainer passes {passed!r}: it is called positionally, fn({call}), so {name!r} would "
                              f"hold {passed} ({name} is {meant}); name and order its parameters as that call "
                              "(docs/extending.md)")


# verl's names for what its estimators and losses take, which a function ported from verl keeps,
# each with the trainer's argument it stands for ("" for none) and what it is: a name in another
# argument's place would hold that argument (verl's estimator: token_level_rewards, response_mask,
# index, where this project passes scores, group_ids, eps)
_VERL_ARGUMENTS = {
    "token_level_rewards": ("", "verl's (B, T) rewards; here scores, (B,)"),
    "index": ("group_ids", "verl's group uids; here group_ids"),
    "epsilon": ("eps", "verl's eps"),
    "response_mask": ("response_mask", "the loss's mask of response tokens, which an estimator is not given"),
    "old_log_prob": ("old_logprobs", "verl's pi_old log-probs; here old_logprobs"),
    "log_prob": ("logprobs", "verl's log-probs; here logprobs"),
}


def check_takes_importance_weights(name: str, loss_fn: object, tis_cap: float) -> None:
    """A policy loss without an ``importance_weights`` parameter (a plugin's whose ``**kwargs``
    swallow it, as docs/extending.md's plain_pg does) would leave algorithm.tis_cap without effect."""
    from dapo.algo.registry import defined_at

    if (signature := _signature(loss_fn)) is None:  # nothing to tell
        return
    check("importance_weights" in signature.parameters,
          f"algorithm.tis_cap={tis_cap} would change nothing: algorithm.policy_loss={name!r} ({defined_at(loss_fn)}) "
          "takes no importance_weights parameter (the TIS weights it is passed); multiply its per-token loss by "
          "them, as decoupled_clip does, or set tis_cap=null")
