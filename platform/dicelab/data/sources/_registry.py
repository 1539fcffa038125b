"""The registry of data sources: `(config) -> RawDataset`, one module per source."""

from __future__ import annotations

from collections.abc import Callable

from dicelab.config import ExperimentConfig
from dicelab.data.base import RawDataset
from dicelab.registry import Registry

Source = Callable[[ExperimentConfig], RawDataset]

SOURCES: Registry[Source] = Registry("data source")
