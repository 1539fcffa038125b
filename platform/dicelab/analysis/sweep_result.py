"""A finished sweep as one object, read back from MLflow: what `dicelab.sweep` returns and
`dicelab.load_sweep` reloads (an Optuna user's `Study` / `load_study`, a Ray Tune user's `ResultGrid` /
`Tuner.restore`).

Everything in it is read from the tracking store through the analysis's own entry points (`load_runs`, the
Decision, `find_winner`), so a sweep's result and the same sweep reloaded later are equal (`==`). What only
the running call knows (its warnings) is kept beside and left out of the comparison.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import yaml

from dicelab.analysis.comparisons import Decisions, arena_mode, decisions_from_observations
from dicelab.analysis.observations import AnalysisOptions, observations
from dicelab.analysis.runs import RunSet, load_runs
from dicelab.errors import DicelabError, TrackingError
from dicelab.tracking import conventions as names

WINNER_MODEL_TAG = "dicelab.winner_model"  # on the parent run: the winner's model URI (sweeps.winner_model)
MODEL_SECONDS = "cost/model_seconds"  # on the parent run: the time saving the winner's model took
# The parent run's status -> the sweep's exit code, as `dicelab sweep` ends: 0 a trial succeeded, 1 every
# trial failed, 130 interrupted.
EXIT_CODES = {"FINISHED": 0, "FAILED": 1, "KILLED": 130}
# The Decision's columns a notebook reads first (`Decision.verdicts`); `comparisons` has them all.
VERDICT_COLUMNS = [
    "against",
    "candidate",
    "reference",
    "difference",
    "low",
    "high",
    "p_value",
    "p_holm",
    "verdict",
    "n",
    "paired",
    "test",
]


class Decision(list[str]):
    """The analysis's Decision: the list of its lines, as `dicelab analyze` prints them, and structured:
    `comparisons` (a row per paired comparison: difference, interval, p, p (Holm), verdict, ...), `arenas`
    (the best configuration of each task / metric / variant) and the seed race's own decision line."""

    def __init__(
        self,
        lines: list[str],
        comparisons: pd.DataFrame,
        arenas: pd.DataFrame,
        race: str | None = None,
    ):
        super().__init__(lines)
        self.comparisons, self.arenas, self.race = comparisons, arenas, race

    @property
    def lines(self) -> list[str]:
        return list(self)

    @property
    def best(self) -> str | None:
        """The best configuration's label (of the first arena), e.g. "dice · loss.level=batch"."""
        return str(self.arenas.iloc[0]["best"]) if len(self.arenas) else None

    @property
    def verdicts(self) -> pd.DataFrame:
        """Each comparison's verdict with its difference, interval and p-values."""
        return self.comparisons[[c for c in VERDICT_COLUMNS if c in self.comparisons]]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Decision):
            return list(self) == other
        return (
            list(self) == list(other)
            and self.race == other.race
            and _frames_equal(self.comparisons, other.comparisons)
            and _frames_equal(self.arenas, other.arenas)
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, like the list it is

    def __repr__(self) -> str:
        return f"Decision({list(self)!r})"


@dataclass(eq=False)
class SweepResult:
    """What a sweep ended with: its trials, the analysis's Decision, the winner and what it cost."""

    name: str  # the sweep's name and MLflow experiment
    sweep_id: str
    exit_code: int  # as `dicelab sweep`: 0 a trial succeeded, 1 every trial failed, 130 interrupted
    metric: str  # the dev metric the sweep ranked by, without prefix ("f1", "log_loss")
    mode: str  # "max" or "min": whether the best value of `metric` is its highest or its lowest
    tracking_uri: str
    parent_run_id: str
    trials: pd.DataFrame = field(repr=False)  # a row per trial (params, metrics, outcome)
    decision: Decision  # the Decision's lines (a list), with its comparisons and verdicts structured
    best_config: dict[str, Any] | None  # the winner's resolved config: the YAML `dicelab export` writes
    best_value: float | None  # the winner's best dev value of `metric`, as logged
    best_configuration: str | None  # the winner's configuration label ("dice · loss.level=batch")
    winner_run_id: str | None  # the winning trial's MLflow run
    winner_model_uri: str | None  # search.save_model's model of the winner (None: not saved)
    race_decision: str | None  # the seed race's own decision, when the sweep raced
    cost: dict[str, float]  # the parent run's cost/* (trials' CPU- and GPU-hours, ...) and wall_seconds
    warnings: list[str] = field(default_factory=list)  # what the running call warned about (not reloaded)

    @property
    def runs(self) -> pd.DataFrame:
        """The trials (the name this attribute had first)."""
        return self.trials

    @property
    def best_model_uri(self) -> str | None:
        return self.winner_model_uri

    @property
    def interrupted(self) -> bool:
        return self.exit_code == 130

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SweepResult):
            return NotImplemented
        keys = [key for key in vars(self) if key not in ("warnings", "trials", "decision", "cost")]
        return (
            all(_same(getattr(self, key), getattr(other, key)) for key in keys)
            and self.decision == other.decision
            and _frames_equal(self.trials, other.trials)
            and self.cost.keys() == other.cost.keys()
            and all(_same(self.cost[key], other.cost[key]) for key in self.cost)
        )

    __hash__ = None  # type: ignore[assignment]

    def _repr_html_(self) -> str:
        counts = self.trials["outcome"].value_counts() if len(self.trials) else {}
        rows = [
            ("trials", ", ".join(f"{n} {outcome}" for outcome, n in dict(counts).items()) or "none"),
            ("decision", "<br>".join(html.escape(line) for line in self.decision)),
            (
                f"best ({self.mode} {self.metric})",
                f"{self.best_configuration}: {self.best_value:.4g}"
                if self.best_value is not None
                else "none",
            ),
            ("winner's model", self.winner_model_uri or "not saved"),
            ("cost", ", ".join(f"{key} {value:.4g}" for key, value in self.cost.items())),
        ]
        if self.race_decision:
            rows.insert(2, ("seed race", self.race_decision))
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(key)}</th><td style='text-align:left'>"
            f"{value if key == 'decision' else html.escape(str(value))}</td></tr>"
            for key, value in rows
        )
        title = html.escape(f"sweep {self.name} ({self.sweep_id})")
        return f"<table><caption style='text-align:left'><b>{title}</b></caption>{body}</table>"


