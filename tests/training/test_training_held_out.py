"""The end of a finished trial: the test split scored once with the best state, the dev-tuned threshold and
calibration, recorded in MLflow beside best_dev_*."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from mlflow import MlflowClient
from sklearn.metrics import f1_score

from dicelab.tasks import TASKS
from dicelab.tasks.metrics import expected_calibration_error, f1_at_threshold, tuned_threshold
from dicelab.tracking import conventions as names
from dicelab.training import run_trial
from dicelab.training.held_out import decision_metrics, evaluate_split
from dicelab.training.reporters import MlflowReporter

# dev carved from the synthetic train split, the synthetic dev split as the test
CARVED = "data.splits={train: train, dev: {carve_from: train, fraction: 0.25}, test: dev}"


def test_a_trial_with_a_test_split_logs_test_metrics_of_its_best_state(
    store, tmp_path, make_config, inputs_for
):
    config = make_config("pairs", CARVED, "train.eval_every_steps=3", "train.max_steps=9", "loss.name=dsc")
    inputs = inputs_for(config)
    assert (len(inputs.train_features), len(inputs.dev_features), len(inputs.test_features)) == (120, 40, 48)
    reporter = MlflowReporter(store, "held-out")
    result = run_trial(config, reporter, inputs=inputs)

    # the test split, scored again with the best weights, gives the logged numbers
    task = TASKS.get("pair_classification")()
    model = task.build_model(config, inputs.label_names, inputs.tokenizer)
    model.load_state_dict(result.best_model_state)
    import torch

    again = evaluate_split(
        task,
        model,
        inputs.test_features,
        inputs.test_frame,
        inputs,
        config.train,
        torch.device("cpu"),
        "fp32",
    )
    run = MlflowClient(store).get_run(reporter.run_id)
    logged = run.data.metrics
    for key, value in again.metrics.items():
        assert logged[f"test_{key}"] == pytest.approx(value), key
    assert {
        "best_dev_f1",
        "test_f1",
        "threshold",
        "best_dev_f1_tuned",
        "test_f1_tuned",
        "best_dev_ece",
        "test_ece",
    } <= set(logged)
    # the threshold is tuned on the best dev predictions and applied to test
    dev = result.best_eval_result.predictions
    gold = np.array([r["label"] == "1" for r in dev], dtype=int)
    probability = np.array([r["probability"] for r in dev])
    assert logged["threshold"] == pytest.approx(tuned_threshold(gold, probability))
    assert logged["best_dev_f1_tuned"] >= logged["best_dev_f1"] - 1e-9  # 0.5 is one of the thresholds tried
    local = Path(MlflowClient(store).download_artifacts(run.info.run_id, "predictions", str(tmp_path)))
    test = [json.loads(line) for line in (local / "test.jsonl").read_text().splitlines()]
    test_gold = np.array([r["label"] == "1" for r in test], dtype=int)
    test_probability = np.array([r["probability"] for r in test])
    assert logged["test_f1_tuned"] == pytest.approx(
        f1_at_threshold(test_gold, test_probability, logged["threshold"])
    )
    assert logged["test_ece"] == pytest.approx(expected_calibration_error(test_gold, test_probability))
    # nothing selected on test: the dev histories hold dev only
    history_keys = {key for key in logged if key.startswith(names.DEV_PREFIX)}
    assert all(not key.startswith("dev_test") for key in history_keys)


def test_decision_metrics_of_binary_multiclass_and_other_records():
    dev = [
        {"label": "1", "prediction": "1", "probability": 0.9},
        {"label": "0", "prediction": "0", "probability": 0.4},
        {"label": "1", "prediction": "0", "probability": 0.45},
        {"label": "0", "prediction": "0", "probability": 0.1},
    ]
    metrics = decision_metrics(dev, None, ["0", "1"])
    assert metrics["threshold"] == 0.45 and metrics["best_dev_f1_tuned"] == 1.0
    assert f1_score([1, 0, 1, 0], [1, 0, 0, 0]) < metrics["best_dev_f1_tuned"]
    assert "test_f1_tuned" not in metrics and "test_ece" not in metrics
    with_test = decision_metrics(dev, dev[:2], ["0", "1"])
    assert with_test["test_f1_tuned"] == 1.0 and with_test["test_ece"] == pytest.approx(
        expected_calibration_error([1, 0], [0.9, 0.4])
    )
    three = [
        {"label": "a", "prediction": "a", "probability": 0.8},
        {"label": "b", "prediction": "c", "probability": 0.6},
    ]
    multi = decision_metrics(three, None, ["a", "b", "c"])
    assert set(multi) == {"best_dev_ece"}  # top-label calibration; no single threshold
    assert multi["best_dev_ece"] == pytest.approx(expected_calibration_error([1, 0], [0.8, 0.6]))
    assert decision_metrics([{"id": "q1", "prediction": "an answer"}], None, []) == {}
