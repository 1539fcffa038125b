"""The Python API on a real private local Ray and a SQLite MLflow store: a tiny sweep returns its runs, its
decision, its winner's model and its cost; the exported winner, run again with `dicelab.trial`, reproduces the
winner's best dev metric; a warm-started sweep runs that winner first; errors are exceptions, not exits."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from mlflow import MlflowClient

import dicelab
from dicelab.errors import ConfigError, DicelabError
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

NAME = "api-tiny"
# Balanced synthetic pairs and a one-layer tiny BERT: every trial learns something (no degenerate trial)
# within three short epochs.
TINY: dict[str, Any] = {
    "name": NAME,
    "data": {
        "source": "synthetic_pairs",
        "synthetic": {"n_train": 320, "n_dev": 48, "positive_rate": 0.5},
        "max_length": 32,
    },
    "model": {
        "backbone": "tiny-bert",
        "tiny_bert": {"hidden_size": 64, "num_layers": 1, "num_heads": 2, "intermediate_size": 128},
    },
    "train": {"epochs": 3, "batch_size": 16, "learning_rate": 2.0e-3, "eval_batch_size": 48},
    "tracking": {"log_predictions": False},
    "search": {
        "space": {"loss.name": {"grid": ["ce", "focal"]}},
        "seeds": [1, 2],
        "resources": {"cpu": 1},
        "max_concurrent": 2,
    },
}


@functools.cache
def session_files_dir() -> Path:
    """Ray's session files of every sweep here: a short path, so its socket paths stay under 107
    characters; made when a sweep first needs it, not when the module is collected."""
    return Path(tempfile.mkdtemp(prefix="dl-api-", dir="/tmp"))


@pytest.fixture(scope="module", autouse=True)
def _remove_session_files() -> Iterator[None]:
    yield
    if session_files_dir.cache_info().currsize:
        shutil.rmtree(session_files_dir(), ignore_errors=True)


@contextlib.contextmanager
def working_dir(path: Path) -> Iterator[None]:
    """The sweep's .dicelab/ (Tune results, checkpoints) goes under `path`, Ray's session files to
    session_files_dir()."""
    previous, tmpdir = Path.cwd(), os.environ.get("RAY_TMPDIR")
    os.chdir(path)
    os.environ["RAY_TMPDIR"] = str(session_files_dir())
    try:
        yield
    finally:
        os.chdir(previous)
        if tmpdir is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = tmpdir


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    directory = Path(os.path.realpath(tmp_path_factory.mktemp("api")))
    config = directory / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY, sort_keys=False))
    uri = f"sqlite:///{directory / 'mlflow.db'}"
    lines: list[str] = []
    printed = io.StringIO()
    with working_dir(directory), contextlib.redirect_stdout(printed):
        result = dicelab.sweep(config, tracking_uri=uri, progress=lines.append)
    yield {"result": result, "uri": uri, "dir": directory, "lines": lines, "printed": printed.getvalue()}


def test_a_sweep_returns_its_runs_decision_winner_and_cost(swept):
    result, uri = swept["result"], swept["uri"]
    assert result.exit_code == 0 and not result.interrupted
    assert isinstance(result.runs, pd.DataFrame) and len(result.runs) == 4
    assert set(result.runs["outcome"]) == {names.COMPLETED}
    assert result.decision[0] == "Decision" and any("Best:" in line for line in result.decision)
    assert result.cost["wall_seconds"] > 0 and result.cost["cost/trials"] == 4
    assert swept["printed"] == ""  # nothing printed: the lines went to the progress callback
    assert any(line.startswith("trials: 4 completed") for line in swept["lines"])
    assert "<table>" in result._repr_html_()

    # The winner's model: logged on its trial's run from its checkpointed best state, linked by the parent.
    assert result.winner_model_uri is not None and result.winner_model_uri.startswith("models:/")
    client = MlflowClient(uri)
    assert client.get_run(result.parent_run_id).data.tags["dicelab.winner_model"] == result.winner_model_uri
    winner = client.get_run(result.winner_run_id)
    usable = result.runs[result.runs["degenerate"].isna()]  # a degenerate trial is never averaged in
    best = usable.groupby("loss.name")["best_dev_f1"].mean().idxmax()
    assert winner.data.params["loss.name"] == best
    same_loss = usable[usable["loss.name"] == best]
    assert winner.data.metrics["best_dev_f1"] == same_loss["best_dev_f1"].max()
    assert result.warnings == []


def test_the_winners_model_predicts_with_mlflow_pyfunc(swept):
    import mlflow

    mlflow.set_tracking_uri(swept["uri"])
    model = mlflow.pyfunc.load_model(swept["result"].winner_model_uri)
    frame = pd.DataFrame({"text_a": ["the cat sat", "a dog ran"], "text_b": ["the cat sat", "blue sky"]})
    predicted = model.predict(frame)
    assert len(predicted) == 2


def test_the_exported_winner_reproduces_its_best_dev_metric(swept):
    result, uri = swept["result"], swept["uri"]
    out = swept["dir"] / "best.yaml"
    with working_dir(swept["dir"]):
        text = dicelab.export(NAME, tracking_uri=uri, out=out)
        assert yaml.safe_load(text) == yaml.safe_load(out.read_text())
        lines: list[str] = []
        again = dicelab.trial(out, track=False, progress=lines.append)
    winner = MlflowClient(uri).get_run(result.winner_run_id)
    assert yaml.safe_load(text)["train"]["seed"] == int(winner.data.params["train.seed"])
    assert again.outcome == names.COMPLETED and again.run_id is None and lines
    assert again.best == pytest.approx(winner.data.metrics["best_dev_f1"], abs=1e-6)


def test_a_warm_started_sweep_runs_the_earlier_winner_first(swept):
    directory, uri = swept["dir"], swept["uri"]
    winner = MlflowClient(uri).get_run(swept["result"].winner_run_id)
    search = {
        "algorithm": "random",
        "num_samples": 1,
        "space": {"loss.name": {"choice": ["ce", "focal"]}},
        "seeds": [1],
        "resources": {"cpu": 1},
        "start_from": {"experiment": NAME},
        "save_model": "none",
    }
    config = directory / "warm.yaml"
    config.write_text(yaml.safe_dump({**TINY, "name": "api-warm", "search": search}, sort_keys=False))
    lines: list[str] = []
    with working_dir(directory):
        warm = dicelab.sweep(config, tracking_uri=uri, progress=lines.append)
    assert warm.exit_code == 0 and len(warm.runs) == 2 and warm.winner_model_uri is None
    assert any(line.startswith(f"warm start: 1 configuration(s) of {NAME}") for line in lines)
    first = warm.runs.sort_values("trial_id").iloc[0]
    assert first["loss.name"] == winner.data.params["loss.name"]


def test_errors_are_exceptions_not_exits(tmp_path):
    with pytest.raises(ConfigError, match="trian"):
        dicelab.trial({**TINY, "search": None, "trian": {}})
    with pytest.raises(DicelabError):
        dicelab.sweep(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="retry_failed"):
        dicelab.sweep(tmp_path / "missing.yaml", retry_failed=True)
