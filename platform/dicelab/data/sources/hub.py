"""Source `hub`: a Hugging Face hub dataset named by `data.name` (splits map to hub split names)."""

from __future__ import annotations

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family, RawDataset
from dicelab.data.hub import hub_split_frame, load_hub_dataset
from dicelab.data.sources.registry import SOURCES
from dicelab.errors import ConfigError


@SOURCES.register("hub")
def hub(config: ExperimentConfig, family: Family) -> RawDataset:
    data = config.data
    if not data.name:
        raise ConfigError("config key 'data.name': a hub dataset name is required for source 'hub'")
    loaded = load_hub_dataset(data.name)
    splits, label_names = {}, []
    for split, hub_split in data.read_splits.items():
        splits[split], split_labels = hub_split_frame(loaded, data.name, hub_split, family, data.columns)
        label_names = label_names or split_labels
    return RawDataset(
        family=family,
        splits=splits,
        label_names=label_names,
        fingerprint="",
        description=f"hub {data.name}",
    )
