"""A seed race's record on its parent run: the decision tag and the eliminations table, when there are any."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dicelab.analysis._store import ArtifactUnavailable, download_artifact
from dicelab.analysis.runs import RunSet

ELIMINATIONS_ARTIFACT = "race/eliminations.csv"  # written by the sweep's racing driver


@dataclass(frozen=True)
class RaceRecord:
    experiment: str
    sweep_id: str
    parent_run_id: str
    decision: str  # the parent run's dicelab.race.decision tag, as written
    eliminations: pd.DataFrame | None  # race/eliminations.csv; None when the run has none


def race_records(runs: RunSet) -> list[RaceRecord]:
    """One record per sweep invocation that ran as a seed race (its parent run carries a race decision)."""
    if "race_decision" not in runs.parents:
        return []
    raced = runs.parents[runs.parents["race_decision"].notna()]
    return [
        RaceRecord(
            str(parent.experiment),
            str(parent.sweep_id),
            str(parent.run_id),
            str(parent.race_decision),
            _eliminations(runs.tracking_uri, str(parent.run_id)),
        )
        for parent in raced.itertuples()
    ]


def _eliminations(tracking_uri: str, run_id: str) -> pd.DataFrame | None:
    with tempfile.TemporaryDirectory() as scratch:
        try:
            return pd.read_csv(download_artifact(tracking_uri, run_id, ELIMINATIONS_ARTIFACT, Path(scratch)))
        except (ArtifactUnavailable, OSError, pd.errors.ParserError, pd.errors.EmptyDataError):
            return None
