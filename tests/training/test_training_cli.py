"""`dicelab trial`: exit codes, --json, tracking checked before training."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from mlflow import MlflowClient
from tests.ports import free_port

from dicelab.cli import main
from dicelab.tracking import conventions as names


@pytest.fixture
def trial(tmp_path, cache_dir, config_dict, monkeypatch, capsys):
    """trial(*args, family="pairs") -> (exit code, stdout, stderr) of `dicelab trial CONFIG *args`."""
    monkeypatch.setattr(sys, "argv", sys.argv[:1])  # main() rewrites it

    def run(*args: str, family: str = "pairs", cache: Path = cache_dir) -> tuple[int, str, str]:
        config = config_dict(family, cache)
        config["train"]["max_steps"] = 4
        path = tmp_path / f"{family}.yaml"
        path.write_text(yaml.safe_dump(config))
        code = main(["trial", str(path), *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_json_is_the_last_line_and_names_the_mlflow_run(trial, store):
    code, out, err = trial("--tracking-uri", store, "--json", "--set", "loss.name=dice")
    assert code == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["outcome"] == names.COMPLETED and summary["steps"] == 4 and summary["metric"] == "f1"
    assert {"dev_f1", "dev_accuracy", "best_dev_f1"} <= set(summary)
    run = MlflowClient(store).get_run(summary["run_id"])
    assert run.data.params["loss.name"] == "dice"
    assert run.data.metrics["dev_f1"] == pytest.approx(summary["dev_f1"])
    assert "dev metrics" in out and summary["run_id"] in out and "dicelab ui --tracking-uri" in out
    assert "step 2/4  loss " in err and "samples/s" in err  # progress lines, stderr not being a terminal
    assert "step 4 (epoch" in err  # the evaluation line


def test_quiet_untracked_trial_prints_only_the_result(trial):
    code, out, err = trial("--no-tracking", "--quiet", "--json")
    # --quiet keeps one line on stderr: the warning a degenerate trial (this tiny one predicts one class) gets
    assert code == 0 and all(line.startswith("warning: degenerate trial: ") for line in err.splitlines())
    assert len(err.splitlines()) <= 1
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["run_id"] is None and summary["outcome"] == names.COMPLETED
    # the JSON says it too, for scripts that read only stdout
    assert bool(summary["degenerate"]) == bool(err) and (not err or summary["degenerate"] in err)


def test_an_unknown_key_is_a_config_error(trial):
    code, out, err = trial("--no-tracking", "--set", "train.learning_rte=1e-3")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("dicelab trial: error: ")
    assert "'train.learning_rte' is not allowed" in err


def test_a_non_finite_trial_exits_1_with_its_reason(trial, store):
    code, out, err = trial(
        "--tracking-uri",
        store,
        "--json",
        "--set",
        "train.learning_rate=1e30",
        "--set",
        "train.warmup_ratio=0",
    )
    assert code == 1
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["outcome"] == names.NON_FINITE
    assert f"dicelab trial: trial failed: {summary['reason']}" in err
    assert MlflowClient(store).get_run(summary["run_id"]).info.status == "FAILED"


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("http://127.0.0.1:{port}", "is unreachable"),
        ("{tmp}/mlruns", "file store"),
        ("sqlite:///{tmp}/a-file/mlflow.db", "cannot create"),
    ],
)
def test_a_bad_tracking_uri_fails_before_training(trial, tmp_path, uri, message):
    (tmp_path / "a-file").write_text("not a directory")
    cache = tmp_path / "fresh-cache"
    code, _, err = trial("--tracking-uri", uri.format(port=free_port(), tmp=tmp_path), cache=cache)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not cache.exists()  # no data was loaded, no tokenizer trained
