"""Each trial's result.json is appended in its folder in the sweep's storage, where Tune reads it back, and
nothing is written to the driver's staging copy that Tune uploads at every save of its experiment state."""

from __future__ import annotations

import json
import pickle
from types import SimpleNamespace

import numpy as np
import pandas as pd
from ray.tune.logger import LoggerCallback
from tests.sweeps.test_sweep_space import plan_of

from dicelab.sweeps import tuning
from dicelab.sweeps.result_log import RESULT_FILE, ResultLog


def test_results_are_appended_in_the_trials_storage_folder_and_not_in_its_staging_copy(tmp_path):
    storage, staging = tmp_path / "storage" / "t1", tmp_path / "driver_artifacts" / "t1"
    trial = SimpleNamespace(trial_id="t1", path=str(storage), local_path=str(staging))
    log = ResultLog()
    log.on_trial_result(1, [], trial, {"dev_f1": np.float32(0.5), "step": np.int64(1), "trial_id": "t1"})
    again = pickle.loads(pickle.dumps(log))  # Tune pickles its callbacks with the experiment (--resume)
    again.on_trial_result(2, [], trial, {"dev_f1": float("nan"), "step": 2, "trial_id": "t1"})
    lines = (storage / RESULT_FILE).read_text().splitlines()
    # read as Tune's ExperimentAnalysis reads it (json lines, then pandas.json_normalize)
    frame = pd.json_normalize([json.loads(line) for line in lines], sep="/")
    assert frame["step"].tolist() == [1, 2] and frame["dev_f1"].iloc[0] == 0.5
    assert frame["dev_f1"].isna().tolist() == [False, True]
    assert not staging.exists()


def test_a_sweep_logs_its_results_with_it_and_with_none_of_tunes_loggers(tmp_path):
    plan = plan_of({"space": {"train.learning_rate": {"grid": [1e-3, 1e-4]}}})
    callbacks = tuning.run_config(plan, tmp_path / "sweep", []).callbacks
    assert [type(callback) for callback in callbacks if isinstance(callback, LoggerCallback)] == [ResultLog]
