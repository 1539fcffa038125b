"""Experiment configs: typed schema, YAML reading with `--set` overrides, schema checks, flattening.

Pydantic only: whether names are registered is checked by `dicelab.experiment.load_experiment`.
"""

from dicelab.config.reading import (
    apply_overrides,
    config_to_dict,
    config_to_yaml,
    flatten,
    flatten_config,
    parse_config,
    parse_override,
    read_config,
    read_yaml,
)
from dicelab.config.schema import (
    CarvedSplit,
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
    "CarvedSplit",
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
    "config_to_dict",
    "config_to_yaml",
    "flatten",
    "flatten_config",
    "parse_config",
    "parse_override",
    "read_config",
    "read_yaml",
]
