"""Configuration: typed dataclasses (``schema``) and YAML + ``key=value`` loading (``loading``)."""

from dapo.config.loading import builtin_config_path, load_config, save_config
from dapo.config.schema import (
    AlgorithmConfig,
    CheckpointConfig,
    ConfigError,
    DAPOConfig,
    DataConfig,
    EvalConfig,
    LoggingConfig,
    ModelConfig,
    ResourcesConfig,
    RewardConfig,
    RewardFunctionSpec,
    RolloutConfig,
    TrainerConfig,
)

__all__ = [
    "AlgorithmConfig",
    "CheckpointConfig",
    "ConfigError",
    "DAPOConfig",
    "DataConfig",
    "EvalConfig",
    "LoggingConfig",
    "ModelConfig",
    "ResourcesConfig",
    "RewardConfig",
    "RewardFunctionSpec",
    "RolloutConfig",
    "TrainerConfig",
    "builtin_config_path",
    "load_config",
    "save_config",
]
