"""`dicelab submit`: the job's entrypoint and runtime environment (the cluster runs this dicelab)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

import dicelab
from dicelab.errors import ConfigError
from dicelab.sweeps.submit import (
    FORWARDED_ENV,
    JOB_STORAGE,
    SubmitOptions,
    entrypoint,
    runtime_env,
    submit,
)
from dicelab.sweeps.trial_env import TRIAL_ENV

PACKAGE = Path(dicelab.__file__).resolve().parent


def test_entrypoint_runs_the_sweep_on_the_cluster_with_the_same_arguments():
    options = SubmitOptions(
        config="x.yaml",
        address="http://head:8265",
        overrides=["train.epochs=2", "loss.name=focal loss"],
        name="try 2",
        tracking_uri="http://mlflow:5000",
        resume=True,
    )
    words = shlex.split(entrypoint("configs/x.yaml", options, JOB_STORAGE))
    assert words[:7] == ["python", "-m", "dicelab.cli", "sweep", "configs/x.yaml", "--address", "auto"]
    assert words[7:] == [
        "--set",
        "train.epochs=2",
        "--set",
        "loss.name=focal loss",
        "--set",
        f"search.storage={JOB_STORAGE}",
        "--resume",
        "--name",
        "try 2",
        "--tracking-uri",
        "http://mlflow:5000",
    ]
    assert "search.storage" not in entrypoint("x.yaml", options, None)


def test_runtime_env_ships_the_package_and_leaves_out_environments_and_results(tmp_path, monkeypatch):
    for name in [*FORWARDED_ENV, *TRIAL_ENV]:
        monkeypatch.delenv(name, raising=False)
    env = runtime_env(tmp_path)
    assert env["working_dir"] == str(tmp_path)
    assert env["py_modules"] == [str(PACKAGE)]
    assert {".venv", ".git", ".dicelab"} <= set(env["excludes"])
    assert env["env_vars"] == TRIAL_ENV  # the trials' malloc setting, and nothing of this machine's

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    project = runtime_env(PACKAGE.parents[1])  # the repository root: the package is inside it
    assert f"/{PACKAGE.relative_to(PACKAGE.parents[1]).as_posix()}" in project["excludes"]
    assert project["env_vars"] == {**TRIAL_ENV, "MLFLOW_TRACKING_URI": "http://mlflow:5000"}

    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "sweeps")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "secret")
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "")  # set but empty: not forwarded
    assert runtime_env(tmp_path)["env_vars"] == {
        **TRIAL_ENV,
        "MLFLOW_TRACKING_URI": "http://mlflow:5000",
        "MLFLOW_TRACKING_USERNAME": "sweeps",
        "MLFLOW_TRACKING_PASSWORD": "secret",
    }


def test_a_config_outside_the_working_directory_is_refused_before_contacting_the_cluster(tmp_path):
    inside = tmp_path / "project"
    inside.mkdir()
    outside = tmp_path / "sweep.yaml"
    outside.write_text("name: x\nsearch: {}\n")
    with pytest.raises(ConfigError, match="inside the working directory"):
        submit(SubmitOptions(config=str(outside), address="http://127.0.0.1:1", working_dir=str(inside)))


def test_a_set_of_a_swept_key_is_refused_before_contacting_the_cluster(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text("name: x\nsearch: {space: {loss.name: {grid: [ce, dice]}}}\n")
    options = SubmitOptions(
        config=str(config),
        address="http://127.0.0.1:1",
        working_dir=str(tmp_path),
        overrides=["loss.name=dsc"],
    )
    with pytest.raises(ConfigError, match=r"--set loss.name: the search sets it in every trial"):
        submit(options)
