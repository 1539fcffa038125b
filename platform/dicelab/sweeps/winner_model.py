"""The sweep's model (`search.save_model`), logged by the driver once the trials are done: the winner's (the
best seed of the best configuration, or of the race's winner; `dicelab.sweeps.winner`) or every usable
trial's, each on its trial's run, from the trial's last Tune checkpoint, which holds its best state (the
trial's last report carries a checkpoint whenever its best state is newer than its previous checkpoint).

Trials therefore never save a model while the sweep runs: one model is written per sweep, not per trial.
The parent run links the winner's model (tag `dicelab.winner_model`); `dicelab sweep --register NAME`
registers it in the Model Registry.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from mlflow import MlflowClient
from mlflow.entities import Run

from dicelab.errors import DicelabError, first_line
from dicelab.models.publishing import logged_model_of, register_model
from dicelab.sweeps import records
from dicelab.sweeps.space import SweepPlan
from dicelab.sweeps.trainable import BEST_FILE, STATE_FILE, point_of
from dicelab.sweeps.winner import value_of, winner_run
from dicelab.tracking import conventions as names
from dicelab.training import inputs_key

WINNER_MODEL = "dicelab.winner_model"  # on the parent run: the winner's model URI


@dataclass(frozen=True)
class SweepRuns:
    """Where a finished sweep's runs are."""

    tracking_uri: str
    experiment_id: str
    sweep_id: str
    parent_run_id: str
    metric: str  # the dev metric the sweep ranked by, without prefix


@dataclass
class KeptModels:
    winner_run_id: str | None = None  # the winning trial's run
    winner_model_uri: str | None = None  # its model, when it was saved
    reused: bool = False  # that model had been logged before (a finished sweep resumed): not logged again
    warnings: list[str] = field(default_factory=list)  # what could not be saved, and why
    seconds: float = 0.0  # the time it took (choosing the winner, reading its checkpoint, logging the model)


def keep_models(
    client: MlflowClient,
    plan: SweepPlan,
    sweep: SweepRuns,
    grid: Any,
    inputs: dict[str, Any],
    register: str | None = None,
    extra_code_paths: Sequence[str | Path] = (),
) -> KeptModels:
    """Log the sweep's model(s); what could not be saved is in the warnings (the sweep's results stand
    without it). `grid`: Tune's ResultGrid; `inputs`: inputs_key -> the TrialInputs the driver built
    (tokenizer, label names); `extra_code_paths`: code each model carries beside dicelab's (a plugin's
    modules, which its config needs to load; dicelab.models.publishing.code_paths)."""
    started = time.monotonic()
    kept = KeptModels()
    runs = records.trial_runs(client, sweep.experiment_id, sweep.sweep_id)
    winner = winner_run(client.get_run(sweep.parent_run_id), runs, sweep.metric)
    if winner is None:
        kept.warnings.append("no usable trial: no model saved")
        return kept
    kept.winner_run_id = winner.info.run_id
    results = {result.metrics.get("trial_id"): result for result in grid}
    if plan.search.save_model == "all":
        chosen = [run for run in runs if value_of(run, sweep.metric) is not None]
    else:
        chosen = [winner]
    for run in chosen:
        is_winner = run.info.run_id == winner.info.run_id
        registered = register if is_winner else None
        # A trial's model is logged once its trial ended, and an ended trial never trains again: a model
        # on its run (a finished sweep resumed) is the one to keep, not to log a second time.
        logged = logged_model_of(client, run)
        try:
            if logged is not None:
                uri, problem = logged, None
                if registered:
                    register_model(sweep.tracking_uri, registered, logged, run.info.run_id)
            else:
                uri, problem = _log(
                    run, results, plan, inputs, sweep, registered, extra_code_paths=extra_code_paths
                )
        except (DicelabError, OSError) as error:  # a store or disk problem: said, and the sweep stands
            uri, problem = None, first_line(error, with_type=True)
        if problem is not None:
            kept.warnings.append(f"trial {run.info.run_name}: no model saved: {problem}")
        elif is_winner:
            kept.winner_model_uri, kept.reused = uri, logged is not None
            client.set_tag(sweep.parent_run_id, WINNER_MODEL, uri)
    kept.seconds = time.monotonic() - started
    return kept


def _log(
    run: Run,
    results: dict[str, Any],
    plan: SweepPlan,
    inputs: dict[str, Any],
    sweep: SweepRuns,
    register: str | None,
    *,
    extra_code_paths: Sequence[str | Path] = (),
) -> tuple[str | None, str | None]:
    """(model URI, None) once logged, else (None, why not)."""
    from dicelab.models import log_model

    result = results.get(run.data.tags.get(names.TRIAL_ID))
    if result is None or result.checkpoint is None:
        return None, "its trial has no checkpoint"
    with result.checkpoint.as_directory() as directory:
        # after the trial's end: its best state alone; else a full training state, which holds it
        ended = (Path(directory) / BEST_FILE).exists()
        path = Path(directory) / (BEST_FILE if ended else STATE_FILE)
        state = torch.load(path, map_location="cpu", weights_only=True)
    progress = state if ended else state["progress"]
    logged_step = run.data.metrics.get(names.BEST_STEP)
    if progress.get("best_model_state") is None or (
        logged_step is not None and progress.get("best_step") != int(logged_step)
    ):
        return None, f"its last checkpoint does not hold its best state (step {logged_step})"
    config = plan.resolve(point_of(result.config, plan))[0]
    trial_inputs = inputs.get(inputs_key(config))
    if trial_inputs is None:
        return None, "its inputs were not built by this driver"
    prefix = names.BEST_PREFIX
    metrics = {
        key.removeprefix(prefix): value for key, value in run.data.metrics.items() if key.startswith(prefix)
    }
    ref = log_model(
        sweep.tracking_uri,
        run.info.run_id,
        config,
        trial_inputs.label_names,
        trial_inputs.tokenizer_path,
        progress["best_model_state"],
        metrics=metrics,
        metric=sweep.metric,
        step=progress.get("best_step"),
        register=register,
        extra_code_paths=extra_code_paths,
    )
    return ref.uri, None
