"""Rollout (generation) engines: sample responses with their behaviour log-probs."""

from dapo.rollout.base import Completion, GenerationResult, RolloutEngine, SamplingParams
from dapo.rollout.factory import create_engine
from dapo.rollout.hf_generate import HFGenerateEngine
from dapo.rollout.native import NativeEngine
from dapo.rollout.sampling import sample_next_tokens
from dapo.rollout.vllm_engine import VLLMEngine

__all__ = [
    "Completion",
    "GenerationResult",
    "HFGenerateEngine",
    "NativeEngine",
    "RolloutEngine",
    "SamplingParams",
    "VLLMEngine",
    "create_engine",
    "sample_next_tokens",
]
