"""One short trial per task family, tracked in a real SQLite MLflow store with its model saved (shared by
the module's tests: training is what costs)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

from dicelab.config import ExperimentConfig, apply_overrides
from dicelab.experiment import experiment_from_dict
from dicelab.tracking import check_tracking
from dicelab.tracking import conventions as names
from dicelab.training import TrialInputs, TrialResult, prepare_inputs, run_trial
from dicelab.training.reporters import MlflowReporter

TASKS = {
    "pair_classification": ("synthetic_pairs", 64, {}),
    "token_tagging": ("synthetic_tagging", 64, {}),
    "span_extraction": ("synthetic_spans", 128, {"doc_stride": 32}),
    "mrc_ner": ("synthetic_tagging", 64, {}),
}


def trial_config(task: str, cache_dir: Path, *overrides: str) -> ExperimentConfig:
    source, max_length, task_options = TASKS[task]
    raw = {
        "name": f"models-{task}",
        "data": {
            "source": source,
            "synthetic": {"n_train": 96, "n_dev": 32, "seed": 1},
            "max_length": max_length,
            "cache_dir": str(cache_dir),
        },
        "task": {"name": task, **task_options},
        "model": {
            "backbone": "tiny-bert",
            "tiny_bert": {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64},
        },
        "train": {
            "epochs": 1,
            "batch_size": 16,
            "eval_batch_size": 8,  # several length-ordered batches on the dev set
            "learning_rate": 3e-3,
            "num_threads": 1,
            "log_every_steps": 100,
        },
    }
    return experiment_from_dict(apply_overrides(raw, list(overrides)))


@dataclass
class SavedTrial:
    config: ExperimentConfig
    inputs: TrialInputs
    result: TrialResult
    store: str
    logged_predictions: list[dict]  # the trial's predictions/dev.jsonl artifact

    @property
    def run_id(self) -> str:
        assert self.result.run_id is not None
        return self.result.run_id


def run_saved_trial(
    store: str, config: ExperimentConfig, tmp: Path, register: str | None = None
) -> SavedTrial:
    inputs = prepare_inputs(config)
    reporter = MlflowReporter(store, config.name, save_model=True, register=register)
    result = run_trial(config, reporter, inputs=inputs)
    local = MlflowClient(store).download_artifacts(result.run_id, names.PREDICTIONS_ARTIFACT, str(tmp))
    lines = Path(local).read_text(encoding="utf-8").splitlines()
    return SavedTrial(config, inputs, result, store, [json.loads(line) for line in lines])


@pytest.fixture(scope="package")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="package")
def store(workspace: Path) -> str:
    uri = f"sqlite:///{workspace / 'store' / 'mlflow.db'}"
    check_tracking(uri)
    return uri


@pytest.fixture(scope="package")
def saved_trials(workspace: Path, store: str) -> dict[str, SavedTrial]:
    """task name -> a finished trial whose best model was logged on its run."""
    trials = {}
    for task in TASKS:
        config = trial_config(task, workspace / "cache")
        trials[task] = run_saved_trial(store, config, workspace / task)
    return trials


def write_jsonl(path: Path, frame: pd.DataFrame) -> Path:
    """A frame in canonical columns as JSON lines (lists stay lists)."""
    with path.open("w", encoding="utf-8") as stream:
        for record in frame.to_dict(orient="records"):
            stream.write(json.dumps({k: _plain(v) for k, v in record.items()}) + "\n")
    return path


def _plain(value: object) -> object:
    return value.tolist() if hasattr(value, "tolist") else value
