"""What a trial records in MLflow, read back through MlflowClient from a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient

from dicelab.errors import TrialFailed
from dicelab.tracking import conventions as names
from dicelab.tracking import ensure_experiment
from dicelab.training import MultiReporter, Reporter, run_trial
from dicelab.training.reporters import ConsoleReporter, MlflowReporter


def artifact_paths(client: MlflowClient, run_id: str, path: str | None = None) -> set[str]:
    paths = set()
    for entry in client.list_artifacts(run_id, path):
        paths |= artifact_paths(client, run_id, entry.path) if entry.is_dir else {entry.path}
    return paths


def test_a_trial_run_holds_params_tags_metrics_artifacts_and_status(store, tmp_path, make_config, inputs_for):
    config = make_config(
        "pairs", "loss.name=dsc", "loss.alpha=0.5", "train.eval_every_steps=4", "train.max_steps=8"
    )
    inputs = inputs_for(config)
    reporter = MlflowReporter(store, "loop-tests", run_name="dsc-trial", tags={names.TRIAL_ID: "local"})
    result = run_trial(config, MultiReporter([reporter, ConsoleReporter(quiet=True)]), inputs=inputs)

    client = MlflowClient(store)
    run = client.get_run(reporter.run_id)
    assert result.run_id == reporter.run_id
    assert run.info.status == "FINISHED" and run.info.run_name == "dsc-trial"
    assert client.get_experiment(run.info.experiment_id).name == "loop-tests"
    params = run.data.params
    assert params["loss.name"] == "dsc" and params["loss.alpha"] == "0.5"
    assert params["train.max_steps"] == "8" and params["data.variant"] == "original"
    assert params["task.name"] == "pair_classification" and params["train.seed"] == "42"
    tags = run.data.tags
    assert tags[names.ROLE] == names.ROLE_TRIAL and tags[names.PRIMARY_METRIC] == "f1"
    assert tags[names.DATA_FINGERPRINT] == inputs.data_fingerprint
    assert tags[names.OUTCOME] == names.COMPLETED and tags[names.TRIAL_ID] == "local"
    assert names.REASON not in tags

    for metric in (
        "dev_f1",
        "dev_accuracy",
        "train_loss",
        "epoch",
        "learning_rate",
        "train_samples_per_second",
    ):
        assert [m.step for m in client.get_metric_history(run.info.run_id, metric)] == [4, 8], metric
    f1_history = [m.value for m in client.get_metric_history(run.info.run_id, "dev_f1")]
    assert f1_history[-1] == pytest.approx(result.final_metrics["f1"])
    assert run.data.metrics["best_dev_f1"] == pytest.approx(max(f1_history))
    assert run.data.metrics[names.BEST_STEP] == result.best_step

    assert artifact_paths(client, run.info.run_id) == {
        names.CONFIG_ARTIFACT,
        names.PREDICTIONS_ARTIFACT,
        names.CLASS_REPORT_ARTIFACT,
    }
    local = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "download")))
    predictions = (local / names.PREDICTIONS_ARTIFACT).read_text().splitlines()
    assert len(predictions) == len(inputs.dev_features) and "prediction" in json.loads(predictions[0])
    assert set(json.loads((local / names.CLASS_REPORT_ARTIFACT).read_text())) == set(inputs.label_names)
    assert "name: test-pairs" in (local / names.CONFIG_ARTIFACT).read_text()
    # Artifacts sit beside the SQLite file, not in ./mlruns.
    assert run.info.artifact_uri.startswith(
        (Path(store.removeprefix("sqlite:///")).parent / "mlartifacts").as_uri()
    )


def test_a_non_finite_trial_is_a_failed_run_with_its_reason(store, make_config, inputs_for):
    config = make_config("pairs", "train.learning_rate=1e30", "train.warmup_ratio=0")
    reporter = MlflowReporter(store, "loop-tests")
    with pytest.raises(TrialFailed) as failure:
        run_trial(config, reporter, inputs=inputs_for(config))
    run = MlflowClient(store).get_run(reporter.run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags[names.OUTCOME] == names.NON_FINITE
    assert run.data.tags[names.REASON] == failure.value.reason


def test_child_runs_nest_under_a_parent_and_resume_into_the_same_run(store, make_config, inputs_for):
    client = MlflowClient(store)
    experiment_id = ensure_experiment(client, "sweep-like")  # artifacts beside the store, never ./mlruns
    parent = client.create_run(experiment_id, tags={names.ROLE: names.ROLE_PARENT})
    config = make_config("pairs", "train.eval_every_steps=2", "train.max_steps=4")
    inputs = inputs_for(config)

    class PauseAtFirstEvaluation(Reporter):  # as a scheduler pausing a trial would
        state = None

        def on_evaluation(self, evaluation):
            self.state = evaluation.state()

        def should_stop(self):
            return self.state is not None

    first, pause = (
        MlflowReporter(store, "sweep-like", parent_run_id=parent.info.run_id),
        PauseAtFirstEvaluation(),
    )
    assert run_trial(config, MultiReporter([first, pause]), inputs=inputs).steps == 2
    second = MlflowReporter(store, "sweep-like", parent_run_id=parent.info.run_id, run_id=first.run_id)
    run_trial(config, second, inputs=inputs, resume_state=pause.state)  # no "param already logged" error

    runs = client.search_runs(
        [experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'"
    )
    assert [run.info.run_id for run in runs] == [first.run_id]
    run = runs[0]
    assert run.info.status == "FINISHED" and run.data.tags[names.OUTCOME] == names.COMPLETED
    assert [m.step for m in client.get_metric_history(run.info.run_id, "dev_f1")] == [2, 4]
    assert run.data.params["train.max_steps"] == "4"


def test_the_resampling_manifest_is_an_artifact_when_a_variant_is_applied(store, make_config, inputs_for):
    config = make_config("pairs", "data.variant=-negative", "train.max_steps=2")
    inputs = inputs_for(config)
    assert inputs.manifest
    reporter = MlflowReporter(store, "loop-tests", log_predictions=False)
    run_trial(config, reporter, inputs=inputs)
    client = MlflowClient(store)
    assert artifact_paths(client, reporter.run_id) == {
        names.CONFIG_ARTIFACT,
        names.CLASS_REPORT_ARTIFACT,
        names.MANIFEST_ARTIFACT,
    }
    assert client.get_run(reporter.run_id).data.params["data.variant"] == "-negative"
