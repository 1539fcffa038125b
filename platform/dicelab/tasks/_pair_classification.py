"""Sentence and sentence-pair classification (QQP, MRPC, SST-2, SST-5).

Head: dropout + linear on the hidden state of the family's summary token (BERT's [CLS], first; XLNet's <cls>,
last: dicelab.tasks.families), BERT's sequence classifier.
Binary tasks score ONE logit, the positive class's (sigmoid): every loss then sees (N,) logits and {0, 1}
targets, which is how the dice family and the paper treat binary tasks, and `ce` on (N,) is binary cross
entropy, the same model as a two-class softmax. Multi-class tasks score C logits (softmax, one-vs-rest for
the dice family).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import datasets
import numpy as np
import pandas as pd
import torch
from torch import nn

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family
from dicelab.errors import DataError
from dicelab.tasks._batching import MODEL_PADS, in_example_order, pad_rows, tokenizer_columns
from dicelab.tasks._degeneracy import classification_degeneracy
from dicelab.tasks._heads import EncoderWithHead, model_inputs
from dicelab.tasks._registry import TASKS
from dicelab.tasks.backbones import build_encoder
from dicelab.tasks.base import EvalResult
from dicelab.tasks.families import Padding
from dicelab.tasks.metrics import classification_metrics


@TASKS.register("pair_classification")
class PairClassification:
    name: ClassVar[str] = "pair_classification"
    family: ClassVar[Family] = "pairs"
    # binary: f1, precision, recall, accuracy; multi-class: accuracy, macro_f1; both: log_loss (lower: better)
    metrics: ClassVar[tuple[str, ...]] = ("f1", "precision", "recall", "accuracy", "macro_f1", "log_loss")

    def primary_metric(self, label_names: list[str]) -> str:
        return "f1" if _is_binary(label_names) else "accuracy"

    def texts(self, frame: pd.DataFrame) -> Iterator[str]:
        yield from frame["text_a"]
        yield from (text for text in frame["text_b"] if isinstance(text, str))

    def encode(
        self, frame: pd.DataFrame, tokenizer: Any, config: ExperimentConfig, label_names: list[str]
    ) -> datasets.Dataset:
        first = [str(text) for text in frame["text_a"]]
        second = [text if isinstance(text, str) else None for text in frame["text_b"]]
        if any(text is None for text in second) and not all(text is None for text in second):
            row = second.index(None)
            raise DataError(f"pairs data: text_b is missing in row {row} but present in others")
        pairs = second if second and second[0] is not None else None
        encoding = tokenizer(
            first, pairs, truncation=True, max_length=config.data.max_length, return_token_type_ids=True
        )
        return datasets.Dataset.from_dict(
            {**tokenizer_columns(encoding), "labels": _label_ids(frame, label_names)}
        )

    def build_model(self, config: ExperimentConfig, label_names: list[str], tokenizer: Any) -> nn.Module:
        encoder = build_encoder(config.model, tokenizer, max_positions=config.data.max_length)
        outputs = 1 if _is_binary(label_names) else len(label_names)
        return EncoderWithHead(encoder, outputs, config.model.dropout, True, Padding.of(tokenizer))

    def collate(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return pad_rows(features, MODEL_PADS, scalars=("labels",))

    def class_counts(self, features: datasets.Dataset, label_names: list[str]) -> list[int]:
        return np.bincount(np.asarray(features["labels"]), minlength=len(label_names)).tolist()

    def training_loss(
        self, model: nn.Module, batch: dict[str, torch.Tensor], loss_fn: nn.Module
    ) -> torch.Tensor:
        logits = _scores(model, batch)
        return loss_fn(logits, batch["labels"].to(logits.device))

    @torch.no_grad()
    def evaluate(
        self,
        model: nn.Module,
        batches: Any,
        features: datasets.Dataset,
        frame: pd.DataFrame,
        label_names: list[str],
    ) -> EvalResult:
        scores = in_example_order(
            batches, torch.cat([_scores(model, batch).float().cpu() for batch in batches])
        )
        if _is_binary(label_names):
            probabilities = torch.sigmoid(scores)  # of the positive class, label_names[-1]
            predicted = (scores > 0).long()
            per_label = torch.stack([1 - probabilities, probabilities], dim=-1)
        else:
            per_label = torch.softmax(scores, dim=-1)
            probabilities, predicted = per_label.max(dim=-1)  # of the predicted class
        gold = np.asarray(features["labels"])
        metrics, per_class = classification_metrics(gold, predicted.numpy(), label_names, per_label.numpy())
        predictions = [
            {
                "index": index,
                "label": label_names[g],
                "prediction": label_names[p],
                "probability": round(q, 6),
            }
            for index, (g, p, q) in enumerate(
                zip(gold.tolist(), predicted.tolist(), probabilities.tolist(), strict=True)
            )
        ]
        return EvalResult(metrics=metrics, predictions=predictions, per_class=per_class)

    def degenerate(self, result: EvalResult, label_names: list[str]) -> str | None:
        return classification_degeneracy(result.predictions, label_names)


def _is_binary(label_names: list[str]) -> bool:
    return len(label_names) == 2


def _scores(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(**model_inputs(model, batch))
    return logits.squeeze(-1) if logits.shape[-1] == 1 else logits  # binary: (N,), multi-class: (N, C)


def _label_ids(frame: pd.DataFrame, label_names: list[str]) -> list[int]:
    index = {name: k for k, name in enumerate(label_names)}
    ids = []
    for row, label in enumerate(frame["label"]):
        if str(label) not in index:
            raise DataError(f"pairs data: label {label!r} in row {row} is not one of {label_names}")
        ids.append(index[str(label)])
    return ids
