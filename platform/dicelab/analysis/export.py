"""The winning configuration of a tracked sweep as a runnable trial config (`dicelab export`).

The winner is the analysis's decision (`dicelab.analysis.comparisons`): the configuration with the best
mean over its usable trials (the highest, or the lowest when the sweep's mode is min), or the configuration
a seed race chose when the sweep raced and decided; of it, the seed with the best dev value. Its trial's
resolved config (the `config.yaml` its run logged, `train.seed` included) is the exported file, so
`dicelab trial best.yaml` trains that trial again (on CPU, to the same metrics) and `dicelab sweep best.yaml`
with `search: {seeds: [...]}` runs it on more seeds.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import mlflow
import pandas as pd
import yaml
from mlflow.exceptions import MlflowException

from dicelab.analysis._store import quiet_artifact_transfers
from dicelab.analysis.comparisons import ALL_VARIANTS, arena_mode, configurations, decisions
from dicelab.analysis.observations import (
    SEED,
    TASK,
    VARIANT,
    AnalysisOptions,
    exclusion_reasons,
    observations,
)
from dicelab.analysis.runs import RunSet, load_runs
from dicelab.errors import DicelabError
from dicelab.tracking import conventions as names
from dicelab.words import count

RACE_STATUS_WINNER = "winner"  # a trial run's dicelab.race.status when its configuration won the race
EXPORTED_SUFFIX = "-best"  # the exported config's name: its runs go to their own experiment


@dataclass(frozen=True)
class Winner:
    """The winning trial of an experiment (or of one sweep invocation of it)."""

    experiment: str
    sweep_id: str
    run_id: str
    configuration: str  # its label in the report, e.g. "dsc · loss.alpha=0.1"
    seed: int | None
    metric: str  # the dev metric it was chosen on, without prefix
    value: float  # its best dev value, as logged (a score in [0, 1], a loss, ...)
    mean: float  # its configuration's mean over seeds, in the report's unit (`unit`)
    seeds: int  # usable seeds of its configuration
    race_winner: bool  # chosen by the sweep's seed race
    config_yaml: str  # the trial's resolved config, as its run logged it
    unit: str = ""  # of `mean`: "%" for a score in [0, 1] shown in percent, as the report shows it
    mode: str = "max"  # max or min: whether its metric's best is the highest or the lowest value


def find_winner(
    experiment: str,
    tracking_uri: str | None = None,
    *,
    sweep_id: str | None = None,
    options: AnalysisOptions | None = None,
) -> Winner:
    """The winner of `experiment` (all its sweeps, or only `sweep_id`); DicelabError when there is none."""
    runs = load_runs(experiment, tracking_uri, sweep_ids=[sweep_id] if sweep_id else None)
    options = options or AnalysisOptions()
    obs = observations(runs, options)
    if not obs["usable"].any():
        why = exclusion_reasons(obs, options)  # "" without any trial
        raise DicelabError(
            f"experiment {experiment!r} has no usable trial to choose from" + (f": {why}" if why else "")
        )
    label, rows, raced = _race_winner(runs, obs) or _decided_best(runs, obs, options)
    usable = rows[rows["usable"]]
    mode = arena_mode(usable)
    best = usable.loc[usable["value"].idxmax() if mode == "max" else usable["value"].idxmin()]
    run_id = str(best["run_id"])
    metric = str(best["metric"])
    return Winner(
        experiment=experiment,
        sweep_id=str(best["sweep_id"]),
        run_id=run_id,
        configuration=label,
        seed=int(best[SEED]) if SEED in best and pd.notna(best[SEED]) else None,
        metric=metric,
        value=float(best[options.column(metric)]),
        mean=float(usable["value"].mean()),
        seeds=len(usable),
        race_winner=raced,
        config_yaml=_logged_config(runs.tracking_uri, run_id),
        unit=str(best["unit"]),
        mode=mode,
    )


def _decided_best(
    runs: RunSet, obs: pd.DataFrame, options: AnalysisOptions
) -> tuple[str, pd.DataFrame, bool]:
    """The decision's best configuration and its trials."""
    arenas = decisions(runs, options).arenas
    kinds = arenas[["task", "metric"]].drop_duplicates()
    if len(kinds) > 1:
        listed = ", ".join(f"{row.task}/{row.metric}" for row in kinds.itertuples())
        raise DicelabError(
            f"experiment {runs.experiments[0]!r} mixes tasks or metrics ({listed}): no one winner"
        )
    # several data variants: the best of their bests
    arena = arenas.loc[
        arenas["best_mean"].idxmax() if arena_mode(obs) == "max" else arenas["best_mean"].idxmin()
    ]
    group = obs[(obs[TASK] == arena["task"]) & (obs["metric"] == arena["metric"])]
    if arena["variant"] != ALL_VARIANTS:
        group = group[group[VARIANT] == arena["variant"]]
    configuration = next(c for c in configurations(group, runs.param_columns) if c.label == arena["best"])
    return configuration.label, configuration.rows, False


