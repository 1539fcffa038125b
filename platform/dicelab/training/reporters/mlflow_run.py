"""Record a trial as one MLflow run: params, tags, metrics per evaluation, artifacts, terminal status.

Uses `MlflowClient` with explicit run ids (never the fluent active-run API), so several trials in one
process, nested children under a sweep's parent run and resumed runs all work.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag

from dicelab.config import ExperimentConfig, config_to_yaml, flatten_config
from dicelab.errors import first_line
from dicelab.plugins import PLUGINS_TAG, fingerprint
from dicelab.tracking import conventions as names
from dicelab.tracking.lifecycle import (
    ENDING_EVENT,
    Kind,
    LifecycleRun,
    State,
    TrialRun,
    reopening_event,
    start_run,
)
from dicelab.tracking.mlflow_adapter import MAX_PARAM_VALUE_LENGTH, MAX_TAG_VALUE_LENGTH, PARENT_RUN_ID_TAG
from dicelab.tracking.store import ensure_experiment
from dicelab.training.reporter import Evaluation, Reporter, TrialResult


class MlflowReporter(Reporter):
    """One MLflow run per trial. The run is created in `on_start` (or reopened when `run_id` is given).

    `run_id` is set once the run exists; `on_end` also writes it into the TrialResult. The run's state,
    outcome and status are the lifecycle's (`dicelab.tracking.lifecycle`): the reporter sends it events.
    """

    def __init__(
        self,
        tracking_uri: str,
        experiment: str,
        *,
        run_name: str | None = None,
        parent_run_id: str | None = None,
        tags: dict[str, str] | None = None,
        run_id: str | None = None,
        log_predictions: bool = True,
        save_model: bool = False,
        register: str | None = None,
    ):
        self.client = MlflowClient(tracking_uri)
        self.tracking_uri = tracking_uri
        # save_model: log the weights that train.save_model names as a model on the run (dicelab.models);
        # register: also as a new version of this registered model. Off by default: a sweep saves only its
        # winner, at its end.
        self.save_model, self.register = save_model, register
        self.experiment = experiment
        self.run_name = run_name
        self.parent_run_id = parent_run_id
        self.tags = dict(tags or {})
        self.run_id = run_id
        self.log_predictions = log_predictions
        self._config: ExperimentConfig | None = None
        self._manifest: dict | None = None
        self._info: dict[str, Any] = {}
        self.run: LifecycleRun | None = None  # the run's lifecycle, once on_start opened it

    def on_start(self, config: ExperimentConfig, info: dict[str, Any]) -> None:
        self._config = config
        self._manifest = info.get("manifest")
        self._info = info
        tags = {
            names.ROLE: names.ROLE_TRIAL,
            names.PRIMARY_METRIC: str(info.get("metric", "")),
            names.DATA_FINGERPRINT: str(info.get("data_fingerprint", "")),
            **self.tags,
        }
        if info.get("device_fallback"):
            tags[names.DEVICE_FALLBACK] = info["device_fallback"]
        if info.get("backbone_commit"):
            tags[names.BACKBONE_COMMIT] = info["backbone_commit"]
        if self.parent_run_id:
            tags[PARENT_RUN_ID_TAG] = self.parent_run_id
        if plugin_versions := fingerprint():  # the plugin modules and source hashes this trial imported
            tags[PLUGINS_TAG] = plugin_versions
        params = {
            key: _truncate(str(value), MAX_PARAM_VALUE_LENGTH)
            for key, value in flatten_config(config).items()
        }
        if self.run_id is None:
            experiment_id = ensure_experiment(self.client, self.experiment)
            name = self.run_name or config.tracking.run_name
            self.run = start_run(self.client, experiment_id, Kind.TRIAL, run_name=name)
            self.run_id = self.run.run_id
        else:  # reopened: the run keeps its params (MLflow forbids changing one) and goes back to running
            run = self.client.get_run(self.run_id)
            params = {key: value for key, value in params.items() if key not in run.data.params}
            self.run = TrialRun.of(self.client, run)
            step = info.get("start_step") or None  # a trial resumed from a checkpoint starts past step 0
            self.run.send(reopening_event(step), run=run, restored_from_step=step)
        self.client.log_batch(
            self.run_id,
            params=[Param(key, value) for key, value in params.items()],
            tags=[RunTag(key, _truncate(str(value), MAX_TAG_VALUE_LENGTH)) for key, value in tags.items()],
        )

    def on_evaluation(self, evaluation: Evaluation) -> None:
        values = {
            names.dev_metric(key): value
            for key, value in evaluation.metrics.items()
            if key != names.TRAIN_LOSS
        }
        values.update(evaluation.train_metrics)
        values[names.EPOCH] = evaluation.epoch
        self._log_metrics(values, evaluation.step)

    def on_end(self, result: TrialResult) -> None:
        if self.run_id is None:  # on_start never ran: nothing to record
            return
        result.run_id = result.run_id or self.run_id
        final = {names.best_metric(key): value for key, value in result.best_metrics.items()}
        if result.best_step is not None:
            final[names.BEST_STEP] = result.best_step
        final.update(result.resource_metrics)  # cost/*, gpu/peak_memory_mb, train_skipped_steps
        final.update(result.held_out_metrics)  # test_*, threshold, best_dev_f1_tuned, *_ece
        self._log_metrics(final, result.steps)
        self._log_artifacts(result)
        tags: dict[str, str] = {}
        if self.save_model:
            self._save_model(result, tags)
        if result.degenerate:
            tags[names.DEGENERATE] = result.degenerate
        if result.held_out_error:
            tags[names.HELD_OUT_ERROR] = _truncate(result.held_out_error, MAX_TAG_VALUE_LENGTH)
            print(
                f"dicelab: the test split was not scored: {result.held_out_error}",
                file=sys.stderr,
                flush=True,
            )
        if self.run is None:  # on_start failed after the run existed
            self.run = TrialRun.of(self.client, self.client.get_run(self.run_id))
        self.run.send(ENDING_EVENT[State(result.outcome)], reason=result.reason, tags=tags)

    def _save_model(self, result: TrialResult, tags: dict[str, str]) -> None:
        """Log the model of a trial that finished; a failure to save is recorded (tag, stderr), not raised:
        the trial's own record stays complete."""
        config, finished = self._config, result.outcome in (names.COMPLETED, names.EARLY_STOPPED)
        if config is None or config.train.save_model == "none" or not finished:
            return
        last = config.train.save_model == "last"
        state = result.last_model_state if last else result.best_model_state
        if state is None:
            return
        from dicelab.models.publishing import MODEL_ERROR_TAG, log_model

        try:
            ref = log_model(
                self.tracking_uri,
                str(self.run_id),
                config,
                list(self._info.get("label_names") or []),
                self._info["tokenizer_path"],
                state,
                metrics=result.final_metrics if last else result.best_metrics,
                metric=result.metric,
                step=result.steps if last else result.best_step,
                register=self.register,
            )
        except Exception as error:
            reason = first_line(error, with_type=True)
            tags[MODEL_ERROR_TAG] = _truncate(reason, MAX_TAG_VALUE_LENGTH)
            print(f"dicelab: the trial's model was not saved: {reason}", file=sys.stderr, flush=True)
            return
        result.model_uri = ref.uri

    def _log_metrics(self, values: dict[str, float], step: int) -> None:
        timestamp = int(time.time() * 1000)
        metrics = [Metric(key, float(value), timestamp, step) for key, value in values.items()]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def _log_artifacts(self, result: TrialResult) -> None:
        with tempfile.TemporaryDirectory(prefix="dicelab-artifacts-") as tmp:
            root = Path(tmp)
            if self._config is not None:
                _write(root / names.CONFIG_ARTIFACT, config_to_yaml(self._config))
            if self._manifest:
                _write(root / names.MANIFEST_ARTIFACT, json.dumps(self._manifest, indent=2, default=str))
            best = result.best_eval_result
            if best is not None:
                _write(root / names.CLASS_REPORT_ARTIFACT, json.dumps(best.per_class, indent=2))
                if self.log_predictions:
                    lines = (
                        json.dumps(record, ensure_ascii=False, default=str) for record in best.predictions
                    )
                    _write(root / names.PREDICTIONS_ARTIFACT, "".join(f"{line}\n" for line in lines))
            test = result.test_eval_result
            if test is not None and self.log_predictions:
                lines = (json.dumps(record, ensure_ascii=False, default=str) for record in test.predictions)
                _write(root / names.TEST_PREDICTIONS_ARTIFACT, "".join(f"{line}\n" for line in lines))
            self.client.log_artifacts(self.run_id, str(root))


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
