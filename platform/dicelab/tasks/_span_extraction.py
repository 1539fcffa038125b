"""Extractive question answering, SQuAD 1.1 / 2.0 style (span extraction, machine reading comprehension).

Features: the question (cut to task.max_query_length tokens) and a window of the context, one feature per
window: long contexts are split into windows of data.max_length tokens that overlap by task.doc_stride
tokens. Each window's "candidate" positions are its context tokens plus [CLS]; the answer's first and last
tokens are its start / end positions, or [CLS] for both when the window does not hold the whole answer
(an unanswerable question, or an answer outside or cut by the window).

Head: dropout + linear on every token, (B, L, 2) start / end scores. How they meet the loss:
- `ce`: BERT's softmax over positions, per window and per boundary (start, end), restricted to the
  candidate positions; the loss is the mean of the start and end cross entropies.
- every other loss (wce, focal, dice, tversky, dsc): each (candidate position, start|end) is a binary
  example, 1 at the answer's boundary and 0 elsewhere, the rest ignore_index: logits (B*L*2,) with sigmoid.
  This is the paper's MRC set-up and the imbalance it targets (two positives per window of hundreds).
  wce's class counts are those binary counts, [non-boundary, boundary].

Decoding: per window, the best span (start <= end, at most task.max_answer_length tokens, both in the
context) by start + end score; per question, the best over its windows. SQuAD 2.0
(task.version_2_with_negative): the null score is the lowest [CLS] start + end score over the windows, and
the answer is empty when it beats the best span (null score difference threshold 0).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import datasets
import numpy as np
import pandas as pd
import torch
from torch import nn

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family
from dicelab.errors import ConfigError, DataError
from dicelab.losses import CrossEntropyLoss
from dicelab.tasks._batching import IGNORE_INDEX, MODEL_PADS, pad_rows, tokenizer_columns
from dicelab.tasks._heads import EncoderWithHead, model_inputs
from dicelab.tasks._registry import TASKS
from dicelab.tasks.backbones import build_encoder
from dicelab.tasks.base import EvalResult
from dicelab.tasks.metrics import squad_metrics

NOT_CONTEXT = (-1, -1)  # offsets entry of question, special and padding tokens
MASKED_SCORE = -1e4  # softmax score of non-candidate positions: exp() underflows to 0, even in bf16


@dataclass(frozen=True)
class SpanDecoding:
    max_answer_length: int
    with_negative: bool  # SQuAD 2.0: questions may have no answer


class SpanExtractionModel(EncoderWithHead):
    """Start / end scores per token; carries the decoding settings of the config it was built from."""

    def __init__(self, encoder: nn.Module, dropout: float, decoding: SpanDecoding):
        super().__init__(encoder, 2, dropout, pool_first_token=False)
        self.decoding = decoding


@TASKS.register("span_extraction")
class SpanExtraction:
    name: ClassVar[str] = "span_extraction"
    family: ClassVar[Family] = "spans"

    def primary_metric(self, label_names: list[str]) -> str:
        return "f1"

    def texts(self, frame: pd.DataFrame) -> Iterator[str]:
        yield from frame["question"]
        yield from frame["context"]

    def encode(
        self, frame: pd.DataFrame, tokenizer: Any, config: ExperimentConfig, label_names: list[str]
    ) -> datasets.Dataset:
        max_length, task = config.data.max_length, config.task
        room = max_length - task.max_query_length - tokenizer.num_special_tokens_to_add(pair=True)
        if task.doc_stride >= room:
            raise ConfigError(
                f"task.doc_stride: {task.doc_stride} must be below the {room} context tokens of a window "
                f"(data.max_length {max_length} - task.max_query_length {task.max_query_length} - specials)"
            )
        questions = _truncate(tokenizer, [str(q).lstrip() for q in frame["question"]], task.max_query_length)
        contexts = [str(context) for context in frame["context"]]
        answers = _answer_characters(frame, contexts)
        encoding = tokenizer(
            questions,
            contexts,
            truncation="only_second",
            max_length=max_length,
            stride=task.doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        ids = [str(example_id) for example_id in frame["id"]]
        names = (
            "start_positions",
            "end_positions",
            "cls_index",
            "candidate_mask",
            "offsets",
            "example_index",
        )
        columns: dict[str, list[Any]] = {name: [] for name in names}
        for window, example in enumerate(encoding["overflow_to_sample_mapping"]):
            input_ids = encoding["input_ids"][window]
            cls = input_ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in input_ids else 0
            offsets = [
                tuple(offset) if sequence == 1 else NOT_CONTEXT
                for offset, sequence in zip(
                    encoding["offset_mapping"][window], encoding.sequence_ids(window), strict=True
                )
            ]
            start, end = _answer_tokens(offsets, answers[example], cls)
            columns["start_positions"].append(start)
            columns["end_positions"].append(end)
            columns["cls_index"].append(cls)
            columns["candidate_mask"].append(
                [int(o != NOT_CONTEXT or t == cls) for t, o in enumerate(offsets)]
            )
            columns["offsets"].append([list(offset) for offset in offsets])
            columns["example_index"].append(example)
        example_ids = [ids[example] for example in columns["example_index"]]
        return datasets.Dataset.from_dict(
            {**tokenizer_columns(encoding), **columns, "example_id": example_ids}
        )

    def build_model(self, config: ExperimentConfig, label_names: list[str], tokenizer: Any) -> nn.Module:
        encoder = build_encoder(config.model, tokenizer, max_positions=config.data.max_length)
        decoding = SpanDecoding(config.task.max_answer_length, config.task.version_2_with_negative)
        return SpanExtractionModel(encoder, config.model.dropout, decoding)

    def collate(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        scalars = ("start_positions", "end_positions", "cls_index")
        return pad_rows(features, {**MODEL_PADS, "candidate_mask": 0}, scalars=scalars)

    def class_counts(self, features: datasets.Dataset, label_names: list[str]) -> list[int]:
        candidates = 2 * sum(int(np.sum(mask)) for mask in features["candidate_mask"])
        boundaries = 2 * len(features)  # one start and one end per window ([CLS] when it holds no answer)
        return [candidates - boundaries, boundaries]

    def training_loss(
        self, model: nn.Module, batch: dict[str, torch.Tensor], loss_fn: nn.Module
    ) -> torch.Tensor:
        scores = model(**model_inputs(model, batch))  # (B, L, 2)
        candidates = batch["candidate_mask"].to(scores.device).bool()
        boundaries = torch.stack([batch["start_positions"], batch["end_positions"]], dim=-1).to(scores.device)
        if isinstance(loss_fn, CrossEntropyLoss):
            # Softmax over each window's candidate positions: (B*2, L) scores, the boundary index as class.
            masked = scores.masked_fill(~candidates.unsqueeze(-1), MASKED_SCORE)
            return loss_fn(masked.transpose(1, 2).reshape(-1, masked.shape[1]), boundaries.reshape(-1))
        targets = torch.zeros_like(scores, dtype=torch.long)
        targets.scatter_(1, boundaries.unsqueeze(1), 1)  # (B, 1, 2) boundary positions -> 1
        targets.masked_fill_(~candidates.unsqueeze(-1), IGNORE_INDEX)
        return loss_fn(scores.reshape(-1), targets.reshape(-1))

    @torch.no_grad()
    def evaluate(
        self,
        model: nn.Module,
        batches: Any,
        features: datasets.Dataset,
        frame: pd.DataFrame,
        label_names: list[str],
    ) -> EvalResult:
        decoding: SpanDecoding = model.decoding
        windows = [
            _best_spans(model(**model_inputs(model, batch)).float(), batch, decoding) for batch in batches
        ]
        span_scores, starts, ends, null_scores = (
            torch.cat(column).tolist() for column in zip(*windows, strict=True)
        )
        contexts = [str(context) for context in frame["context"]]
        best: dict[int, tuple[float, str]] = {}  # example -> (score, answer) of its best window
        null: dict[int, float] = {}
        for window, (example, offsets) in enumerate(
            zip(features["example_index"], features["offsets"], strict=True)
        ):
            if span_scores[window] > -np.inf and span_scores[window] > best.get(example, (-np.inf, ""))[0]:
                answer = contexts[example][offsets[starts[window]][0] : offsets[ends[window]][1]]
                best[example] = (span_scores[window], answer)
            null[example] = min(null.get(example, np.inf), null_scores[window])
        predictions_text = []
        for example in range(len(frame)):
            score, answer = best.get(example, (-np.inf, ""))
            no_answer = decoding.with_negative and null.get(example, np.inf) > score
            predictions_text.append("" if no_answer else answer)
        gold = [[str(text) for text in answers] for answers in frame["answer_texts"]]
        metrics = squad_metrics(predictions_text, gold, decoding.with_negative)
        predictions = [
            {"id": str(example_id), "prediction": text, "answers": answers}
            for example_id, text, answers in zip(frame["id"], predictions_text, gold, strict=True)
        ]
        return EvalResult(metrics=metrics, predictions=predictions)


def _best_spans(
    scores: torch.Tensor, batch: dict[str, torch.Tensor], decoding: SpanDecoding
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per window: the best span's score (-inf when none is valid), start, end, and the null ([CLS]) score."""
    cls = batch["cls_index"].to(scores.device)
    context = batch["candidate_mask"].to(scores.device).bool()
    context[torch.arange(len(cls)), cls] = False
    start, end = scores[..., 0], scores[..., 1]
    length = scores.shape[1]
    offsets = torch.arange(length, device=scores.device)
    span_length = offsets[None, :] - offsets[:, None]  # end - start
    allowed = (span_length >= 0) & (span_length < decoding.max_answer_length)
    valid = allowed & context[:, :, None] & context[:, None, :]
    pair_scores = (start[:, :, None] + end[:, None, :]).masked_fill(~valid, -np.inf)
    best, flat_index = pair_scores.reshape(len(cls), -1).max(dim=1)
    null = start.gather(1, cls[:, None]).squeeze(1) + end.gather(1, cls[:, None]).squeeze(1)
    return best.cpu(), (flat_index // length).cpu(), (flat_index % length).cpu(), null.cpu()


def _truncate(tokenizer: Any, questions: list[str], max_tokens: int) -> list[str]:
    """Questions cut after their first `max_tokens` tokens (BERT's max_query_length)."""
    encoding = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    return [
        question if len(offsets) <= max_tokens else question[: offsets[max_tokens - 1][1]]
        for question, offsets in zip(questions, encoding["offset_mapping"], strict=True)
    ]


def _answer_characters(frame: pd.DataFrame, contexts: list[str]) -> list[tuple[int, int] | None]:
    """Each question's first answer as a [start, end) character range of its context; None if unanswerable."""
    ranges: list[tuple[int, int] | None] = []
    answers = zip(frame["answer_texts"], frame["answer_starts"], contexts, strict=True)
    for row, (texts, starts, context) in enumerate(answers):
        if len(texts) == 0:
            ranges.append(None)
            continue
        text, start = str(texts[0]), int(starts[0])
        if not text or context[start : start + len(text)] != text:
            raise DataError(
                f"spans data: the answer {text!r} of row {row} (id {frame['id'].iloc[row]!r}) is not at "
                f"character {start} of its context"
            )
        ranges.append((start, start + len(text)))
    return ranges


def _answer_tokens(
    offsets: Sequence[tuple[int, int]], answer: tuple[int, int] | None, cls: int
) -> tuple[int, int]:
    """Start and end token of the answer when the window holds all of it, else ([CLS], [CLS])."""
    context = [token for token, offset in enumerate(offsets) if offset != NOT_CONTEXT]
    if answer is None or not context:
        return cls, cls
    first, last = answer
    if offsets[context[0]][0] > first or offsets[context[-1]][1] < last:
        return cls, cls
    start = next(token for token in context if offsets[token][1] > first)
    end = next(token for token in reversed(context) if offsets[token][0] < last)
    return start, end
