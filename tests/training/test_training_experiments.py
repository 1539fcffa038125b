"""The trial configs in experiments/trials/ validate and run (cut down to a few steps here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dicelab.experiment import load_experiment
from dicelab.tracking import conventions as names
from dicelab.training import run_trial

ROOT = Path(__file__).resolve().parents[2]
TRIALS = sorted((ROOT / "experiments" / "trials").glob("*.yaml"))
SHRINK = ["train.max_steps=2", "train.eval_batch_size=32", "train.num_threads=1"]
SYNTHETIC_SHRINK = ["data.synthetic.n_train=64", "data.synthetic.n_dev=32"]
REAL_SHRINK = ["data.max_train_examples=64", "data.max_dev_examples=32"]


def test_there_is_a_trial_config_per_task_family_and_one_for_mrpc():
    assert {path.name for path in TRIALS} >= {
        "pairs-synthetic.yaml",
        "tagging-synthetic.yaml",
        "spans-synthetic.yaml",
        "mrpc-minilm.yaml",
    }


@pytest.mark.parametrize("path", TRIALS, ids=[path.stem for path in TRIALS])
def test_trial_config_runs(path, cache_dir, monkeypatch):
    monkeypatch.chdir(ROOT)  # data paths are relative to the project root
    config = load_experiment(path)
    shrink = SYNTHETIC_SHRINK if config.data.source.startswith("synthetic") else REAL_SHRINK
    if config.data.source == "local" and not Path(config.data.path).is_dir():
        pytest.skip(f"{config.data.path} is absent (real data is only in development and CI checkouts)")
    config = load_experiment(path, [*SHRINK, *shrink, f"data.cache_dir={cache_dir}"])
    result = run_trial(config)
    assert result.outcome == names.COMPLETED and result.steps == 2
    assert config.train.metric in result.final_metrics
