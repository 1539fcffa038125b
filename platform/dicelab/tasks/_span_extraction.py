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

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import datasets
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from dicelab.config import ExperimentConfig
from dicelab.data.base import Family
from dicelab.errors import ConfigError, DataError
from dicelab.losses import CrossEntropyLoss
from dicelab.tasks._batching import (
    IGNORE_INDEX,
    MODEL_PADS,
    in_example_order,
    list_array,
    list_column,
    pad_rows,
    tokenizer_columns,
)
from dicelab.tasks._degeneracy import answer_degeneracy
from dicelab.tasks._heads import EncoderWithHead, model_inputs
from dicelab.tasks._registry import TASKS
from dicelab.tasks.backbones import build_encoder
from dicelab.tasks.base import EvalResult
from dicelab.tasks.families import Padding
from dicelab.tasks.metrics import squad_metrics

NOT_CONTEXT = -1  # both offsets of question, special and padding tokens
MASKED_SCORE = -1e4  # softmax score of non-candidate positions: exp() underflows to 0, even in bf16


@dataclass(frozen=True)
class SpanDecoding:
    max_answer_length: int
    with_negative: bool  # SQuAD 2.0: questions may have no answer


class SpanExtractionModel(EncoderWithHead):
    """Start / end scores per token; carries the decoding settings of the config it was built from."""

    def __init__(self, encoder: nn.Module, dropout: float, decoding: SpanDecoding, padding: Padding):
        super().__init__(encoder, 2, dropout, False, padding)
        self.decoding = decoding


@TASKS.register("span_extraction")
class SpanExtraction:
    name: ClassVar[str] = "span_extraction"
    family: ClassVar[Family] = "spans"
    metrics: ClassVar[tuple[str, ...]] = ("em", "f1", "has_ans_em", "has_ans_f1", "no_ans_em", "no_ans_f1")

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
            return_token_type_ids=True,
        )
        scalars: dict[str, list[int]] = {"start_positions": [], "end_positions": [], "cls_index": []}
        candidate_masks: list[np.ndarray] = []
        window_offsets: list[np.ndarray] = []
        for window, example in enumerate(encoding["overflow_to_sample_mapping"]):
            input_ids = encoding["input_ids"][window]
            cls = input_ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in input_ids else 0
            in_context = np.array([sequence == 1 for sequence in encoding.sequence_ids(window)])
            offsets = np.array(encoding["offset_mapping"][window], dtype=np.int64).reshape(-1, 2)
            offsets[~in_context] = NOT_CONTEXT
            start, end = _answer_tokens(offsets, np.flatnonzero(in_context), answers[example], cls)
            candidates = in_context.astype(np.int64)
            candidates[cls] = 1
            for name, value in zip(scalars, (start, end, cls), strict=True):
                scalars[name].append(value)
            candidate_masks.append(candidates)
            window_offsets.append(offsets)
        examples = encoding["overflow_to_sample_mapping"]
        ids = [str(example_id) for example_id in frame["id"]]
        columns = {
            **tokenizer_columns(encoding),
            **scalars,
            "candidate_mask": list_array(candidate_masks),
            "offsets": list_array(window_offsets),
            "example_index": examples,
            "example_id": [ids[example] for example in examples],
        }
        return datasets.Dataset.from_dict(columns)

    def build_model(self, config: ExperimentConfig, label_names: list[str], tokenizer: Any) -> nn.Module:
        encoder = build_encoder(config.model, tokenizer, max_positions=config.data.max_length)
        decoding = SpanDecoding(config.task.max_answer_length, config.task.version_2_with_negative)
        return SpanExtractionModel(encoder, config.model.dropout, decoding, Padding.of(tokenizer))

    def collate(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        scalars = ("start_positions", "end_positions", "cls_index")
        return pad_rows(features, {**MODEL_PADS, "candidate_mask": 0}, scalars=scalars)

    def class_counts(self, features: datasets.Dataset, label_names: list[str]) -> list[int]:
        candidates = 2 * int(list_column(features, "candidate_mask")[1].sum())
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
            in_example_order(batches, torch.cat(column)).numpy() for column in zip(*windows, strict=True)
        )
        lengths, offsets = list_column(features, "offsets")
        first_tokens = np.cumsum(lengths) - lengths  # each window's first row in the flat offsets
        begins = offsets[first_tokens + starts, 0]  # character range of each window's best span
        finishes = offsets[first_tokens + ends, 1]
        best_score = np.full(len(frame), -np.inf)  # per question: its best span over all its windows
        best_window = np.full(len(frame), -1)
        null_score = np.full(len(frame), np.inf)  # and its lowest null score
        for window, example in enumerate(features["example_index"]):
            if span_scores[window] > best_score[example]:
                best_score[example], best_window[example] = span_scores[window], window
            null_score[example] = min(null_score[example], null_scores[window])
        predictions_text = []
        for example, context in enumerate(frame["context"]):
            window = best_window[example]
            abstain = window < 0 or (decoding.with_negative and null_score[example] > best_score[example])
            predictions_text.append("" if abstain else str(context)[begins[window] : finishes[window]])
        gold = [[str(text) for text in answers] for answers in frame["answer_texts"]]
        metrics = squad_metrics(predictions_text, gold, decoding.with_negative)
        predictions = [
            {"id": str(example_id), "prediction": text, "answers": answers}
            for example_id, text, answers in zip(frame["id"], predictions_text, gold, strict=True)
        ]
        return EvalResult(metrics=metrics, predictions=predictions)

    def degenerate(self, result: EvalResult, label_names: list[str]) -> str | None:
        return answer_degeneracy(result.predictions)