def read_sweep(experiment: str, sweep_id: str | None = None, tracking_uri: str | None = None) -> SweepResult:
    """The sweep `sweep_id` of `experiment` (None: its newest) as a SweepResult, read from MLflow."""
    runs = load_runs(experiment, tracking_uri, sweep_ids=[sweep_id] if sweep_id else None)
    if sweep_id is None:
        if runs.parents.empty:
            raise TrackingError(f"experiment {experiment!r} has no sweep (no parent run)")
        sweep_id = str(runs.parents.iloc[0]["sweep_id"])  # parents are newest first
        runs = load_runs(experiment, runs.tracking_uri, sweep_ids=[sweep_id])
    parent = runs.parents.iloc[0]
    from mlflow import MlflowClient

    parent_run = MlflowClient(runs.tracking_uri).get_run(str(parent["run_id"]))
    decision, found = _decision(runs)
    winner = _winner(experiment, runs.tracking_uri, sweep_id)
    metric = (
        winner.metric
        if winner is not None
        else str(
            parent_run.data.tags.get(names.PRIMARY_METRIC) or parent_run.data.params.get("search.metric")
        )
    )
    return SweepResult(
        name=experiment,
        sweep_id=sweep_id,
        exit_code=EXIT_CODES.get(parent_run.info.status, 1),
        metric=metric,
        mode=winner.mode if winner is not None else _mode(runs, parent_run.data.params),
        tracking_uri=runs.tracking_uri,
        parent_run_id=parent_run.info.run_id,
        trials=runs.trials,
        decision=Decision(
            decision, found.comparisons, found.arenas, parent_run.data.tags.get(names.RACE_DECISION)
        ),
        best_config=_exported(winner) if winner is not None else None,
        best_value=winner.value if winner is not None else None,
        best_configuration=winner.configuration if winner is not None else None,
        winner_run_id=winner.run_id if winner is not None else None,
        winner_model_uri=parent_run.data.tags.get(WINNER_MODEL_TAG),
        race_decision=parent_run.data.tags.get(names.RACE_DECISION),
        cost=_cost(parent_run),
    )


def _decision(runs: RunSet) -> tuple[list[str], Decisions]:
    """The Decision's lines, as `dicelab analyze` prints them (no report written), and its tables."""
    from dicelab.analysis.analyze import race_test
    from dicelab.analysis.decision import decision_lines
    from dicelab.analysis.held_out import decision_statements, held_out
    from dicelab.analysis.race import race_records

    options = AnalysisOptions(test=race_test(runs) or "permutation")  # type: ignore[arg-type]
    obs = observations(runs, options)
    found = decisions_from_observations(obs, runs, options)
    if runs.trials.empty:
        return [], found
    held = held_out(obs, found, runs, options)  # the held-out and tuned-threshold lines `analyze` prints

    def more(arena: Any) -> list[str]:
        return decision_statements(held, arena, options)

    return decision_lines(found, race_records(runs), options, obs, more), found


def _winner(experiment: str, tracking_uri: str, sweep_id: str) -> Any:
    from dicelab.analysis.export import find_winner

    try:
        return find_winner(experiment, tracking_uri, sweep_id=sweep_id)
    except DicelabError:
        return None  # no usable trial: no winner


def _exported(winner: Any) -> dict[str, Any]:
    from dicelab.analysis.export import winner_config

    return yaml.safe_load(winner_config(winner))


def _mode(runs: RunSet, parent_params: dict[str, str]) -> str:
    if parent_params.get("search.mode") in ("max", "min"):
        return parent_params["search.mode"]
    return arena_mode(runs.trials)


def _cost(parent: Any) -> dict[str, float]:
    """The parent run's cost/* metrics (the trials' CPU- and GPU-hours, ...), with `wall_seconds` (the
    sweep's wall time as `dicelab.sweep` recorded it, else the parent run's duration) and `model_seconds`
    (the time saving the winner's model took, when recorded)."""
    cost = {key: value for key, value in parent.data.metrics.items() if key.startswith("cost/")}
    wall = cost.pop(names.COST_WALL_SECONDS, None)
    if wall is None and parent.info.end_time and parent.info.start_time:
        wall = (parent.info.end_time - parent.info.start_time) / 1000
    model = cost.pop(MODEL_SECONDS, 0.0)
    return {"wall_seconds": float(wall or 0.0), "model_seconds": float(model), **dict(sorted(cost.items()))}


def _frames_equal(first: pd.DataFrame, second: pd.DataFrame) -> bool:
    return list(first.columns) == list(second.columns) and first.reset_index(drop=True).equals(
        second.reset_index(drop=True)
    )


def _same(first: Any, second: Any) -> bool:
    if isinstance(first, float) and isinstance(second, float) and math.isnan(first) and math.isnan(second):
        return True
    return bool(first == second)
