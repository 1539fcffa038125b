"""The degenerate-predictor guard: each task says what a degenerate best evaluation is, and a collapsed trial
is flagged on its result, its MLflow run (dicelab.degenerate) and the console."""

from __future__ import annotations

import io

import pytest
from mlflow import MlflowClient
from rich.console import Console

from dicelab.config import apply_overrides
from dicelab.experiment import experiment_from_dict
from dicelab.tasks import TASKS, EvalResult
from dicelab.tracking import conventions as names
from dicelab.tracking.store import check_tracking
from dicelab.training import run_trial
from dicelab.training.reporter import MultiReporter
from dicelab.training.reporters import ConsoleReporter, MlflowReporter


def test_pair_classification_flags_no_positive_and_single_class():
    task = TASKS.get("pair_classification")()

    def result(*predicted: str) -> EvalResult:
        return EvalResult(metrics={}, predictions=[{"prediction": label} for label in predicted])

    assert (
        task.degenerate(result("0", "0", "0"), ["0", "1"])
        == "predicts no positive (1) at its best evaluation"
    )
    assert (
        task.degenerate(result("1", "1"), ["0", "1"]) == "predicts a single class (1) at its best evaluation"
    )
    assert task.degenerate(result("0", "1"), ["0", "1"]) is None
    three = ["a", "b", "c"]
    assert task.degenerate(result("b", "b"), three) == "predicts a single class (b) at its best evaluation"
    assert task.degenerate(result("a", "c"), three) is None


@pytest.mark.parametrize("task_name", ["token_tagging", "mrc_ner"])
def test_tagging_flags_no_entity_and_a_single_tag(task_name):
    task = TASKS.get(task_name)()

    def result(gold: list[str], predicted: list[str]) -> EvalResult:
        return EvalResult(metrics={}, predictions=[{"gold": gold, "predicted": predicted}])

    none = result(["B-PER", "O"], ["O", "O"])
    assert task.degenerate(none, []) == "predicts no entity at its best evaluation"
    pos = result(["B-NN", "B-VB"], ["B-NN", "B-NN"])  # POS: every word a span, one tag for all
    assert task.degenerate(pos, []) == "predicts a single tag (B-NN) for every word at its best evaluation"
    assert task.degenerate(result(["B-PER", "O"], ["B-LOC", "O"]), []) is None
    assert task.degenerate(result(["O", "O"], ["O", "O"]), []) is None  # nothing to find: not a collapse


def test_span_extraction_flags_no_answer():
    task = TASKS.get("span_extraction")()
    empty = EvalResult(
        metrics={}, predictions=[{"prediction": "", "answers": ["x"]}, {"prediction": "", "answers": []}]
    )
    assert task.degenerate(empty, []) == "predicts no answer at its best evaluation"
    some = EvalResult(metrics={}, predictions=[{"prediction": "x", "answers": ["x"]}])
    assert task.degenerate(some, []) is None


def test_a_collapsed_trial_is_flagged_on_its_run_and_the_console(tmp_path):
    # Per-token dice on tagging at its defaults collapses to "O" everywhere (README, losses): a forced
    # collapse, evaluated once after it (16 steps).
    config = experiment_from_dict(
        apply_overrides(
            {
                "name": "collapse",
                "data": {
                    "source": "synthetic_tagging",
                    "synthetic": {"n_train": 64, "n_dev": 32, "seed": 1},
                    "max_length": 48,
                    "cache_dir": str(tmp_path / "cache"),
                },
                "task": {"name": "token_tagging"},
                "model": {
                    "backbone": "tiny-bert",
                    "tiny_bert": {
                        "hidden_size": 32,
                        "num_layers": 1,
                        "num_heads": 2,
                        "intermediate_size": 64,
                    },
                },
                "loss": {"name": "dsc"},
                "train": {
                    "epochs": 4,
                    "eval_every_steps": 16,
                    "batch_size": 16,
                    "learning_rate": 1e-3,
                    "num_threads": 1,
                },
                "tracking": {"enabled": False},
            },
            [],
        )
    )
    output = io.StringIO()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    check_tracking(uri)  # as `dicelab trial` does before the trial
    mlflow = MlflowReporter(uri, "collapse")
    console = ConsoleReporter(quiet=True, console=Console(file=output, width=200))
    result = run_trial(config, MultiReporter([console, mlflow]))
    assert result.best_metrics["f1"] == 0.0
    assert result.degenerate == "predicts no entity at its best evaluation"
    assert "warning: degenerate trial: predicts no entity at its best evaluation" in output.getvalue()
    tags = MlflowClient(uri).get_run(mlflow.run_id).data.tags
    assert tags[names.DEGENERATE] == "predicts no entity at its best evaluation"
