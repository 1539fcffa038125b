"""Token tagging: first-sub-word labels, truncation, class counts, evaluation back on words."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from dicelab.errors import DataError
from dicelab.tasks import TASKS, TokenTagging


def test_registered_with_its_family():
    assert TASKS.get("token_tagging") is TokenTagging
    assert (TokenTagging.name, TokenTagging.family, TokenTagging().primary_metric([])) == (
        "token_tagging",
        "tagging",
        "f1",
    )


def test_labels_sit_on_first_sub_words(config, minilm_tokenizer, tags):
    frame = pd.DataFrame(
        {"tokens": [["Xylophonist", "Qwzx", "is", "here"]], "tags": [["B-PER", "B-LOC", "O", "O"]]}
    )
    features = TokenTagging().encode(frame, minilm_tokenizer, config, tags)
    pieces = minilm_tokenizer.convert_ids_to_tokens(features[0]["input_ids"])
    assert pieces[:3] == ["[CLS]", "x", "##yl"]  # both names split into several pieces
    labelled = [
        (piece, label) for piece, label in zip(pieces, features[0]["labels"], strict=True) if label != -100
    ]
    assert labelled == [("x", 3), ("q", 1), ("is", 0), ("here", 0)]
    assert features[0]["labels"][0] == features[0]["labels"][-1] == -100  # [CLS], [SEP]
    word_ids = features[0]["word_ids"]
    assert word_ids[0] == word_ids[-1] == -1 and sorted(set(word_ids[1:-1])) == [0, 1, 2, 3]


def test_class_counts_over_first_sub_words(config, minilm_tokenizer, tagging_frame, tags):
    task = TokenTagging()
    features = task.encode(tagging_frame, minilm_tokenizer, config, tags)
    # O: 2 + 2 + 1, B-LOC: 1 + 1, I-LOC: 1, B-PER: 1 + 1, I-PER: 1
    assert task.class_counts(features, tags) == [5, 2, 1, 2, 1]


def test_collate_pads_labels_with_ignore_index(config, minilm_tokenizer, tagging_frame, tags):
    task = TokenTagging()
    features = task.encode(tagging_frame, minilm_tokenizer, config, tags)
    batch = task.collate([features[0], features[1]])
    short = len(features[1]["input_ids"])
    assert batch["labels"].shape == batch["input_ids"].shape
    assert (batch["labels"][1, short:] == -100).all() and (batch["attention_mask"][1, short:] == 0).all()
    assert "word_ids" not in batch


def test_encode_rejects_bad_rows(config, minilm_tokenizer, tags):
    task = TokenTagging()
    with pytest.raises(DataError, match="row 0 has 2 tokens but 1 tags"):
        task.encode(pd.DataFrame({"tokens": [["a", "b"]], "tags": [["O"]]}), minilm_tokenizer, config, tags)
    with pytest.raises(DataError, match="tag 'B-ORG' in row 0"):
        task.encode(pd.DataFrame({"tokens": [["a"]], "tags": [["B-ORG"]]}), minilm_tokenizer, config, tags)


def oracle_scores(features, tag_ids: list[list[int]], classes: int) -> dict[tuple[int, ...], torch.Tensor]:
    """Per-token scores that put each word's given tag on its first sub-word."""
    scores = {}
    for row, tags in enumerate(tag_ids):
        word_ids = features[row]["word_ids"]
        row_scores = torch.zeros(len(word_ids), classes)
        for position, word in enumerate(word_ids):
            row_scores[position, tags[word] if word != -1 else 0] = 5.0
        scores[tuple(features[row]["input_ids"])] = row_scores
    return scores


def test_evaluate_maps_predictions_back_to_words(
    config, minilm_tokenizer, tagging_frame, tags, oracle, batches
):
    task = TokenTagging()
    features = task.encode(tagging_frame, minilm_tokenizer, config, tags)
    gold = [[tags.index(tag) for tag in row] for row in tagging_frame["tags"]]
    predicted = [list(row) for row in gold]
    predicted[2] = [3, 0, 0]  # "Ann Lee" tagged B-PER O: a wrong span
    result = task.evaluate(
        oracle(oracle_scores(features, predicted, len(tags))),
        batches(task, features),
        features,
        tagging_frame,
        tags,
    )
    # gold entities: PER, LOC, LOC, PER; predicted: PER, LOC, LOC, PER(Ann only).
    assert result.metrics == pytest.approx({"precision": 3 / 4, "recall": 3 / 4, "f1": 3 / 4})
    assert result.per_class["LOC"]["f1"] == 1.0
    assert result.predictions[2] == {
        "tokens": ["Ann", "Lee", "left"],
        "gold": ["B-PER", "I-PER", "O"],
        "predicted": ["B-PER", "O", "O"],
    }


def test_truncated_words_are_predicted_outside(config, minilm_tokenizer, tags, oracle, batches):
    config.data.max_length = 8  # [CLS] + 6 words + [SEP]
    tokens = ["the", "a", "an", "of", "to", "in", "at", "Paris"]
    frame = pd.DataFrame({"tokens": [tokens], "tags": [["O"] * 7 + ["B-LOC"]]})
    task = TokenTagging()
    features = task.encode(frame, minilm_tokenizer, config, tags)
    assert max(features[0]["word_ids"]) == 5
    # Even an oracle cannot find the entity that truncation removed: recall 0, not a crash or a skip.
    model = oracle(oracle_scores(features, [[0] * 7 + [1]], len(tags)))
    result = task.evaluate(model, batches(task, features), features, frame, tags)
    assert result.metrics["recall"] == 0.0
    assert result.predictions[0]["predicted"] == ["O"] * 8
