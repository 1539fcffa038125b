import math
import sys

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from dicelab.analysis import _run_tables, _store, load_histories, load_runs
from dicelab.errors import TrackingError
from dicelab.tracking import conventions as names


def test_one_row_per_trial_with_typed_params_metrics_and_outcome(tracking_uri, sweep_log):
    log = sweep_log("quick")
    ok = log.trial(0.81, loss="tversky", seed=1, params={"loss.alpha": 0.3, "loss.beta": 0.7})
    failed = log.trial(None, loss="dsc", seed=2, outcome="failed", reason="CUDA out of memory", history=[])

    runs = load_runs("quick", tracking_uri)
    trials = runs.trials.set_index("run_id")
    assert len(trials) == 2
    assert runs.report_run == log.parent_id and len(runs.parents) == 1
    row = trials.loc[ok]
    assert row["loss.alpha"] == 0.3 and row["train.seed"] == 1 and row["loss.name"] == "tversky"
    assert row["best_dev_f1"] == 0.81 and row["dev_f1"] == pytest.approx(0.80)  # last evaluation
    assert row["outcome"] == "completed" and row["status"] == "FINISHED" and row["metric"] == "f1"
    assert row["parent_run_id"] == log.parent_id and row["sweep_id"] == "sweep-1"
    assert trials.loc[failed, "outcome"] == "failed" and trials.loc[failed, "reason"] == "CUDA out of memory"
    assert math.isnan(trials.loc[failed, "best_dev_f1"])
    assert {"loss.alpha", "train.seed", "data.variant"} <= set(runs.param_columns)
    assert {"best_dev_f1", "dev_f1", "epoch"} <= set(runs.metric_columns)
    assert not any(column.startswith("_") for column in runs.trials.columns)


def test_resumed_trial_keeps_its_newest_run(tracking_uri, sweep_log):
    log = sweep_log("quick")
    log.trial(0.70, trial_id="t1", outcome="failed", reason="preempted")
    newest = log.trial(0.75, trial_id="t1")
    log.trial(0.72, trial_id="t2")

    runs = load_runs("quick", tracking_uri)
    assert len(runs.trials) == 2 and runs.duplicates_dropped == 1
    assert newest in set(runs.trials["run_id"])


def test_sweep_invocations_are_pooled_or_selected(tracking_uri, sweep_log):
    first = sweep_log("quick", sweep_id="a")
    first.trial(0.7, trial_id="t1")
    second = sweep_log("quick", sweep_id="b")
    second.trial(0.8, trial_id="t1")  # the same trial id in another invocation is another trial

    pooled = load_runs("quick", tracking_uri)
    assert len(pooled.trials) == 2 and pooled.duplicates_dropped == 0
    assert pooled.report_run == second.parent_id  # the newest parent

    only_a = load_runs("quick", tracking_uri, sweep_ids=["a"])
    assert list(only_a.trials["sweep_id"]) == ["a"] and only_a.report_run == first.parent_id

    with pytest.raises(TrackingError, match=r"no sweep with id 'zzz'.*available: a, b"):
        load_runs("quick", tracking_uri, sweep_ids=["zzz"])


def test_pages_are_followed(tracking_uri, sweep_log, monkeypatch):
    log = sweep_log("quick")
    for seed in range(5):
        log.trial(0.7 + seed / 100, seed=seed)
    monkeypatch.setattr(_run_tables, "PAGE_SIZE", 2)
    runs = load_runs("quick", tracking_uri)
    assert sorted(runs.trials["train.seed"]) == [0, 1, 2, 3, 4]


def test_runs_that_are_not_trials_are_counted_not_analyzed(tracking_uri, sweep_log):
    log = sweep_log("quick")
    log.trial(0.7)
    log.client.create_run(log.experiment_id, run_name="someone's notebook")
    runs = load_runs("quick", tracking_uri)
    assert len(runs.trials) == 1 and runs.ignored_runs == 1


def test_paper_numbers_come_from_the_parent_config_artifact(tracking_uri, sweep_log):
    log = sweep_log("quick", paper={"metric": "f1", "results": {"ce": {"original": 91.3}}})
    log.trial(0.9)
    runs = load_runs("quick", tracking_uri)
    assert runs.papers["quick"].result("ce", "original") == 91.3


def test_paper_numbers_fall_back_to_parent_params(tracking_uri, sweep_log):
    log = sweep_log("quick")  # its config.yaml has no paper section
    log.client.log_param(log.parent_id, "paper.sensitivity.tversky.0.6", "84.67")
    log.trial(0.9)
    runs = load_runs("quick", tracking_uri)
    assert runs.papers["quick"].sensitivity_at("tversky", 0.6) == 84.67


def test_unknown_experiment_lists_the_available_ones(tracking_uri, sweep_log):
    sweep_log("quickstart").trial(0.9)
    sweep_log("table8").trial(0.9)
    with pytest.raises(
        TrackingError, match=r"no experiment 'quikstart'.*available: Default, quickstart, table8"
    ):
        load_runs("quikstart", tracking_uri)


