"""dapo-rl: DAPO (Decoupled Clip and Dynamic sAmpling Policy Optimization) for Hugging Face LMs.

Layers, bottom to top (nothing imports upward):
- ``dapo.algo``: pure-torch DAPO math (advantages, clipped loss, aggregation, filters, shaping).
- ``dapo.config``: typed config dataclasses.
- ``dapo.data``, ``dapo.rewards``, ``dapo.rollout``: problems and prompts, verifiers, generation.
- ``dapo.builtin``: the built-in arithmetic task and its locally built tiny base model.
- ``dapo.trainer``: the DAPO training loop, evaluation, checkpoints, metrics.
- ``dapo.cli``: the ``dapo`` command.
"""

__version__ = "0.1.0"
