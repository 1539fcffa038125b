"""What a degenerate predictor is, per kind of prediction: the checks behind each task's `degenerate()`.

A trial whose best evaluation predicts no positive (binary), no entity (tagging), no answer (extractive QA) or
a single class has learnt nothing its metric can rank: it is flagged (dicelab.tracking.conventions.DEGENERATE)
rather than averaged in as a result. Each check returns one line saying what, or None.
"""

from __future__ import annotations

from typing import Any

AT_BEST = "at its best evaluation"


def classification_degeneracy(predictions: list[dict[str, Any]], label_names: list[str]) -> str | None:
    """Binary: no positive predicted (or only positives); multi-class: a single class predicted."""
    predicted = {str(record["prediction"]) for record in predictions}
    if not predictions or len(label_names) < 2:
        return None
    if len(label_names) == 2 and predicted == {label_names[0]}:
        return f"predicts no positive ({label_names[1]}) {AT_BEST}"
    if len(predicted) == 1:
        return f"predicts a single class ({predicted.pop()}) {AT_BEST}"
    return None


def tagging_degeneracy(predictions: list[dict[str, Any]]) -> str | None:
    """No entity predicted in any sentence, or every word given the same tag while the gold has several."""
    predicted = {tag for record in predictions for tag in record["predicted"]}
    gold = {tag for record in predictions for tag in record["gold"]}
    if not predicted or gold <= {"O"}:
        return None
    if predicted == {"O"}:
        return f"predicts no entity {AT_BEST}"
    if len(predicted) == 1 and len(gold) > 1:
        return f"predicts a single tag ({predicted.pop()}) for every word {AT_BEST}"
    return None


def answer_degeneracy(predictions: list[dict[str, Any]]) -> str | None:
    """Extractive QA: no question answered (every prediction empty) while some have an answer."""
    if any(record["answers"] for record in predictions) and all(
        not record["prediction"] for record in predictions
    ):
        return f"predicts no answer {AT_BEST}"
    return None
