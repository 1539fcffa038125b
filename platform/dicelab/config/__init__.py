"""Experiment configs: typed schema, YAML loading with `--set` overrides, validation, flattening."""

from dicelab.config.loading import (
    apply_overrides,
    config_from_dict,
    config_to_dict,
    config_to_yaml,
    flatten,
    flatten_config,
    load_config,
    parse_override,
    read_yaml,
)
from dicelab.config.schema import (
    DataConfig,
    ExperimentConfig,
    LossConfig,
    ModelConfig,
    SyntheticConfig,
    TaskConfig,
    TrackingConfig,
    TrainConfig,
    VariantOptions,
)

__all__ = [
    "DataConfig",
    "ExperimentConfig",
    "LossConfig",
    "ModelConfig",
    "SyntheticConfig",
    "TaskConfig",
    "TrackingConfig",
    "TrainConfig",
    "VariantOptions",
    "apply_overrides",
    "config_from_dict",
    "config_to_dict",
    "config_to_yaml",
    "flatten",
    "flatten_config",
    "load_config",
    "parse_override",
    "read_yaml",
]
