"""NER as reading comprehension (mrc_ner): queries, start / end / span labels, decoding back to tags, on
hand-made sentences (sub-word starts, adjacent and nested entities, entities cut by max_length)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from seqeval.metrics import f1_score
from torch import nn

from dicelab.data.readers import read_split_file
from dicelab.errors import ConfigError, DataError
from dicelab.tasks import TASKS, MrcNer
from dicelab.tasks._mrc_ner import (
    IGNORE_INDEX,
    MrcDecoding,
    Span,
    boundary_labels,
    entity_spans,
    flat_spans,
    gold_band,
    match_candidates,
    spans_to_tags,
)
from dicelab.tasks._mrc_queries import CONLL03, MSRA, ONTONOTES5, entity_queries, generic_query

TAGS = ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def test_registered_as_a_tagging_task():
    assert TASKS.get("mrc_ner") is MrcNer
    assert (MrcNer.family, MrcNer().primary_metric(TAGS)) == ("tagging", "f1")


def test_queries_by_type_by_set_and_by_mapping():
    auto = entity_queries("auto", ["PER", "GPE", "SPECIES_NAME"])
    assert auto == {
        "PER": CONLL03["PER"],
        "GPE": ONTONOTES5["GPE"],
        "SPECIES_NAME": "find the species name entities in the text.",
    }
    assert generic_query("WORK_OF_ART") == "find the work of art entities in the text."
    assert entity_queries("msra", ["NR", "NS"]) == {"NR": MSRA["NR"], "NS": MSRA["NS"]}
    assert entity_queries({"PER": "who ?", "LOC": "where ?"}, ["LOC"]) == {"LOC": "where ?"}
    with pytest.raises(ConfigError, match=r"task\.queries': no query for entity type 'MISC'"):
        entity_queries("ontonotes4", ["PER", "MISC"])
    with pytest.raises(ConfigError, match="unknown query set 'conll'"):
        entity_queries("conll", ["PER"])


def test_entity_spans_read_iob2_and_iob1_style_continuations():
    tags = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "I-ORG", "I-ORG"]
    assert entity_spans(tags) == [
        Span(0, 1, "PER"),
        Span(3, 3, "LOC"),
        Span(4, 5, "LOC"),
        Span(6, 7, "ORG"),  # an I- that continues nothing starts an entity, as conlleval reads it
    ]


def test_boundary_labels_of_nested_spans_and_cut_words():
    # tokens: [CLS] q [SEP] w0 w1a w1b w2 w3a [SEP]; w3 has 2 sub-words, only one in the window
    context = np.array([-1, -1, -1, 0, 1, 1, 2, 3, -1])
    full_counts = np.array([1, 2, 1, 2])
    starts, ends, span_starts, span_ends = boundary_labels(
        context, full_counts, [Span(0, 2, "LOC"), Span(1, 2, "LOC"), Span(2, 3, "LOC")]
    )
    I = IGNORE_INDEX  # noqa: E741
    # starts on first sub-words of complete words, ends on last sub-words; w3 is cut: no decision on it
    assert starts == [I, I, I, 1, 1, I, I, I, I]  # w2 starts the cut entity (2, 3): neither start nor not
    assert ends == [I, I, I, 0, I, 0, 1, I, I]
    assert (span_starts, span_ends) == ([3, 4], [6, 6])  # the nested spans share their end


def test_encode_labels_sub_word_starts_adjacent_entities_and_cut_entities(config, minilm_tokenizer):
    config.data.max_length = 40
    config.task.queries = {"LOC": "where ?", "ORG": "which organization ?", "PER": "who ?"}
    frame = pd.DataFrame(
        {
            "tokens": [
                ["Xylophonist", "Qwzx", "visited", "Paris", "Berlin", "today"],
                ["Ann", "left", *["very"] * 30, "Rome", "Tower", "Hall"],
            ],
            "tags": [
                ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "O"],
                ["B-PER", "O", *["O"] * 30, "B-ORG", "I-ORG", "I-ORG"],
            ],
        }
    )
    task = MrcNer()
    features = task.encode(frame, minilm_tokenizer, config, TAGS)
    assert len(features) == 2 * 3  # one example per sentence x type (LOC, ORG, PER: the label set's order)
    assert features["sentence_index"] == [0, 0, 0, 1, 1, 1] and features["type_index"] == [0, 1, 2] * 2

    def labelled(row: int) -> list[tuple[str, int, int]]:
        pieces = minilm_tokenizer.convert_ids_to_tokens(features[row]["input_ids"])
        rows = zip(pieces, features[row]["start_labels"], features[row]["end_labels"], strict=True)
        return [(piece, start, end) for piece, start, end in rows if (start, end) != (I, I)]

    I = IGNORE_INDEX  # noqa: E741
    pieces = minilm_tokenizer.convert_ids_to_tokens(features[2]["input_ids"])
    assert pieces[:6] == ["[CLS]", "who", "?", "[SEP]", "x", "##yl"]
    per = labelled(2)
    assert per[0] == ("x", 1, I) and per[1][1:] == (I, 0)  # start on the first sub-word, end on the last
    assert next(label for label in per if label[2] == 1)[0] == "##x"  # "Qwzx" ends the person
    loc = labelled(0)
    assert [(p, s, e) for p, s, e in loc if p in ("paris", "berlin")] == [("paris", 1, 1), ("berlin", 1, 1)]
    loc_pieces = minilm_tokenizer.convert_ids_to_tokens(features[0]["input_ids"])
    adjacent = [loc_pieces.index("paris"), loc_pieces.index("berlin")]
    assert (features[0]["span_starts"], features[0]["span_ends"]) == (adjacent, adjacent)
    # sentence 2: "Rome Tower Hall" is cut by max_length 40 (the ORG query is longer than the PER one)
    org_row = 4
    org_pieces = minilm_tokenizer.convert_ids_to_tokens(features[org_row]["input_ids"])
    assert len(org_pieces) == 40 and "hall" not in org_pieces
    assert features[org_row]["span_starts"] == []
    rome = org_pieces.index("rome")  # its start is in the window, its end is not: no decision either way
    assert features[org_row]["start_labels"][rome] == IGNORE_INDEX
    assert features[org_row]["end_labels"][rome] == 0  # "Rome" does not end it
    assert features[5]["span_starts"] == [features[5]["word_ids"].index(0)]  # "Ann" fits


def test_gold_band_marks_spans_within_the_width():
    spans = torch.tensor([[[1, 2], [4, 4]], [[0, 5], [-1, -1]]])
    band = gold_band(spans, length=6, width=3)
    assert band.nonzero().tolist() == [[0, 1, 1], [0, 4, 0]]  # (0, 5) is longer than 3 tokens


def test_match_candidates_pair_every_gold_start_with_every_gold_end_and_the_predictions():
    # tokens 0..6; entities (1, 2) and (4, 4); 0 and 6 are specials (ignored); token 5 is predicted a start
    # and an end; the rest scores below 0
    starts = torch.tensor([[IGNORE_INDEX, 1, 0, 0, 1, 0, IGNORE_INDEX]])
    ends = torch.tensor([[IGNORE_INDEX, 0, 1, 0, 1, 0, IGNORE_INDEX]])
    scores = torch.full((1, 7, 2), -1.0)
    scores[0, 5] = 1.0
    scores[0, 6] = 1.0  # predicted but a special token: never a candidate
    pairs = {(i, i + k) for _, i, k in match_candidates(starts, ends, scores, width=4).nonzero().tolist()}
    # gold x gold: (1, 2) and (4, 4) are entities, (1, 4) pairs one's start with the other's end (a
    # negative the match head must learn); predicted x predicted: (5, 5); (4, 2) runs backwards
    assert pairs == {(1, 2), (1, 4), (4, 4), (5, 5)}
    assert {(i, i + k) for _, i, k in match_candidates(starts, ends, scores, width=2).nonzero().tolist()} == {
        (1, 2),
        (4, 4),
        (5, 5),
    }


def test_flat_decoding_keeps_the_best_spans_and_separates_adjacent_ones():
    candidates = [
        Span(2, 4, "ORG", 9.0),
        Span(2, 3, "LOC", 4.0),  # nested in the better ORG span
        Span(6, 6, "LOC", 7.0),
        Span(7, 7, "LOC", 6.0),  # adjacent, same type
        Span(6, 7, "LOC", 5.0),  # overlaps both
        Span(0, 0, "PER", 8.0),
    ]
    kept = flat_spans(candidates)
    assert kept == [
        Span(0, 0, "PER", 8.0),
        Span(2, 4, "ORG", 9.0),
        Span(6, 6, "LOC", 7.0),
        Span(7, 7, "LOC", 6.0),
    ]
    assert spans_to_tags(kept, 9) == ["B-PER", "O", "B-ORG", "I-ORG", "I-ORG", "O", "B-LOC", "B-LOC", "O"]


class SpanOracle(nn.Module):
    """Stands in for MrcNerModel: predicts the given spans (feature -> [(start token, end token, score)])
    through the start / end / match scores, so decoding is checked end to end without training."""

    def __init__(self, keys: list[tuple[int, ...]], spans: dict[int, list[tuple[int, int, float]]], types):
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(()))
        self.keys, self.spans = {key: index for index, key in enumerate(keys)}, spans
        self.decoding = MrcDecoding(max_span_length=8, entity_types=tuple(types))

    def forward(self, input_ids, attention_mask, **_):
        features = [
            self.keys[tuple(ids[: sum(mask)])]
            for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True)
        ]
        scores = torch.full((*input_ids.shape, 2), -5.0)
        for row, feature in enumerate(features):
            for start, end, _ in self.spans.get(feature, []):
                scores[row, start, 0] = scores[row, end, 1] = 1.0
        hidden = torch.tensor(features, dtype=torch.float)[:, None, None].expand(*input_ids.shape, 1)
        return hidden + self.anchor, scores

    def match_scores(self, hidden, rows, starts, ends):
        chosen = {
            (feature, start, end): score
            for feature, spans in self.spans.items()
            for start, end, score in spans
        }
        features = hidden[rows, starts, 0].long().tolist()
        return torch.tensor(
            [chosen.get(key, -5.0) for key in zip(features, starts.tolist(), ends.tolist(), strict=True)]
        )


def test_evaluate_decodes_nested_and_adjacent_spans_to_the_gold_tags(config, minilm_tokenizer, batches):
    config.task.queries = "conll03"
    words = ["John", "visited", "New", "York", "University", "in", "Paris", "Berlin"]
    gold = ["B-PER", "O", "B-ORG", "I-ORG", "I-ORG", "O", "B-LOC", "B-LOC"]
    config.data.max_length = 64
    frame = pd.DataFrame({"tokens": [words], "tags": [gold]})
    task = MrcNer()
    features = task.encode(frame, minilm_tokenizer, config, TAGS)
    types = ["LOC", "ORG", "PER"]

    def tokens(feature: int, first: int, last: int) -> tuple[int, int]:
        word_ids = features[feature]["word_ids"]
        return word_ids.index(first), len(word_ids) - 1 - word_ids[::-1].index(last)

    spans = {
        0: [
            (*tokens(0, 2, 3), 2.0),
            (*tokens(0, 6, 6), 3.0),
            (*tokens(0, 7, 7), 3.0),
            (*tokens(0, 6, 7), 0.5),
        ],
        1: [(*tokens(1, 2, 4), 4.0)],
        2: [(*tokens(2, 0, 0), 1.0)],
    }
    keys = [tuple(features[i]["input_ids"]) for i in range(len(features))]
    oracle = SpanOracle(keys, spans, types)
    result = task.evaluate(oracle, batches(task, features, size=2), features, frame, TAGS)
    assert result.predictions[0]["predicted"] == gold
    assert result.metrics["f1"] == pytest.approx(f1_score([gold], [gold])) == 1.0
    assert len(result.predictions[0]["spans"]) == 6  # every candidate, the nested LOC in ORG included
    assert task.degenerate(result, TAGS) is None


def test_a_model_that_finds_no_entity_is_degenerate(config, minilm_tokenizer, batches):
    frame = pd.DataFrame({"tokens": [["Ann", "left", "Rome"]], "tags": [["B-PER", "O", "B-LOC"]]})
    task = MrcNer()
    features = task.encode(frame, minilm_tokenizer, config, TAGS)
    keys = [tuple(features[i]["input_ids"]) for i in range(len(features))]
    result = task.evaluate(
        SpanOracle(keys, {}, ["LOC", "ORG", "PER"]), batches(task, features), features, frame, TAGS
    )
    assert result.metrics["f1"] == 0.0
    assert task.degenerate(result, TAGS) == "predicts no entity at its best evaluation"


def test_class_counts_are_binary_boundary_decisions(config, minilm_tokenizer):
    frame = pd.DataFrame(
        {"tokens": [["Ann", "Lee", "left", "Rome"]], "tags": [["B-PER", "I-PER", "O", "B-LOC"]]}
    )
    task = MrcNer()
    features = task.encode(frame, minilm_tokenizer, config, TAGS)
    # 3 types x 4 words x (start, end) = 24 decisions; PER: 1 start + 1 end, LOC: 1 + 1
    assert task.class_counts(features, TAGS) == [20, 4]


def test_a_query_longer_than_the_window_is_a_config_error(config, minilm_tokenizer):
    config.data.max_length = 8
    config.task.queries = {"LOC": "where " * 10, "ORG": "o", "PER": "p"}
    frame = pd.DataFrame({"tokens": [["Rome"]], "tags": [["B-LOC"]]})
    with pytest.raises(ConfigError, match="query of 'LOC' leaves no room"):
        MrcNer().encode(frame, minilm_tokenizer, config, TAGS)


def _mrc_object(qas_id: str, context: str, label: str, starts: list[int], ends: list[int]) -> dict:
    return {
        "context": context,
        "entity_label": label,
        "qas_id": qas_id,
        "query": "unused: mrc_ner writes its own",
        "start_position": starts,
        "end_position": ends,
        "span_position": [f"{s};{e}" for s, e in zip(starts, ends, strict=True)],
        "impossible": not starts,
    }


def test_the_official_mrc_ner_json_layout_reads_as_tagged_sentences(tmp_path):
    sentence = "EU rejects German call to boycott British lamb ."
    objects = [
        _mrc_object("0.1", sentence, "ORG", [0], [0]),
        _mrc_object("0.2", sentence, "MISC", [2, 6], [2, 6]),
        _mrc_object("0.3", sentence, "PER", [], []),
        _mrc_object("1.1", "Peter Blackburn", "PER", [0], [1]),
    ]
    path = tmp_path / "mrc-ner.dev"
    path.write_text(json.dumps(objects), encoding="utf-8")
    frame = read_split_file(path, "tagging", format="mrc_ner")
    assert frame["tokens"].tolist() == [sentence.split(), ["Peter", "Blackburn"]]
    assert frame["tags"].tolist() == [
        ["B-ORG", "O", "B-MISC", "O", "O", "O", "B-MISC", "O", "O"],
        ["B-PER", "I-PER"],
    ]
    objects.append(_mrc_object("1.2", "Peter Blackburn", "LOC", [1], [1]))
    path.write_text(json.dumps(objects), encoding="utf-8")
    with pytest.raises(
        DataError, match=r"object 5 \(qas_id '1.2'\): entity \[1, 1\] \(LOC\) overlaps another"
    ):
        read_split_file(path, "tagging", format="mrc_ner")
    path.write_text(json.dumps([_mrc_object("0.1", "a b", "ORG", [1], [2])]), encoding="utf-8")
    with pytest.raises(DataError, match=r"entity \[1, 2\] is outside its 2 words"):
        read_split_file(path, "tagging", format="mrc_ner")
