"""Metrics against hand-computed cases: classification, seqeval span F1, SQuAD EM / F1."""

from __future__ import annotations

import numpy as np
import pytest

from dicelab.tasks.metrics import (
    classification_metrics,
    exact_match,
    normalize_answer,
    squad_metrics,
    tagging_metrics,
    token_f1,
)


def test_binary_scores_are_those_of_the_positive_class():
    gold = [1, 1, 1, 0, 0, 0, 0, 1]
    predicted = [1, 0, 1, 1, 0, 0, 0, 0]  # tp 2, fp 1, fn 2, tn 3
    metrics, per_class = classification_metrics(gold, predicted, ["no", "yes"])
    assert metrics == pytest.approx({"precision": 2 / 3, "recall": 1 / 2, "f1": 4 / 7, "accuracy": 5 / 8})
    # The negative class as positive: tp 3, fp 2, fn 1.
    assert per_class["no"] == pytest.approx({"precision": 3 / 5, "recall": 3 / 4, "f1": 2 / 3, "support": 4})
    assert per_class["yes"]["support"] == 4


def test_binary_zero_division_gives_zero():
    nothing_predicted, _ = classification_metrics([1, 0, 1], [0, 0, 0], ["0", "1"])
    assert nothing_predicted == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": pytest.approx(1 / 3)}
    no_positives, _ = classification_metrics([0, 0], [0, 0], ["0", "1"])
    assert no_positives == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": 1.0}