def _best_spans(
    scores: torch.Tensor, batch: dict[str, torch.Tensor], decoding: SpanDecoding
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per window: the best span's score (-inf when none is valid), start, end, and the null ([CLS]) score.

    Every (start, end) pair with both in the context and end - start < max_answer_length is scored, as a
    (B, L, max_answer_length) band (an exact search, where BERT's n-best lists only look at the top 20).
    """
    cls = batch["cls_index"].to(scores.device)
    context = batch["candidate_mask"].to(scores.device).bool()
    context[torch.arange(len(cls)), cls] = False
    start, end = scores[..., 0], scores[..., 1]
    band = min(decoding.max_answer_length, scores.shape[1])
    # Column k of the band holds position start + k: pad the right so that every row has `band` columns.
    end_band = F.pad(end, (0, band - 1), value=-torch.inf).unfold(1, band, 1)
    context_band = F.pad(context, (0, band - 1), value=False).unfold(1, band, 1)
    pair_scores = (start[:, :, None] + end_band).masked_fill(
        ~(context[:, :, None] & context_band), -torch.inf
    )
    best, flat_index = pair_scores.flatten(1).max(dim=1)
    best_start = flat_index // band
    null = start.gather(1, cls[:, None]).squeeze(1) + end.gather(1, cls[:, None]).squeeze(1)
    return best.cpu(), best_start.cpu(), (best_start + flat_index % band).cpu(), null.cpu()


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
    offsets: np.ndarray, context: np.ndarray, answer: tuple[int, int] | None, cls: int
) -> tuple[int, int]:
    """Start and end token of the answer when the window holds all of it, else ([CLS], [CLS]).

    offsets: (L, 2) character offsets; context: the positions of the window's context tokens, ascending.
    """
    if answer is None or len(context) == 0:
        return cls, cls
    first, last = answer
    starts, ends = offsets[context, 0], offsets[context, 1]
    if starts[0] > first or ends[-1] < last:
        return cls, cls
    start = context[np.argmax(ends > first)]  # the first token ending after the answer starts
    end = context[len(context) - 1 - np.argmax(starts[::-1] < last)]  # the last token starting before its end
    return int(start), int(end)
