"""A sweep's winner, read from its trials' MLflow runs: its configurations ranked by their mean best dev
metric over the seeds each ran, and the winning trial (the best seed of the best configuration, or of the
configuration a seed race chose). "Best" follows the sweep's mode: the highest value (max, a score such as
f1) or the lowest (min, a loss such as log_loss).

The same rule as the analysis's decision (`dicelab.analysis.comparisons`: the best configuration is the one
with the best mean over its usable trials; a usable trial completed or stopped early, is not degenerate
and has a finite value), on MLflow runs rather than the analysis's table, because the sweep's driver (which
saves the winner's model) sits below the analysis layer. A warm-started sweep (`search.start_from`) reads
its predecessor's best configurations from here too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml
from mlflow.entities import Run

from dicelab.tracking import conventions as names

SEED_KEY = "train.seed"
SEARCH_KEYS_PARAM = "search.keys"  # on the parent run: the keys the sweep varied, comma-separated
SEARCH_MODE_PARAM = "search.mode"  # on the parent run: max or min
TRIAL_MODE_PARAM = "train.mode"  # on a trial's run (its flattened config): max or min
USABLE_OUTCOMES = (names.COMPLETED, names.EARLY_STOPPED)
RACE_WINNER_STATUS = "winner"  # a trial run's dicelab.race.status when its configuration won the race


@dataclass(frozen=True)
class RankedConfiguration:
    """One configuration of a finished sweep: its swept values (seed excluded) and its usable trials."""

    values: dict[str, Any]  # swept key -> value, typed (MLflow keeps params as text)
    mean: float  # mean best dev metric over `runs`
    runs: tuple[Run, ...]  # its usable trial runs, best first

    @property
    def best_run(self) -> Run:
        return self.runs[0]


def param_value(text: str | None) -> Any:
    """A param as MLflow stored it (text) back to its value: "0.3" -> 0.3, "None" -> None, "ce" -> "ce"."""
    if text is None:
        return None
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, (int, float, bool, type(None))) else text


def value_of(run: Run, metric: str) -> float | None:
    """The trial's best dev value when the trial is usable, else None."""
    if run.data.tags.get(names.OUTCOME) not in USABLE_OUTCOMES or names.DEGENERATE in run.data.tags:
        return None
    value = run.data.metrics.get(names.best_metric(metric))
    return value if value is not None and math.isfinite(value) and abs(value) < 1e300 else None


def swept_keys(parent: Run) -> list[str]:
    """The keys the sweep varied, seed excluded (its parent run's `search.keys` param)."""
    text = parent.data.params.get(SEARCH_KEYS_PARAM, "")
    return [key for key in text.split(",") if key and key != SEED_KEY]


def sweep_mode(parent: Run | None, runs: Iterable[Run] = ()) -> str:
    """ "max" or "min": the parent run's search.mode, else its trials' train.mode; max for a sweep from
    before either was recorded."""
    sources = [parent] if parent is not None else []
    for params in (*(run.data.params for run in sources), *(run.data.params for run in runs)):
        for key in (SEARCH_MODE_PARAM, TRIAL_MODE_PARAM):
            if params.get(key) in ("max", "min"):
                return str(params[key])
    return "max"


def rank_configurations(
    runs: Iterable[Run], metric: str, keys: list[str], mode: str = "max"
) -> list[RankedConfiguration]:
    """The sweep's configurations with a usable trial, best mean first (ties: the earlier-started first)."""
    sign = -1.0 if mode == "max" else 1.0  # sorted ascending: the best first
    groups: dict[tuple[str | None, ...], list[tuple[float, Run]]] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time or 0):
        value = value_of(run, metric)
        if value is not None:
            key = tuple(run.data.params.get(k) for k in keys)
            groups.setdefault(key, []).append((value, run))
    ranked = [
        RankedConfiguration(
            values={k: param_value(text) for k, text in zip(keys, key, strict=True) if text is not None},
            mean=sum(value for value, _ in members) / len(members),
            runs=tuple(run for _, run in sorted(members, key=lambda member: sign * member[0])),
        )
        for key, members in groups.items()
    ]
    return sorted(ranked, key=lambda configuration: sign * configuration.mean)


def winner_run(parent: Run, runs: list[Run], metric: str) -> Run | None:
    """The trial whose model a sweep keeps: the best seed of the race's winner when the sweep was a decided
    seed race, else of the best configuration by mean; None when no trial is usable."""
    mode = sweep_mode(parent, runs)
    if parent.data.tags.get(names.RACE_WINNER):
        won = [run for run in runs if run.data.tags.get(names.RACE_STATUS) == RACE_WINNER_STATUS]
        ranked = rank_configurations(won, metric, swept_keys(parent), mode)
        if ranked:
            return ranked[0].best_run
    ranked = rank_configurations(runs, metric, swept_keys(parent), mode)
    return ranked[0].best_run if ranked else None
