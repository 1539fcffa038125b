"""Sweeps written through the real MLflow API in the sweep engine's layout, with values the tests know."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from dicelab.tracking import conventions as names


@pytest.fixture(scope="session")
def _empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Creating an MLflow SQLite schema takes seconds; do it once and copy the file per test.
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


def _copy_store(template: Path, folder: Path) -> str:
    path = folder / "store" / "mlflow.db"
    path.parent.mkdir()
    shutil.copy(template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def tracking_uri(tmp_path: Path, _empty_store: Path) -> str:
    return _copy_store(_empty_store, tmp_path)


@pytest.fixture(scope="module")
def module_tracking_uri(tmp_path_factory: pytest.TempPathFactory, _empty_store: Path) -> str:
    """A store shared by the read-only tests of one module."""
    return _copy_store(_empty_store, tmp_path_factory.mktemp("module"))


class SweepLog:
    """Writes one sweep invocation the way dicelab's sweep engine does: a parent run, nested trial runs."""

    def __init__(
        self,
        tracking_uri: str,
        experiment: str,
        *,
        sweep_id: str = "sweep-1",
        paper: dict[str, Any] | None = None,
        parent: bool = True,
    ):
        self.client = MlflowClient(tracking_uri=tracking_uri)
        self.experiment, self.sweep_id = experiment, sweep_id
        found = self.client.get_experiment_by_name(experiment)
        store_dir = Path(tracking_uri.removeprefix("sqlite:///")).parent
        self.experiment_id = (
            found.experiment_id
            if found
            else self.client.create_experiment(
                experiment, artifact_location=(store_dir / "artifacts" / experiment).as_uri()
            )
        )
        self.parent_id: str | None = None
        self._clock = int(time.time() * 1000)
        self._count = 0
        if parent:
            run = self.client.create_run(
                self.experiment_id,
                run_name=f"{experiment}-{sweep_id}",
                tags={names.ROLE: names.ROLE_PARENT, names.SWEEP_NAME: experiment, names.SWEEP_ID: sweep_id},
                start_time=self._tick(),
            )
            self.parent_id = run.info.run_id
            config = {"name": experiment, "loss": {"name": "ce"}}
            if paper is not None:
                config["paper"] = paper
            self.client.log_text(self.parent_id, yaml.safe_dump(config), names.CONFIG_ARTIFACT)

    def _tick(self) -> int:
        self._clock += 1000  # one second apart, so "newest" is well defined
        return self._clock

    def trial(
        self,
        best: float | None,
        *,
        loss: str = "ce",
        variant: str = "original",
        seed: int = 0,
        task: str = "pair_classification",
        params: dict[str, Any] | None = None,
        outcome: str = names.COMPLETED,
        reason: str | None = None,
        metric: str = "f1",
        history: Iterable[tuple[int, float]] | None = None,
        trial_id: str | None = None,
        metrics: dict[str, float] | None = None,
    ) -> str:
        """One trial run. `best` is logged as best_dev_<metric> (None: not logged); `history` as dev_<metric>
        (default: three evaluations ending at `best` - 0.01, so final and best differ); `metrics` at the
        trial's end, as the trial logs its cost and peak memory."""
        self._count += 1
        tags = {
            names.ROLE: names.ROLE_TRIAL,
            names.SWEEP_NAME: self.experiment,
            names.SWEEP_ID: self.sweep_id,
            names.TRIAL_ID: trial_id or f"trial_{self._count:05d}",
            names.OUTCOME: outcome,
            names.PRIMARY_METRIC: metric,
        }
        if self.parent_id:
            tags["mlflow.parentRunId"] = self.parent_id
        if reason:
            tags[names.REASON] = reason
        run = self.client.create_run(self.experiment_id, tags=tags, start_time=self._tick())
        flat = {
            "loss.name": loss,
            "data.variant": variant,
            "train.seed": seed,
            "task.name": task,
            "model.backbone": "tiny-bert",
            "train.learning_rate": 2e-5,
            "tracking.experiment": self.experiment,
            **(params or {}),
        }
        if history is None and best is not None:
            history = [(10, best - 0.05), (20, best), (30, best - 0.01)]
        now = self._clock
        logged = [Metric(names.dev_metric(metric), value, now, step) for step, value in history or []]
        logged += [Metric("epoch", step / 10, now, step) for step, _ in history or []]
        if best is not None:
            logged.append(Metric(names.best_metric(metric), best, now, 0))
        logged += [Metric(key, value, now, 0) for key, value in (metrics or {}).items()]
        self.client.log_batch(
            run.info.run_id, metrics=logged, params=[Param(key, str(value)) for key, value in flat.items()]
        )
        failed = outcome in (names.FAILED, names.NON_FINITE)
        self.client.set_terminated(run.info.run_id, "FAILED" if failed else "FINISHED", end_time=self._tick())
        return run.info.run_id


@pytest.fixture
def sweep_log(tracking_uri: str) -> Callable[..., SweepLog]:
    def make(experiment: str = "sweep", **kwargs: Any) -> SweepLog:
        return SweepLog(tracking_uri, experiment, **kwargs)

    return make


@pytest.fixture(scope="module")
def module_sweep_log(module_tracking_uri: str) -> Callable[..., SweepLog]:
    def make(experiment: str = "sweep", **kwargs: Any) -> SweepLog:
        return SweepLog(module_tracking_uri, experiment, **kwargs)

    return make
