"""Pair classification: features, head shapes, class counts, evaluation records."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import log_loss

from dicelab.errors import DataError
from dicelab.tasks import TASKS, PairClassification


def test_registered_with_its_family():
    assert TASKS.get("pair_classification") is PairClassification
    assert (PairClassification.name, PairClassification.family) == ("pair_classification", "pairs")
    assert PairClassification().primary_metric(["0", "1"]) == "f1"
    assert PairClassification().primary_metric(["a", "b", "c"]) == "accuracy"


def test_encode_pairs(config, minilm_tokenizer, pairs_frame):
    features = PairClassification().encode(pairs_frame, minilm_tokenizer, config, ["0", "1"])
    assert features["labels"] == [1, 0, 0, 1] * 2
    first = minilm_tokenizer.convert_ids_to_tokens(features[0]["input_ids"])
    assert first == [
        "[CLS]",
        "the",
        "cat",
        "sat",
        "on",
        "the",
        "mat",
        "[SEP]",
        "a",
        "cat",
        "sat",
        "on",
        "a",
        "mat",
        "[SEP]",
    ]
    assert features[0]["token_type_ids"] == [0] * 8 + [1] * 7


def test_encode_single_sentences_and_truncation(config, minilm_tokenizer):
    frame = pd.DataFrame(
        {"text_a": ["good film", " ".join(["word"] * 100)], "text_b": [None, None], "label": ["pos", "neg"]}
    )
    features = PairClassification().encode(frame, minilm_tokenizer, config, ["neg", "pos"])
    assert minilm_tokenizer.convert_ids_to_tokens(features[0]["input_ids"]) == [
        "[CLS]",
        "good",
        "film",
        "[SEP]",
    ]
    assert len(features[1]["input_ids"]) == config.data.max_length
    assert features["labels"] == [1, 0]


def test_encode_rejects_bad_rows(config, minilm_tokenizer, pairs_frame):
    task = PairClassification()
    with pytest.raises(DataError, match="label '1' in row 0"):
        task.encode(pairs_frame, minilm_tokenizer, config, ["no", "yes"])
    mixed = pairs_frame.assign(text_b=[None, *pairs_frame["text_b"][1:]])
    with pytest.raises(DataError, match="text_b is missing in row 0"):
        task.encode(mixed, minilm_tokenizer, config, ["0", "1"])


def test_collate_pads_to_the_longest_row(config, minilm_tokenizer, pairs_frame):
    task = PairClassification()
    features = task.encode(pairs_frame, minilm_tokenizer, config, ["0", "1"])
    batch = task.collate([features[0], features[2]])
    lengths = [len(features[0]["input_ids"]), len(features[2]["input_ids"])]
    assert batch["input_ids"].shape == (2, max(lengths))
    assert batch["attention_mask"].sum(1).tolist() == lengths
    assert batch["labels"].tolist() == [1, 0]


def test_class_counts_and_head_shapes(config, tiny_tokenizer, pairs_frame):
    task = PairClassification()
    tokenizer = tiny_tokenizer(list(task.texts(pairs_frame)))
    features = task.encode(pairs_frame, tokenizer, config, ["0", "1"])
    assert task.class_counts(features, ["0", "1"]) == [4, 4]
    batch = task.collate([features[i] for i in range(3)])
    binary = task.build_model(config, ["0", "1"], tokenizer)
    assert binary(batch["input_ids"], batch["attention_mask"]).shape == (3, 1)  # one logit: sigmoid
    five = task.build_model(config, list("abcde"), tokenizer)
    assert five(batch["input_ids"], batch["attention_mask"]).shape == (3, 5)
    assert task.class_counts(features, ["0", "1", "2"]) == [4, 4, 0]


def test_evaluate_binary(config, minilm_tokenizer, pairs_frame, oracle, batches):
    task = PairClassification()
    features = task.encode(pairs_frame, minilm_tokenizer, config, ["0", "1"])
    logits = [2.0, -1.0, 0.5, -3.0] * 2  # gold 1, 0, 0, 1: one false positive, one false negative per 4
    model = oracle({tuple(features[i]["input_ids"]): torch.tensor([z]) for i, z in enumerate(logits)})
    result = task.evaluate(model, batches(task, features, size=3), features, pairs_frame, ["0", "1"])
    probability = 1 / (1 + np.exp(-np.array(logits)))
    gold = np.asarray(features["labels"])
    cross_entropy = log_loss(gold, np.stack([1 - probability, probability], axis=1))
    assert result.metrics == pytest.approx(
        {"f1": 0.5, "precision": 0.5, "recall": 0.5, "accuracy": 0.5, "log_loss": cross_entropy}
    )
    assert result.predictions[0] == {
        "index": 0,
        "label": "1",
        "prediction": "1",
        "probability": pytest.approx(0.880797, abs=1e-6),
    }
    assert result.predictions[2]["prediction"] == "1"
    assert set(result.per_class) == {"0", "1"}


def test_evaluate_multiclass(config, minilm_tokenizer, pairs_frame, oracle, batches):
    task = PairClassification()
    frame = pairs_frame.assign(label=["a", "b", "c", "a"] * 2)
    features = task.encode(frame, minilm_tokenizer, config, ["a", "b", "c"])
    predicted = [0, 1, 1, 0] * 2  # wrong only on the "c" rows
    scores = {tuple(features[i]["input_ids"]): torch.eye(3)[k] * 4 for i, k in enumerate(predicted)}
    result = task.evaluate(oracle(scores), batches(task, features), features, frame, ["a", "b", "c"])
    softmax = torch.softmax(torch.eye(3)[predicted] * 4, dim=-1).numpy()
    cross_entropy = log_loss(np.asarray(features["labels"]), softmax, labels=[0, 1, 2])
    assert result.metrics == pytest.approx(
        {"accuracy": 0.75, "macro_f1": (1 + 2 / 3 + 0) / 3, "log_loss": cross_entropy}
    )
    assert result.predictions[2]["prediction"] == "b"
    assert result.predictions[0]["probability"] == pytest.approx(
        torch.softmax(torch.eye(3)[0] * 4, 0)[0].item()
    )