def test_an_experiment_named_twice_is_loaded_once(tracking_uri, sweep_log):
    # `dicelab analyze --experiment quick --compare quick` counted every trial twice (each seed a pair twice)
    log = sweep_log("quick")
    log.trial(0.7, seed=1)
    log.trial(0.8, seed=2)
    runs = load_runs(["quick", "quick"], tracking_uri)
    assert runs.experiments == ["quick"] and len(runs.trials) == 2


def test_a_missing_sqlite_store_is_an_error_not_a_new_empty_store(tmp_path):
    path = tmp_path / "nothing" / "mlflow.db"
    with pytest.raises(TrackingError, match="no MLflow store at"):
        load_runs("quick", f"sqlite:///{path}")
    assert not path.exists()


def test_the_store_defaults_to_the_environment_then_the_working_directory(
    tracking_uri, sweep_log, monkeypatch, tmp_path
):
    sweep_log("quick").trial(0.7)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    assert len(load_runs("quick").trials) == 1
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrackingError, match=rf"no MLflow store at {tmp_path.resolve()}/.dicelab/mlflow.db"):
        load_runs("quick")


def test_sql_tables_and_the_search_api_agree(tracking_uri, sweep_log):
    log = sweep_log("quick")
    log.trial(0.8, loss="tversky", params={"loss.alpha": 0.3})
    log.trial(math.nan, loss="dsc", seed=1)
    log.trial(math.inf, loss="ce", seed=2)
    log.trial(None, loss="ce", seed=3, outcome="failed", reason="boom", history=[])
    client = MlflowClient(tracking_uri)
    fast = _run_tables._read_sql(tracking_uri, log.experiment_id)
    slow = _run_tables._read_api(client, log.experiment_id, lambda n: None)
    for name in ("info", "tags", "params", "metrics"):
        a, b = (getattr(t, name).sort_values(list(getattr(t, name).columns[:2])).reset_index(drop=True)
                for t in (fast, slow))  # fmt: skip
        pd.testing.assert_frame_equal(a, b, check_dtype=False, obj=name)
    run_ids = list(fast.info["run_id"])

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.sort_values(["run_id", "step"], ignore_index=True)

    from_sql = ordered(_run_tables._histories_sql(tracking_uri, run_ids, "dev_f1"))
    from_client = ordered(_run_tables._histories_api(client, run_ids, "dev_f1"))
    pd.testing.assert_frame_equal(from_sql, from_client, check_dtype=False)
    assert from_sql["value"].isna().sum() == 3  # the NaN trial's three evaluations


@pytest.mark.parametrize("sql", ["1", "0"])
def test_histories_keep_nan_and_infinity_either_way(tracking_uri, sweep_log, monkeypatch, sql):
    monkeypatch.setenv(_store.SQL_SWITCH, sql)
    log = sweep_log("quick")
    finite = log.trial(0.8, seed=0)
    nan = log.trial(math.nan, loss="dsc", seed=1)
    inf = log.trial(math.inf, loss="ce", seed=2)
    monkeypatch.setattr(_run_tables, "HISTORY_READERS", 2)  # more runs than readers
    runs = load_runs("quick", tracking_uri)
    history = load_histories(runs, [finite, nan, inf], "dev_f1").sort_values(["run_id", "step"])
    by_run = {run_id: list(rows["value"]) for run_id, rows in history.groupby("run_id")}
    assert by_run[finite] == pytest.approx([0.75, 0.8, 0.79])
    assert all(math.isnan(value) for value in by_run[nan]) and len(by_run[nan]) == 3
    assert by_run[inf] == [sys.float_info.max] * 3  # MLflow's SQL store keeps infinity as the largest float
    assert list(history[history["run_id"] == finite]["step"]) == [10, 20, 30]
    latest = runs.trials.set_index("run_id")["best_dev_f1"]
    assert math.isnan(latest[nan]) and latest[inf] == sys.float_info.max and latest[finite] == 0.8


def test_a_run_without_an_outcome_tag_counts_by_its_status_in_the_lifecycles_words(tracking_uri, sweep_log):
    """A trial's run the sweep's driver stopped (KILLED, no outcome tag) is "interrupted", as the sweep
    says, not "killed"."""
    log = sweep_log("quick")
    log.trial(0.8)
    tags = {names.ROLE: names.ROLE_TRIAL, names.SWEEP_ID: log.sweep_id, names.TRIAL_ID: "t9"}
    stopped = log.client.create_run(log.experiment_id, tags=tags).info.run_id
    log.client.set_terminated(stopped, "KILLED")
    running = log.client.create_run(log.experiment_id, tags={**tags, names.TRIAL_ID: "t10"}).info.run_id
    outcomes = load_runs("quick", tracking_uri).trials.set_index("run_id")["outcome"]
    assert (outcomes[stopped], outcomes[running]) == ("interrupted", "running")
