"""The end of a finished trial: its test split scored once, and its decision threshold and calibration.

Chosen on dev, judged on held-out data: the trial's reported state (the best dev evaluation, whose weights
the result keeps) is scored once on `data.splits.test`, giving `test_<metric>` beside `best_dev_<metric>`.
Nothing selects on a test metric: the loop's patience, a sweep's racing and its winner read dev only.

For a binary classifier (prediction records with `probability`, P(positive)), the threshold on P(positive)
that maximises F1 on the best dev predictions (`threshold`) and the F1 there (`best_dev_f1_tuned`, optimistic:
tuned and scored on the same split), then the test F1 at that dev threshold (`test_f1_tuned`); and the
expected calibration error of the dev and test probabilities (`best_dev_ece`, `test_ece`; for a multi-class
classifier, of the predicted class's probability). Token tagging and span extraction have no such metrics
(docs/tasks.md says why).

A failure here (the test split cannot be scored) is recorded on the result (`held_out_error`) and does not
undo the trial: its dev record is complete.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dicelab.config import TrainConfig
from dicelab.errors import first_line
from dicelab.tasks._batching import LengthOrderedBatches
from dicelab.tasks.base import EvalResult, Task
from dicelab.tasks.metrics import expected_calibration_error, f1_at_threshold, tuned_threshold
from dicelab.tracking import conventions as names
from dicelab.training.inputs import TrialInputs
from dicelab.training.reporter import TrialResult
from dicelab.training.runtime import autocast


def score_held_out(
    task: Task,
    model: torch.nn.Module,
    inputs: TrialInputs,
    train: TrainConfig,
    device: torch.device,
    precision: str,
    result: TrialResult,
) -> None:
    """Fill `result.held_out_metrics` (and `test_eval_result`) for a trial that finished with a best state.

    `model` is the trial's model: the best weights are loaded into it (it is not trained any more)."""
    best = result.best_eval_result
    if best is None or result.best_model_state is None:
        return
    test: EvalResult | None = None
    metrics: dict[str, float] = {}
    try:
        if inputs.test_features is not None and inputs.test_frame is not None:
            model.load_state_dict(result.best_model_state)
            test = evaluate_split(
                task, model, inputs.test_features, inputs.test_frame, inputs, train, device, precision
            )
            metrics.update({names.test_metric(key): value for key, value in test.metrics.items()})
        metrics.update(
            decision_metrics(best.predictions, test.predictions if test else None, inputs.label_names)
        )
    except Exception as error:  # recorded on the run, never lost; the trial's dev record stands
        result.held_out_error = first_line(error, with_type=True)
        return
    result.held_out_metrics = metrics
    result.test_eval_result = test


def evaluate_split(
    task: Task,
    model: torch.nn.Module,
    features: Any,
    frame: Any,
    inputs: TrialInputs,
    train: TrainConfig,
    device: torch.device,
    precision: str,
) -> EvalResult:
    """The task's evaluation of `model` on one split, as the loop evaluates dev (length order, no grad)."""
    model.eval()
    batches = LengthOrderedBatches(features, task.collate, train.eval_batch_size, device.type == "cuda")
    with torch.inference_mode(), autocast(device, precision):
        return task.evaluate(model, batches, features, frame, inputs.label_names)


def decision_metrics(
    dev: list[dict[str, Any]], test: list[dict[str, Any]] | None, label_names: list[str]
) -> dict[str, float]:
    """threshold, best_dev_f1_tuned, test_f1_tuned, best_dev_ece, test_ece of classification predictions
    (records with `label`, `prediction`, `probability`); {} for records without probabilities."""
    dev_scores = classifier_scores(dev, label_names)
    if dev_scores is None:
        return {}
    test_scores = classifier_scores(test, label_names) if test is not None else None
    metrics = {names.best_metric(ECE): expected_calibration_error(*dev_scores.calibration)}
    if test_scores is not None:
        metrics[names.test_metric(ECE)] = expected_calibration_error(*test_scores.calibration)
    if dev_scores.binary:
        threshold = tuned_threshold(dev_scores.gold, dev_scores.probability)
        metrics[THRESHOLD] = threshold
        metrics[names.best_metric(F1_TUNED)] = f1_at_threshold(
            dev_scores.gold, dev_scores.probability, threshold
        )
        if test_scores is not None:
            metrics[names.test_metric(F1_TUNED)] = f1_at_threshold(
                test_scores.gold, test_scores.probability, threshold
            )
    return metrics


THRESHOLD, F1_TUNED, ECE = names.THRESHOLD_METRIC, names.F1_TUNED, names.ECE


class ClassifierScores:
    """A classifier's predictions as arrays: for a binary one, gold (1 = positive) and P(positive); for a
    multi-class one, whether each prediction is right and its probability (top-label calibration)."""

    def __init__(self, gold: np.ndarray, probability: np.ndarray, binary: bool):
        self.gold, self.probability, self.binary = gold, probability, binary

    @property
    def calibration(self) -> tuple[np.ndarray, np.ndarray]:
        return self.gold, self.probability


def classifier_scores(records: list[dict[str, Any]], label_names: list[str]) -> ClassifierScores | None:
    """None unless every record has a `probability` and a gold `label` (classification with gold labels)."""
    if not records or not all("probability" in r and "label" in r for r in records):
        return None
    probability = np.array([float(r["probability"]) for r in records])
    if len(label_names) == 2:  # the positive class is last, and `probability` is P(positive)
        gold = np.array([str(r["label"]) == label_names[-1] for r in records], dtype=np.int64)
        return ClassifierScores(gold, probability, binary=True)
    right = np.array([str(r["label"]) == str(r["prediction"]) for r in records], dtype=np.int64)
    return ClassifierScores(right, probability, binary=False)