def _race_winner(runs: RunSet, obs: pd.DataFrame) -> tuple[str, pd.DataFrame, bool] | None:
    """The configuration the newest decided seed race in scope chose, with its trials; None without one."""
    raced = runs.parents.dropna(subset=["race_decision"]) if "race_decision" in runs.parents else None
    if raced is None or raced.empty:
        return None
    client = mlflow.MlflowClient(runs.tracking_uri)
    parent = client.get_run(str(raced.iloc[0]["run_id"]))
    if not parent.data.tags.get(names.RACE_WINNER):
        return None
    sweep_id = parent.data.tags.get(names.SWEEP_ID)
    won = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.`{names.SWEEP_ID}` = '{sweep_id}' and "
        f"tags.`{names.RACE_STATUS}` = '{RACE_STATUS_WINNER}'",
    )
    rows = obs[obs["run_id"].isin({run.info.run_id for run in won})]
    if not rows["usable"].any():
        return None
    return str(parent.data.tags[names.RACE_WINNER]), rows, True


def _logged_config(tracking_uri: str, run_id: str) -> str:
    with tempfile.TemporaryDirectory() as scratch, quiet_artifact_transfers():
        try:
            path = mlflow.artifacts.download_artifacts(
                run_id=run_id,
                artifact_path=names.CONFIG_ARTIFACT,
                dst_path=scratch,
                tracking_uri=tracking_uri,
            )
            return Path(path).read_text(encoding="utf-8")
        except (MlflowException, OSError) as error:
            raise DicelabError(f"run {run_id} has no readable {names.CONFIG_ARTIFACT}: {error}") from None


def winner_config(winner: Winner) -> str:
    """The winner's trial config as YAML: its resolved config under the name `<experiment>-best`, with a
    header saying where it comes from."""
    data = yaml.safe_load(winner.config_yaml)
    data["name"] = f"{winner.experiment}{EXPORTED_SUFFIX}"
    data.setdefault("tracking", {})["experiment"] = None
    how = "the configuration its seed race chose" if winner.race_winner else "the best configuration by mean"
    how += " (the lowest: mode min)" if winner.mode == "min" and not winner.race_winner else ""
    header = [
        f"# The winner of experiment {winner.experiment!r} (sweep {winner.sweep_id}), from `dicelab export`:",
        f"# {how}, {winner.configuration} (mean dev {winner.metric} {winner.mean:.2f}{winner.unit} over"
        f" {count(winner.seeds, 'seed')}),",
        f"# its best seed ({winner.seed}): best dev {winner.metric} {winner.value:.6f}, run {winner.run_id}.",
        "# `dicelab trial` on this file trains that trial again; to run it on more seeds with",
        "# `dicelab sweep`, add:  search: {seeds: [1, 2, 3, 4, 5]}",
    ]
    return "\n".join(header) + "\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
