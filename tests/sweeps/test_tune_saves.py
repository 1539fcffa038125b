"""Tune's experiment-state saves and the state keeper's copies at scale: their period grows with the sweep's
planned trials, so their number stays flat and their cost (each reads or writes every trial) linear."""

from __future__ import annotations

import json
import os
import pickle
import time

from tests.sweeps.test_sweep_space import plan_of

from dicelab.sweeps import tuning
from dicelab.sweeps.tune_storage import COPY_EVERY_S, LAST_GOOD, StateKeeper


def test_the_save_period_is_a_second_for_small_sweeps_and_proportional_above():
    assert tuning.experiment_save_period_s(1) == tuning.experiment_save_period_s(20) == 1.0
    assert tuning.experiment_save_period_s(100) == 5.0
    assert tuning.experiment_save_period_s(1000) == 50.0
    # a sweep's length grows with its trials: saves per sweep stay flat from 20 trials on
    assert 1000 / tuning.experiment_save_period_s(1000) == 100 / tuning.experiment_save_period_s(100)


def test_the_period_is_set_from_the_plan_for_tune_to_read(monkeypatch):
    monkeypatch.setenv(tuning.SAVE_PERIOD_ENV, "1")  # what ray_adapter.quiet_tune_driver sets first
    space = {"loss.name": {"grid": ["focal"]}, "loss.gamma": {"grid": [0.1 * i for i in range(50)]}}
    plan = plan_of({"space": space, "racing": {"min_seeds": 2, "max_seeds": 4}})
    tuning.set_experiment_save_period(plan)
    assert plan.num_trials == 200 and os.environ[tuning.SAVE_PERIOD_ENV] == "10"


def state_dir(tmp_path):
    (tmp_path / "experiment_state-x.json").write_text(json.dumps({"trial_data": []}))
    return tmp_path


def test_the_keeper_copies_at_most_once_per_its_period_and_keeps_it_across_a_resume(tmp_path):
    directory = state_dir(tmp_path)
    keeper = StateKeeper(directory, "sweep.yaml", copy_every_s=50.0)
    keeper.on_step_end(0, [])
    copy = directory / LAST_GOOD / "experiment_state-x.json"
    assert copy.exists()
    state = directory / "experiment_state-x.json"
    state.write_text(json.dumps({"trial_data": ["one more"]}))
    os.utime(state, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))  # a later save
    keeper.on_step_end(1, [])  # within its 50 s: not copied again
    assert json.loads(copy.read_text()) == {"trial_data": []}
    restored = pickle.loads(pickle.dumps(keeper))  # Tune pickles its callbacks with the experiment
    assert restored.copy_every_s == 50.0
    small = StateKeeper(directory, "sweep.yaml", copy_every_s=0.1)
    assert small.copy_every_s == COPY_EVERY_S  # never more often than every 2 s
    small.on_step_end(0, [])
    assert json.loads(copy.read_text()) == {"trial_data": ["one more"]}
