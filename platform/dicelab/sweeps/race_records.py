"""A seed race's record in MLflow: the decision and every elimination on the sweep's parent run, and on each
trial's run whether its configuration was dropped, won, or was left undecided."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Run, RunTag

from dicelab.sweeps import records
from dicelab.sweeps.racing import DROPPED
from dicelab.tracking import conventions as names

ELIMINATIONS_ARTIFACT = "race/eliminations.csv"
DECISION_ARTIFACT = "race/decision.json"
ELIMINATION_COLUMNS = (
    "time",
    "trials_finished",
    "configuration",
    "leader",
    "paired",
    "n",
    "difference",
    "low",
    "high",
    "p",
    "p_holm",
    "family",
    "test",
    "why",
)
WINNER, UNDECIDED = "winner", "undecided"
# What a dropped trial's run keeps of its elimination: the analysis's Decision reports the drop with it.
EVIDENCE_KEYS = ("leader", "paired", "n", "difference", "low", "high", "p", "p_holm", "family", "test", "why")


def race_file(directory: Path) -> Path:
    """Where the race's live state is kept for a sweep directory: beside it, not inside. Tune syncs the
    experiment directory down on --resume and its own copy back up at every save, which would overwrite a
    file inside it with the stale copy."""
    return directory.parent / f"{directory.name}.race.json"


def read_race(directory: Path) -> dict[str, Any] | None:
    """The race state of a sweep directory (None: not a race, or nothing started yet)."""
    try:
        return json.loads(race_file(directory).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def eliminations_csv(events: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=ELIMINATION_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(events)
    return buffer.getvalue()


def log_race(client: MlflowClient, parent_run_id: str, race: dict[str, Any], runs: list[Run]) -> None:
    """Record the race (its state as `RaceSearcher` wrote it) on the parent run and the trials' runs."""
    decision = race.get("decision")
    summary = decision["summary"] if decision else "the race was interrupted before it decided"
    tags = [RunTag(names.RACE_DECISION, records.clip(summary))]
    if decision and decision.get("winner"):
        tags.append(RunTag(names.RACE_WINNER, records.clip(decision["winner"])))
    client.log_batch(parent_run_id, tags=tags)
    client.log_text(parent_run_id, eliminations_csv(race["events"]), ELIMINATIONS_ARTIFACT)
    client.log_text(
        parent_run_id,
        json.dumps({"decision": decision, "configurations": race["configurations"]}, indent=1),
        DECISION_ARTIFACT,
    )
    evidence = {event["configuration"]: event for event in race["events"]}
    tags_of: dict[str, list[RunTag]] = {}
    for trial_id, (index, _seed) in race["trials"].items():
        status = race["status"][index]
        label = race["labels"][index]
        if status == DROPPED:
            status = DROPPED
        elif decision and label == decision.get("winner"):
            status = WINNER
        else:
            status = UNDECIDED
        tags = [RunTag(names.RACE_STATUS, status), RunTag(names.RACE_CONFIGURATION, records.clip(label))]
        if status == DROPPED and label in evidence:
            kept = {key: evidence[label].get(key) for key in EVIDENCE_KEYS}
            tags.append(RunTag(names.RACE_ELIMINATION, records.clip(json.dumps(kept))))
        tags_of[trial_id] = tags
    for run in runs:
        trial_id = run.data.tags.get(names.TRIAL_ID)
        if trial_id in tags_of:
            client.log_batch(run.info.run_id, tags=tags_of[trial_id])
