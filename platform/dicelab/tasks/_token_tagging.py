"""Token tagging with IOB2 tags (NER, POS).

Head: dropout + linear on every token's hidden state, (B, L, C). Each word's tag sits on its first sub-word;
other sub-words, special tokens and padding carry ignore_index (-100), so every loss sees exactly one
C-way example per word. Words cut off by data.max_length are predicted "O" at evaluation (their gold
entities count as missed), so truncation never inflates the score.
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
from dicelab.tasks._batching import (
    IGNORE_INDEX,
    MODEL_PADS,
    in_example_order,
    list_column,
    pad_rows,
    tokenizer_columns,
)
from dicelab.tasks._degeneracy import tagging_degeneracy
from dicelab.tasks._heads import EncoderWithHead, model_inputs
from dicelab.tasks._registry import TASKS
from dicelab.tasks.backbones import build_encoder
from dicelab.tasks.base import EvalResult
from dicelab.tasks.families import Padding
from dicelab.tasks.metrics import tagging_metrics

NO_WORD = -1  # word_ids entry of special tokens


@TASKS.register("token_tagging")
class TokenTagging:
    name: ClassVar[str] = "token_tagging"
    family: ClassVar[Family] = "tagging"
    metrics: ClassVar[tuple[str, ...]] = ("f1", "precision", "recall")

    def primary_metric(self, label_names: list[str]) -> str:
        return "f1"

    def texts(self, frame: pd.DataFrame) -> Iterator[str]:
        return (" ".join(tokens) for tokens in frame["tokens"])

    def encode(
        self, frame: pd.DataFrame, tokenizer: Any, config: ExperimentConfig, label_names: list[str]
    ) -> datasets.Dataset:
        words = [[str(token) for token in tokens] for tokens in frame["tokens"]]
        tag_ids = _tag_ids(frame, label_names)
        encoding = tokenizer(
            words,
            is_split_into_words=True,
            truncation=True,
            max_length=config.data.max_length,
            return_token_type_ids=True,
        )
        word_ids = [
            [NO_WORD if word is None else word for word in encoding.word_ids(row)]
            for row in range(len(words))
        ]
        labels = [_first_sub_word_labels(ids, tags) for ids, tags in zip(word_ids, tag_ids, strict=True)]
        # word_ids stays with the features: evaluation maps predictions back to words with it.
        return datasets.Dataset.from_dict(
            {**tokenizer_columns(encoding), "labels": labels, "word_ids": word_ids}
        )

    def build_model(self, config: ExperimentConfig, label_names: list[str], tokenizer: Any) -> nn.Module:
        encoder = build_encoder(config.model, tokenizer, max_positions=config.data.max_length)
        return EncoderWithHead(encoder, len(label_names), config.model.dropout, False, Padding.of(tokenizer))

    def collate(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return pad_rows(features, {**MODEL_PADS, "labels": IGNORE_INDEX})

    def class_counts(self, features: datasets.Dataset, label_names: list[str]) -> list[int]:
        labels = list_column(features, "labels")[1]
        return np.bincount(labels[labels != IGNORE_INDEX], minlength=len(label_names)).tolist()

    def training_loss(
        self, model: nn.Module, batch: dict[str, torch.Tensor], loss_fn: nn.Module
    ) -> torch.Tensor:
        logits = model(**model_inputs(model, batch))
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
        gold_tags = [[str(tag) for tag in tags] for tags in frame["tags"]]
        rows = [
            positions
            for batch in batches
            for positions in model(**model_inputs(model, batch)).argmax(dim=-1).cpu().numpy()
        ]
        predicted_tags: list[list[str]] = []
        for positions, word_ids, gold in zip(
            in_example_order(batches, rows), features["word_ids"], gold_tags, strict=True
        ):
            tags = ["O"] * len(gold)
            for position, word in enumerate(word_ids):
                if word != NO_WORD and (position == 0 or word_ids[position - 1] != word):
                    tags[word] = label_names[positions[position]]
            predicted_tags.append(tags)
        metrics, per_class = tagging_metrics(gold_tags, predicted_tags)
        predictions = [
            {"tokens": [str(token) for token in tokens], "gold": gold, "predicted": predicted}
            for tokens, gold, predicted in zip(frame["tokens"], gold_tags, predicted_tags, strict=True)
        ]
        return EvalResult(metrics=metrics, predictions=predictions, per_class=per_class)

    def degenerate(self, result: EvalResult, label_names: list[str]) -> str | None:
        return tagging_degeneracy(result.predictions)


def _first_sub_word_labels(word_ids: list[int], tags: list[int]) -> list[int]:
    labels = []
    previous = NO_WORD
    for word in word_ids:
        labels.append(tags[word] if word != NO_WORD and word != previous else IGNORE_INDEX)
        previous = word
    return labels


def _tag_ids(frame: pd.DataFrame, label_names: list[str]) -> list[list[int]]:
    index = {name: k for k, name in enumerate(label_names)}
    tag_ids = []
    for row, (tokens, tags) in enumerate(zip(frame["tokens"], frame["tags"], strict=True)):
        if len(tokens) != len(tags):
            raise DataError(f"tagging data: row {row} has {len(tokens)} tokens but {len(tags)} tags")
        unknown = [tag for tag in tags if str(tag) not in index]
        if unknown:
            raise DataError(f"tagging data: tag {unknown[0]!r} in row {row} is not one of {label_names}")
        tag_ids.append([index[str(tag)] for tag in tags])
    return tag_ids
