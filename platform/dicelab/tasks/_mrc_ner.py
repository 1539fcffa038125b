"""Named-entity recognition as machine reading comprehension (BERT-MRC, Li et al. 2020; the paper's Table 5).

One example per (sentence, entity type): the type's query (dicelab.tasks._mrc_queries) and the sentence as
context, `[CLS] query [SEP] sentence [SEP]`, truncated to data.max_length (the query is never cut).

Labels, per example:
- start: on the first sub-word of every complete context word, 1 where an entity of the type starts;
- end: on the last sub-word of every complete context word, 1 where one ends;
- every other position (query, specials, non-boundary sub-words, a word cut by max_length) is ignore_index,
  so the loss sees one start and one end decision per word. An entity cut by max_length is not taught at all
  (its start is ignore_index too); at evaluation it counts as missed.
- span match: for each (start, end) pair the match head scores whether they delimit one entity.

Head: the encoder's hidden states h; start / end scores are a linear layer on h_i; the match score of (i, j)
is an MLP on [h_i; h_j] (its first layer applied to each half separately, so no (L, L, 2H) tensor is formed).

Loss: (start + end + w * match) / (2 + w), w = task.match_loss_weight (0.1, BERT-MRC's CoNLL-2003 script;
the official dice scripts use 0.2-0.3). A heavier match term stalls the boundary heads (tiny-bert, synthetic
NER, one epoch: at w = 1 every start score is nearly the same constant; at 0.1 they separate by the query's
type): while start / end scores hover around 0 the predicted candidates come and go by the thousand and the
match loss spikes. Each term the configured loss on binary logits (ce is then binary
cross entropy); the dice family sees each term as one set when configured at level "batch", as the official
code does. Match candidates are the pairs (i <= j < i + task.max_answer_length) whose start and end are
both gold or both predicted (BERT-MRC's "pred_and_gold" candidates); only gold spans are positive.

Decoding: starts and ends with a positive score, pairs of them with a positive match score; each span's score
is the sum of its three logits. Spans of one type may nest or overlap; the sentence's flat tags keep the
best-scoring spans that do not overlap (greedy), then are scored with seqeval exactly as `token_tagging`.
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
from dicelab.errors import ConfigError
from dicelab.tasks._batching import IGNORE_INDEX, MODEL_PADS, list_column, pad_rows, tokenizer_columns
from dicelab.tasks._degeneracy import tagging_degeneracy
from dicelab.tasks._heads import FamilyEncoder, model_inputs
from dicelab.tasks._mrc_queries import CONLL03, ONTONOTES5, entity_queries
from dicelab.tasks._registry import TASKS
from dicelab.tasks._token_tagging import _tag_ids
from dicelab.tasks.backbones import build_encoder
from dicelab.tasks.base import EvalResult
from dicelab.tasks.families import Padding
from dicelab.tasks.metrics import tagging_metrics

NO_WORD = -1  # context word of query, special and padding tokens


@dataclass(frozen=True)
class Span:
    """An entity as inclusive word indices (encode, decode) or token positions (the model's labels)."""

    first: int
    last: int
    kind: str
    score: float = 0.0


@dataclass(frozen=True)
class MrcDecoding:
    max_span_length: int  # tokens, inclusive of both ends
    entity_types: tuple[str, ...]


class MrcNerModel(FamilyEncoder):
    """Encoder plus BERT-MRC's three heads; carries the decoding settings of its config."""

    def __init__(
        self,
        encoder: nn.Module,
        dropout: float,
        decoding: MrcDecoding,
        padding: Padding,
        match_loss_weight: float = 1.0,
    ):
        super().__init__(encoder, padding)
        hidden = encoder.config.hidden_size
        self.decoding, self.match_loss_weight = decoding, match_loss_weight
        self.dropout = nn.Dropout(dropout)
        self.boundaries = nn.Linear(hidden, 2)  # start, end
        self.match_start = nn.Linear(hidden, hidden)  # the match MLP's first layer, split over [h_i; h_j]
        self.match_end = nn.Linear(hidden, hidden, bias=False)
        self.match_out = nn.Linear(hidden, 1)
        std = getattr(encoder.config, "initializer_range", 0.02)
        for layer in (self.boundaries, self.match_start, self.match_end, self.match_out):
            nn.init.normal_(layer.weight, std=std)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden states (B, L, H) and start / end scores (B, L, 2)."""
        hidden = self.dropout(self.hidden_states(input_ids, attention_mask, token_type_ids))
        return hidden, self.boundaries(hidden)

    def match_scores(
        self, hidden: torch.Tensor, rows: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor
    ) -> torch.Tensor:
        """Match scores (P,) of the spans (rows[p], starts[p], ends[p]) only."""
        pair = F.gelu(self.match_start(hidden[rows, starts]) + self.match_end(hidden[rows, ends]))
        return self.match_out(self.dropout(pair)).squeeze(-1)


@TASKS.register("mrc_ner")
class MrcNer:
    name: ClassVar[str] = "mrc_ner"
    family: ClassVar[Family] = "tagging"
    metrics: ClassVar[tuple[str, ...]] = ("f1", "precision", "recall")

    def primary_metric(self, label_names: list[str]) -> str:
        return "f1"

    def texts(self, frame: pd.DataFrame) -> Iterator[str]:
        # tiny-bert's WordPiece is trained on these: the English queries' words too
        yield from (" ".join(tokens) for tokens in frame["tokens"])
        yield from CONLL03.values()
        yield from ONTONOTES5.values()

    def encode(
        self, frame: pd.DataFrame, tokenizer: Any, config: ExperimentConfig, label_names: list[str]
    ) -> datasets.Dataset:
        types = entity_types_of(label_names)
        queries = entity_queries(config.task.queries, types)
        words = [[str(token) for token in tokens] for tokens in frame["tokens"]]
        tag_ids = _tag_ids(frame, label_names)
        entities = [entity_spans([label_names[k] for k in tags]) for tags in tag_ids]
        max_length = config.data.max_length
        room = max_length - tokenizer.num_special_tokens_to_add(pair=True)
        for kind, query in queries.items():
            if len(tokenizer.tokenize(query)) >= room:
                raise ConfigError(
                    f"config key 'task.queries': the query of {kind!r} leaves no room for the sentence "
                    f"within data.max_length {max_length}"
                )
        # Sub-words per word of each whole sentence: a word is complete in a window iff all of them are in it.
        pieces = tokenizer(words, is_split_into_words=True, add_special_tokens=False)
        full_counts = [
            np.bincount(pieces.word_ids(row), minlength=len(words[row])) for row in range(len(words))
        ]
        query_words = [queries[kind].split() for kind in types]
        encoding = tokenizer(
            [query_words[k] for _ in words for k in range(len(types))],
            [sentence for sentence in words for _ in types],
            is_split_into_words=True,
            truncation="only_second",
            max_length=max_length,
            return_token_type_ids=True,
        )
        names = ("start_labels", "end_labels", "span_starts", "span_ends", "word_ids")
        columns: dict[str, list[Any]] = {name: [] for name in names}
        for row in range(len(encoding["input_ids"])):
            sentence, type_index = divmod(row, len(types))
            context_words = _context_words(encoding.word_ids(row), encoding.sequence_ids(row))
            labels = boundary_labels(
                context_words,
                full_counts[sentence],
                [span for span in entities[sentence] if span.kind == types[type_index]],
            )
            for name, value in zip(names, (*labels, context_words.tolist()), strict=True):
                columns[name].append(value)
        return datasets.Dataset.from_dict(
            {
                **tokenizer_columns(encoding),
                **columns,
                "sentence_index": [row // len(types) for row in range(len(encoding["input_ids"]))],
                "type_index": [row % len(types) for row in range(len(encoding["input_ids"]))],
                "feature_index": list(range(len(encoding["input_ids"]))),
            }
        )

    def build_model(self, config: ExperimentConfig, label_names: list[str], tokenizer: Any) -> nn.Module:
        encoder = build_encoder(config.model, tokenizer, max_positions=config.data.max_length)
        decoding = MrcDecoding(config.task.max_answer_length, tuple(entity_types_of(label_names)))
        return MrcNerModel(
            encoder, config.model.dropout, decoding, Padding.of(tokenizer), config.task.match_loss_weight
        )

    def collate(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = pad_rows(
            features,
            {**MODEL_PADS, "start_labels": IGNORE_INDEX, "end_labels": IGNORE_INDEX},
            scalars=("feature_index",),
        )
        # Gold spans as (B, S, 2) token positions, padded with -1 (at least one column).
        most = max(1, max(len(row["span_starts"]) for row in features))
        spans = torch.full((len(features), most, 2), -1, dtype=torch.long)
        for index, row in enumerate(features):
            count = len(row["span_starts"])
            spans[index, :count, 0] = torch.as_tensor(row["span_starts"], dtype=torch.long)
            spans[index, :count, 1] = torch.as_tensor(row["span_ends"], dtype=torch.long)
        batch["gold_spans"] = spans
        return batch

    def class_counts(self, features: datasets.Dataset, label_names: list[str]) -> list[int]:
        """[non-boundary, boundary] decisions over the start and end positions (the binary problems)."""
        counts = np.zeros(2, dtype=np.int64)
        for name in ("start_labels", "end_labels"):
            labels = list_column(features, name)[1]
            counts += np.bincount(labels[labels != IGNORE_INDEX], minlength=2)[:2]
        return counts.tolist()

    def training_loss(
        self, model: nn.Module, batch: dict[str, torch.Tensor], loss_fn: nn.Module
    ) -> torch.Tensor:
        hidden, scores = model(**model_inputs(model, batch))
        device = scores.device
        start_labels, end_labels = batch["start_labels"].to(device), batch["end_labels"].to(device)
        start_loss = loss_fn(scores[..., 0].reshape(-1), start_labels.reshape(-1))
        end_loss = loss_fn(scores[..., 1].reshape(-1), end_labels.reshape(-1))
        width = model.decoding.max_span_length
        gold = gold_band(batch["gold_spans"].to(device), scores.shape[1], width)
        candidates = match_candidates(start_labels, end_labels, scores.detach(), width)
        rows, starts, offsets = candidates.nonzero(as_tuple=True)
        if len(rows) == 0:
            return (start_loss + end_loss) / 2
        match = model.match_scores(hidden, rows, starts, starts + offsets)
        match_loss = loss_fn(match, gold[rows, starts, offsets].long())
        weight = model.match_loss_weight
        return (start_loss + end_loss + weight * match_loss) / (2 + weight)

    @torch.no_grad()
    def evaluate(
        self,
        model: nn.Module,
        batches: Any,
        features: datasets.Dataset,
        frame: pd.DataFrame,
        label_names: list[str],
    ) -> EvalResult:
        decoding: MrcDecoding = model.decoding
        found: list[tuple[int, int, int, float]] = []  # (feature, start token, end token, score)
        for batch in batches:
            found += predicted_spans(model, batch)
        word_ids = features["word_ids"]
        sentence_of, type_of = features["sentence_index"], features["type_index"]
        candidates: list[list[Span]] = [[] for _ in range(len(frame))]
        for feature, start, end, score in found:
            words = word_ids[feature]
            span = Span(words[start], words[end], decoding.entity_types[type_of[feature]], score)
            candidates[sentence_of[feature]].append(span)
        gold_tags = [[str(tag) for tag in tags] for tags in frame["tags"]]
        predicted_tags = [
            spans_to_tags(flat_spans(spans), len(gold))
            for spans, gold in zip(candidates, gold_tags, strict=True)
        ]
        metrics, per_class = tagging_metrics(gold_tags, predicted_tags)
        predictions = [
            {
                "tokens": [str(token) for token in tokens],
                "gold": gold,
                "predicted": predicted,
                "spans": [[span.first, span.last, span.kind, round(span.score, 4)] for span in spans],
            }
            for tokens, gold, predicted, spans in zip(
                frame["tokens"], gold_tags, predicted_tags, candidates, strict=True
            )
        ]
        return EvalResult(metrics=metrics, predictions=predictions, per_class=per_class)

    def degenerate(self, result: EvalResult, label_names: list[str]) -> str | None:
        return tagging_degeneracy(result.predictions)


def entity_types_of(label_names: list[str]) -> list[str]:
    """The entity types of an IOB2 label set, in first-seen order ("O" has none)."""
    return list(dict.fromkeys(name[2:] for name in label_names if name != "O"))


def entity_spans(tags: list[str]) -> list[Span]:
    """Entities of an IOB2 tag sequence as inclusive word ranges (an I-X that does not continue an X entity
    starts one, as conlleval and seqeval's default mode read it)."""
    spans: list[Span] = []
    for position, tag in enumerate(tags):
        if tag == "O":
            continue
        prefix, kind = tag[0], tag[2:]
        continues = prefix == "I" and spans and spans[-1].kind == kind and spans[-1].last == position - 1
        if continues:
            spans[-1] = Span(spans[-1].first, position, kind)
        else:
            spans.append(Span(position, position, kind))
    return spans


def boundary_labels(
    context_words: np.ndarray, full_counts: np.ndarray, entities: list[Span]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Start / end labels of one example and its gold spans as token positions (see the module docstring).

    context_words: the sentence word of each token (NO_WORD outside the context); full_counts: the number of
    sub-words of each word in the whole sentence; entities: this example's type's spans, in words.
    """
    length = len(context_words)
    in_window = np.bincount(context_words[context_words != NO_WORD], minlength=len(full_counts))
    complete = in_window == full_counts
    first_token: dict[int, int] = {}
    last_token: dict[int, int] = {}
    for position, word in enumerate(context_words.tolist()):
        if word != NO_WORD and complete[word]:
            first_token.setdefault(word, position)
            last_token[word] = position
    starts, ends = [IGNORE_INDEX] * length, [IGNORE_INDEX] * length
    for position in first_token.values():
        starts[position] = 0
    for position in last_token.values():
        ends[position] = 0
    span_starts, span_ends = [], []
    for entity in entities:
        if entity.last in last_token:  # the whole entity is in the window
            span_starts.append(first_token[entity.first])
            span_ends.append(last_token[entity.last])
            starts[span_starts[-1]], ends[span_ends[-1]] = 1, 1
        elif entity.first in first_token:  # cut by max_length: neither a start nor a non-start
            starts[first_token[entity.first]] = IGNORE_INDEX
    return starts, ends, span_starts, span_ends


def gold_band(spans: torch.Tensor, length: int, width: int) -> torch.Tensor:
    """(B, L, width) booleans: [b, i, k] is True when (i, i + k) is a gold span of row b."""
    width = min(width, length)  # as _band_pairs
    band = torch.zeros(spans.shape[0], length, width, dtype=torch.bool, device=spans.device)
    rows, column = (spans[..., 0] >= 0).nonzero(as_tuple=True)
    starts, ends = spans[rows, column, 0], spans[rows, column, 1]
    inside = ends - starts < width  # longer entities cannot be predicted: no label for them
    band[rows[inside], starts[inside], (ends - starts)[inside]] = True
    return band


def match_candidates(
    start_labels: torch.Tensor, end_labels: torch.Tensor, scores: torch.Tensor, width: int
) -> torch.Tensor:
    """(B, L, width) booleans: the (i, i + k) pairs the match loss sees, BERT-MRC's "pred_and_gold": every
    (gold start, gold end) pair, so the match head also meets negatives (one entity's start with another's
    end) before anything is predicted, and every (predicted start, predicted end) pair; both ends labelled."""
    gold_pairs = _band_pairs(start_labels == 1, end_labels == 1, width)
    predicted = _band_pairs(scores[..., 0] > 0, scores[..., 1] > 0, width)
    allowed = _band_pairs(start_labels != IGNORE_INDEX, end_labels != IGNORE_INDEX, width)
    return allowed & (gold_pairs | predicted)


def predicted_spans(model: nn.Module, batch: dict[str, torch.Tensor]) -> list[tuple[int, int, int, float]]:
    """(feature index, start token, end token, score) of each span the model predicts in a batch."""
    hidden, scores = model(**model_inputs(model, batch))
    scores = scores.float()
    device = scores.device
    start_ok = (batch["start_labels"].to(device) != IGNORE_INDEX) & (scores[..., 0] > 0)
    end_ok = (batch["end_labels"].to(device) != IGNORE_INDEX) & (scores[..., 1] > 0)
    rows, starts, offsets = _band_pairs(start_ok, end_ok, model.decoding.max_span_length).nonzero(
        as_tuple=True
    )
    if len(rows) == 0:
        return []
    ends = starts + offsets
    match = model.match_scores(hidden, rows, starts, ends).float()
    keep = match > 0
    total = scores[rows, starts, 0] + scores[rows, ends, 1] + match
    feature = batch["feature_index"].to(device)[rows]
    columns = (feature[keep], starts[keep], ends[keep], total[keep])
    return list(zip(*(column.tolist() for column in columns), strict=True))


def flat_spans(spans: list[Span]) -> list[Span]:
    """The best-scoring spans that do not overlap, greedily (nested and overlapping candidates lose to a
    better one); ties keep the earlier, shorter span."""
    taken: list[Span] = []
    for span in sorted(spans, key=lambda s: (-s.score, s.first, s.last)):
        if all(span.last < other.first or other.last < span.first for other in taken):
            taken.append(span)
    return sorted(taken, key=lambda s: s.first)


def spans_to_tags(spans: list[Span], length: int) -> list[str]:
    """IOB2 tags of non-overlapping word spans (adjacent entities of one type stay apart: B- starts each)."""
    tags = ["O"] * length
    for span in spans:
        tags[span.first] = f"B-{span.kind}"
        for position in range(span.first + 1, span.last + 1):
            tags[position] = f"I-{span.kind}"
    return tags


def _context_words(word_ids: list[int | None], sequence_ids: list[int | None]) -> np.ndarray:
    return np.array(
        [
            NO_WORD if word is None or sequence != 1 else word
            for word, sequence in zip(word_ids, sequence_ids, strict=True)
        ],
        dtype=np.int64,
    )


def _band_pairs(starts: torch.Tensor, ends: torch.Tensor, width: int) -> torch.Tensor:
    """(B, L, width): [b, i, k] = starts[b, i] and ends[b, i + k] (False past the end)."""
    width = min(width, starts.shape[1])
    end_band = F.pad(ends, (0, width - 1), value=False).unfold(1, width, 1)
    return starts[:, :, None] & end_band
