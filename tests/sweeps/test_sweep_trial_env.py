"""The trials' environment (glibc malloc with one arena): where it is set, and that a user's value wins."""

from __future__ import annotations

import json
import os

from dicelab.sweeps import trial_env
from dicelab.sweeps.trial_env import TRIAL_ENV


def test_a_local_ray_inherits_the_trial_environment(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "unset below")  # recorded, so the test's change is undone
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    trial_env.prepare_local_ray()
    assert os.environ["MALLOC_ARENA_MAX"] == "1"


def test_a_value_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    monkeypatch.delenv(trial_env.JOB_CONFIG_VAR, raising=False)
    trial_env.prepare_local_ray()
    assert os.environ["MALLOC_ARENA_MAX"] == "4"
    assert trial_env.env_vars() == {"MALLOC_ARENA_MAX": "4"}  # a cluster's workers get it too
    assert trial_env.missing_in_job() == {"MALLOC_ARENA_MAX": "4"}
    assert trial_env.env_vars({"MALLOC_ARENA_MAX": "2"})["MALLOC_ARENA_MAX"] == "2"  # given: the job's


def test_the_settings_are_glibcs_single_arena(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert trial_env.env_vars() == TRIAL_ENV == {"MALLOC_ARENA_MAX": "1"}


def test_a_runtime_env_gets_the_trial_environment_beside_the_given_variables(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert trial_env.env_vars({"MLFLOW_TRACKING_URI": "http://mlflow:5000"}) == {
        "MALLOC_ARENA_MAX": "1",
        "MLFLOW_TRACKING_URI": "http://mlflow:5000",
    }


def test_a_driver_joining_with_auto_adds_only_what_its_job_does_not_set(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv(trial_env.JOB_CONFIG_VAR, raising=False)
    assert trial_env.missing_in_job() == TRIAL_ENV  # not in a Ray job: all of it
    job = {"runtime_env": {"env_vars": {"MALLOC_ARENA_MAX": "1", "MLFLOW_TRACKING_URI": "http://m:5000"}}}
    monkeypatch.setenv(trial_env.JOB_CONFIG_VAR, json.dumps(job))
    assert trial_env.missing_in_job() == {}  # `dicelab submit` set it: Ray refuses the same key twice
    monkeypatch.setenv(trial_env.JOB_CONFIG_VAR, json.dumps({"runtime_env": {"working_dir": "/x"}}))
    assert trial_env.missing_in_job() == TRIAL_ENV  # a job submitted without it


def test_a_driver_joining_a_cluster_gives_its_trials_the_mlflow_login(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.delenv(trial_env.JOB_CONFIG_VAR, raising=False)
    for name in trial_env.MLFLOW_CLIENT_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "s3cret")
    login = trial_env.mlflow_client_env()
    assert login == {
        "MLFLOW_TRACKING_URI": "http://127.0.0.1:5000",
        "MLFLOW_TRACKING_USERNAME": "alice",
        "MLFLOW_TRACKING_PASSWORD": "s3cret",
    }
    assert trial_env.missing_in_job(login) == {**TRIAL_ENV, **login}
    job = {"runtime_env": {"env_vars": {"MALLOC_ARENA_MAX": "1", **login}}}  # `dicelab submit`'s job
    monkeypatch.setenv(trial_env.JOB_CONFIG_VAR, json.dumps(job))
    assert trial_env.missing_in_job(login) == {}
