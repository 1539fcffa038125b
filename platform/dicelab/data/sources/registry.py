"""The registry of data sources: `(config, family) -> RawDataset`, one module per source.

`family` is the task's family of canonical columns; a source that yields one family only may ignore it
(`load_raw_dataset` rejects a mismatch)."""

from __future__ import annotations

from collections.abc import Callable

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family, RawDataset
from dicelab.registry import Registry

Source = Callable[[ExperimentConfig, Family], RawDataset]

SOURCES: Registry[Source] = Registry("data source", builtins="dicelab.data.sources")