def test_no_examples_scores_zero():
    binary, per_class = classification_metrics([], [], ["0", "1"])
    assert binary == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": 0.0}
    assert per_class["1"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    assert classification_metrics([], [], ["a", "b", "c"])[0] == {"accuracy": 0.0, "macro_f1": 0.0}


def test_multiclass_accuracy_and_macro_f1():
    gold = [0, 1, 2, 2, 1, 0]
    predicted = [0, 2, 2, 2, 1, 1]
    metrics, per_class = classification_metrics(gold, predicted, ["a", "b", "c"])
    # a: P 1, R 1/2, F1 2/3; b: P 1/2, R 1/2, F1 1/2; c: P 2/3, R 1, F1 4/5.
    assert metrics == pytest.approx({"accuracy": 4 / 6, "macro_f1": (2 / 3 + 1 / 2 + 4 / 5) / 3})
    assert per_class["c"] == pytest.approx({"precision": 2 / 3, "recall": 1.0, "f1": 0.8, "support": 2})


def test_macro_f1_averages_over_classes_present_in_gold_or_predictions():
    metrics, per_class = classification_metrics([0, 1, 2], [0, 1, 1], ["a", "b", "c", "d"])
    # a: 1, b: 2/3, c: 0 (gold only), d: absent from both, left out of the mean.
    assert metrics["macro_f1"] == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert per_class["d"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}


def test_tagging_scores_entities_not_tokens():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-LOC", "I-LOC"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["O", "B-LOC", "O"]]
    # gold entities: PER, LOC, LOC(2 tokens); predicted: PER (right), ORG (wrong), LOC(1 token, wrong span).
    metrics, per_class = tagging_metrics(gold, predicted)
    assert metrics == pytest.approx({"precision": 1 / 3, "recall": 1 / 3, "f1": 1 / 3})
    assert per_class["PER"] == pytest.approx({"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1})
    assert per_class["LOC"] == pytest.approx({"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 2})
    assert per_class["ORG"]["support"] == 0


def test_tagging_iob2_edge_cases_follow_conlleval():
    # An I- tag after O starts an entity (conlleval, seqeval default mode): it matches a gold B- I- entity.
    metrics, _ = tagging_metrics([["B-LOC", "I-LOC", "O"]], [["I-LOC", "I-LOC", "O"]])
    assert metrics["f1"] == 1.0
    # B- B- is two one-token entities, not the gold two-token one.
    metrics, _ = tagging_metrics([["B-LOC", "I-LOC"]], [["B-LOC", "B-LOC"]])
    assert metrics == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    # A type change inside an entity ends it.
    metrics, _ = tagging_metrics([["B-LOC", "I-LOC"]], [["B-LOC", "I-PER"]])
    assert metrics["precision"] == 0.0
    # No entities predicted or present: zero, not an error.
    metrics, per_class = tagging_metrics([["O", "O"]], [["O", "O"]])
    assert metrics == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert per_class == {}


def test_squad_normalisation():
    assert normalize_answer("The  Quick, brown-fox!") == "quick brownfox"
    assert normalize_answer("  An apple\tand A pear ") == "apple and pear"
    assert normalize_answer("theory") == "theory"  # articles only as whole words


def test_squad_exact_match_and_f1():
    assert exact_match("the Cat.", ["a cat"]) == 1.0
    assert exact_match("cat sat", ["cat"]) == 0.0
    # prediction {big, cat, sat} vs gold {cat, sat, down}: 2 common of 3 and 3 -> F1 2/3.
    assert token_f1("the big cat sat", ["cat sat down"]) == pytest.approx(2 / 3)
    assert token_f1("the big cat sat", ["dog", "big cat sat"]) == 1.0  # best gold answer
    assert token_f1("cat cat", ["cat"]) == pytest.approx(2 * (1 / 2) * 1 / (1 / 2 + 1))  # counts, not sets


def test_squad_no_answer_cases():
    assert exact_match("", []) == 1.0 and token_f1("", []) == 1.0
    assert exact_match("something", []) == 0.0 and token_f1("something", []) == 0.0
    assert token_f1("", ["an answer"]) == 0.0
    assert token_f1("the", ["a"]) == 1.0  # both normalise to nothing


def test_squad_metrics_split_answerable_and_unanswerable():
    predictions = ["paris", "", "big cat", "x"]
    gold = [["Paris"], [], ["cat"], []]
    metrics = squad_metrics(predictions, gold, with_negative=True)
    assert metrics == pytest.approx(
        {
            "em": 2 / 4,
            "f1": (1 + 1 + 2 / 3 + 0) / 4,
            "has_ans_em": 1 / 2,
            "has_ans_f1": (1 + 2 / 3) / 2,
            "no_ans_em": 1 / 2,
            "no_ans_f1": 1 / 2,
        }
    )
    assert set(squad_metrics(predictions, gold, with_negative=False)) == {"em", "f1"}
    assert set(squad_metrics(["a"], [["a"]], with_negative=True)) == {"em", "f1", "has_ans_em", "has_ans_f1"}


def test_squad_gold_answers_that_normalise_to_nothing_do_not_count():
    # the official SQuAD 2.0 script drops them: "The" alone leaves "Paris" as the only gold answer
    assert exact_match("the", ["The", "Paris"]) == 0.0
    assert exact_match("Paris", ["The", "Paris"]) == 1.0
    assert exact_match("", ["a"]) == 1.0  # only empty golds: scored as unanswerable


def test_squad_1_1_scoring_follows_the_v1_1_script():
    # evaluate-v1.1.py keeps gold answers that normalise to nothing, and scores F1 0 without a common token
    assert exact_match("the", ["The", "Paris"], squad_v2=False) == 1.0
    assert token_f1("the", ["a"], squad_v2=False) == 0.0
    assert token_f1("the big cat sat", ["cat sat down"], squad_v2=False) == pytest.approx(2 / 3)
    metrics = squad_metrics(["the", "paris"], [["The", "Paris"], ["Paris"]], with_negative=False)
    assert metrics == pytest.approx({"em": 1.0, "f1": 0.5})  # F1: 0 for "the" vs "The", 1 for "paris"


def test_tuned_threshold_maximises_f1_as_a_scan_of_every_threshold_does():
    from sklearn.metrics import f1_score

    from dicelab.tasks.metrics import f1_at_threshold, tuned_threshold

    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 300)
    probability = np.clip(0.35 * gold + rng.uniform(0, 0.7, 300), 0, 1).round(3)
    threshold = tuned_threshold(gold, probability)
    scanned = {t: f1_score(gold, probability >= t) for t in np.unique(probability)}
    best = max(scanned.values())
    assert f1_at_threshold(gold, probability, threshold) == pytest.approx(best)
    assert threshold == min(t for t, f1 in scanned.items() if f1 == pytest.approx(best))
    assert f1_at_threshold(gold, probability, 0.5) == pytest.approx(f1_score(gold, probability >= 0.5))
    assert tuned_threshold(np.zeros(4, int), np.array([0.1, 0.9, 0.4, 0.6])) == 0.5


def test_expected_calibration_error_weights_the_bins_of_calibration_curve():
    from sklearn.calibration import calibration_curve

    from dicelab.tasks.metrics import expected_calibration_error, reliability_bins

    rng = np.random.default_rng(1)
    probability = rng.uniform(0, 1, 500).round(2)  # many on the bin edges (0.2, 0.4, ...)
    outcome = (rng.uniform(0, 1, 500) < probability**2).astype(int)
    observed, predicted, counts = reliability_bins(outcome, probability, bins=10)
    curve_true, curve_pred = calibration_curve(outcome, probability, n_bins=10)
    np.testing.assert_allclose(observed, curve_true)
    np.testing.assert_allclose(predicted, curve_pred)
    # the counts belong to those bins: each bin's mean probability, recomputed from the counts, matches
    order = np.argsort(probability, kind="stable")
    bounds = np.cumsum(counts)[:-1]
    recomputed = [part.mean() for part in np.split(probability[order], bounds)]
    np.testing.assert_allclose(recomputed, curve_pred)
    assert counts.sum() == 500
    ece = expected_calibration_error(outcome, probability, bins=10)
    assert ece == pytest.approx(np.sum(counts * np.abs(curve_true - curve_pred)) / 500)
    assert expected_calibration_error([1, 0, 1, 0], [1.0, 0.0, 1.0, 0.0]) == 0.0
    assert expected_calibration_error([1, 1, 1, 1], [0.5, 0.5, 0.5, 0.5]) == pytest.approx(0.5)
