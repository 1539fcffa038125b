"""The contract between a task and the trial loop.

The loop owns optimisation (AdamW, schedule, clipping, accumulation, early stopping, reporting); a task owns
everything specific to its family: features, model head, how logits meet the loss, decoding and metrics.
Tasks are stateless and built without arguments (`TASKS.get(config.task.name)()`); what a task needs from the
config comes in through `encode` and `build_model` (the model keeps its decoding settings).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import datasets
import pandas as pd
import torch
from torch import nn

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family, RawDataset


@dataclass
class EvalResult:
    metrics: dict[str, float]  # e.g. {"f1": .., "precision": .., "recall": ..} (no "dev_" prefix)
    predictions: list[dict[str, Any]] = field(default_factory=list)  # one JSON-able record per example
    # label -> precision / recall / f1 / support
    per_class: dict[str, dict[str, float]] = field(default_factory=dict)


class Task(Protocol):
    name: ClassVar[str]
    family: ClassVar[Family]

    # Every dev metric the task can log, for any label set (no "dev_" prefix): what `train.metric` and
    # `search.metric` may name, checked before anything runs (the label set decides which are logged).
    metrics: ClassVar[tuple[str, ...]]

    def primary_metric(self, label_names: list[str]) -> str:
        """The dev metric to select on when train.metric is "auto" (f1, accuracy, ...)."""
        ...

    def texts(self, frame: pd.DataFrame) -> Iterable[str]:
        """The raw texts of a split (sentences, questions, contexts): tiny-bert's WordPiece trains on them."""
        ...

    def encode(
        self, frame: pd.DataFrame, tokenizer: Any, config: ExperimentConfig, label_names: list[str]
    ) -> datasets.Dataset:
        """Tokenized features of one split (pure function of its inputs: the result is cached on disk)."""
        ...

    def build_model(self, config: ExperimentConfig, label_names: list[str], tokenizer: Any) -> nn.Module:
        """Backbone (dicelab.tasks.backbones) plus this task's head."""
        ...

    def collate(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Pad a list of feature rows into a batch of tensors."""
        ...

    def class_counts(self, features: datasets.Dataset, label_names: list[str]) -> list[int]:
        """Training-set counts per class (for wce), computed over the positions the loss sees."""
        ...

    def training_loss(
        self, model: nn.Module, batch: dict[str, torch.Tensor], loss_fn: nn.Module
    ) -> torch.Tensor:
        """Forward pass and scalar loss for one batch."""
        ...

    @torch.no_grad()
    def evaluate(
        self,
        model: nn.Module,
        batches: Any,
        features: datasets.Dataset,
        frame: pd.DataFrame,
        label_names: list[str],
    ) -> EvalResult:
        """Predict on a split (batches: iterable of collated batches over `features`) and score it."""
        ...

    def degenerate(self, result: EvalResult, label_names: list[str]) -> str | None:
        """One line when `result` is a degenerate predictor (no positive / entity / answer predicted, or a
        single class), else None: the trial's best evaluation is checked and flagged with it."""
        ...


__all__ = ["EvalResult", "RawDataset", "Task"]
