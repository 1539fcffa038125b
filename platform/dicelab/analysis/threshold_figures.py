"""The report's threshold and calibration figures for a binary F1: the winner and CE (the baseline), from the
predictions their trials logged (`predictions/test.jsonl` where a test split was scored, else
`predictions/dev.jsonl`, both of the best state): precision-recall and F1-vs-threshold curves, confusion
matrices at the threshold each is judged at, a reliability diagram with the expected calibration error."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from dicelab.analysis import threshold_plots
from dicelab.analysis._store import ArtifactUnavailable, download_artifact
from dicelab.analysis.comparisons import configurations
from dicelab.analysis.context import ReportContext
from dicelab.analysis.document import Block, Heading, Image, Text
from dicelab.analysis.held_out import arena_rows
from dicelab.tracking import conventions as names

MAX_SEEDS_DRAWN = 20  # seeds read and drawn per configuration (a race may have run more)


def threshold_figures(ctx: ReportContext) -> list[Block]:
    blocks: list[Block] = []
    for _, arena in ctx.decisions.arenas.iterrows():
        if arena["metric"] != "f1":
            continue
        group = arena_rows(ctx.obs, arena)
        if names.THRESHOLD_METRIC not in group:
            continue  # not a binary classifier (or trials from before thresholds were logged)
        blocks += _arena_figures(ctx, arena, group)
    if not blocks:
        return []
    return [
        Heading("Threshold and calibration"),
        Text(
            "The winner and the baseline, from the predictions of their trials' reported (best) state: each "
            "seed faint, the mean over seeds bold. The winner is judged as it reports (threshold 0.5); the "
            "baseline also at its own threshold tuned for F1 on dev (the rival of the section above)."
        ),
        *blocks,
    ]


def _arena_figures(ctx: ReportContext, arena: pd.Series, group: pd.DataFrame) -> list[Block]:
    configs = {c.label: c for c in configurations(group, ctx.runs.param_columns)}
    shown = [str(arena["best"])]
    if arena["baseline"] and arena["baseline"] != arena["best"]:
        shown.append(str(arena["baseline"]))
    rows = {label: _usable(configs[label].rows) for label in shown if label in configs}
    with_test = all(
        names.test_metric("f1") in r and r[names.test_metric("f1")].notna().any() for r in rows.values()
    )
    split = "test" if with_test else "dev"
    artifact = names.TEST_PREDICTIONS_ARTIFACT if with_test else names.PREDICTIONS_ARTIFACT
    records = {label: _predictions(ctx.runs.tracking_uri, r["run_id"], artifact) for label, r in rows.items()}
    if not all(records.values()):
        missing = ", ".join(f"`{label}`" for label, found in records.items() if not found)
        return [
            Text(
                f"No threshold figures: the trials of {missing} logged no `{artifact}` "
                "(tracking.log_predictions)."
            )
        ]
    positive = _positive_label(next(iter(records.values()))[0])
    seeds = {label: [_scores(found, positive) for found in runs] for label, runs in records.items()}
    thresholds = {label: _mean(r, names.THRESHOLD_METRIC) for label, r in rows.items()}
    ece_column = (names.test_metric if with_test else names.best_metric)(names.ECE)
    ece = {label: _mean(r, ece_column) for label, r in rows.items()}
    where = f"task {arena['task']}" + (f" · {arena['experiment']}" if ctx.several else "")
    parts = (arena["experiment"], arena["task"], arena["variant"])
    curves = threshold_plots.threshold_curves_figure(
        seeds, thresholds, split=split, title=f"winner and baseline: precision, recall and F1 · {where}"
    )
    matrices = {
        f"{shown[0]} (winner)": (_confusion(records[shown[0]], positive, None), "as reported: threshold 0.5")
    }
    if len(shown) > 1:
        baseline_rows = rows[shown[1]]
        per_trial = list(pd.to_numeric(baseline_rows[names.THRESHOLD_METRIC], errors="coerce"))
        matrices[f"{shown[1]} (baseline)"] = (
            _confusion(records[shown[1]], positive, per_trial),
            f"at its dev-tuned threshold (mean {thresholds[shown[1]]:.2f})",
        )
    labels = _label_order(records[shown[0]][0], positive)
    confusion = threshold_plots.confusion_figure(
        matrices, labels, title=f"confusion matrices on {split}, summed over seeds · {where}"
    )
    reliability = threshold_plots.reliability_figure(seeds, ece, split=split, title=f"calibration · {where}")
    blocks: list[Block] = []
    for figure, kind, alt in (
        (curves, "threshold", "precision-recall and F1-vs-threshold curves"),
        (confusion, "confusion", "confusion matrices"),
        (reliability, "reliability", "reliability diagram"),
    ):
        blocks.append(Image(ctx.save(figure, kind, *parts), alt))
    return blocks


def _usable(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["usable"]].head(MAX_SEEDS_DRAWN)


def _predictions(uri: str, run_ids: pd.Series, artifact: str) -> list[list[dict]]:
    """Each run's prediction records; [] when any of them cannot be read."""
    found = []
    with tempfile.TemporaryDirectory(prefix="dicelab-predictions-") as scratch:
        for index, run_id in enumerate(run_ids):
            try:
                path = download_artifact(uri, str(run_id), artifact, Path(scratch) / str(index))
                lines = path.read_text(encoding="utf-8").splitlines()
            except (ArtifactUnavailable, OSError):
                return []
            found.append([json.loads(line) for line in lines if line.strip()])
    return found


def _positive_label(records: list[dict]) -> str:
    """The positive class: what a record with P(positive) > 0.5 predicts (the task predicts positive there),
    else the label that no record with P(positive) <= 0.5 predicts."""
    above = {str(r["prediction"]) for r in records if float(r["probability"]) > 0.5}
    if above:
        return above.pop()
    below = {str(r["prediction"]) for r in records}
    others = sorted({str(r["label"]) for r in records} - below)
    return others[0] if others else "1"


def _label_order(records: list[dict], positive: str) -> list[str]:
    negative = sorted(
        {str(r["label"]) for r in records} | {str(r["prediction"]) for r in records} - {positive}
    )
    return [*(negative[:1] or ["0"]), positive]


def _scores(records: list[dict], positive: str) -> tuple[np.ndarray, np.ndarray]:
    gold = np.array([str(r["label"]) == positive for r in records], dtype=np.int64)
    return gold, np.array([float(r["probability"]) for r in records])


def _confusion(runs: list[list[dict]], positive: str, thresholds: list[float] | None) -> np.ndarray:
    """Counts summed over runs: at each run's threshold (probability >= it predicts positive), or as the
    records predict (threshold None)."""
    from sklearn.metrics import confusion_matrix

    total = np.zeros((2, 2), dtype=np.int64)
    for index, records in enumerate(runs):
        gold, probability = _scores(records, positive)
        if thresholds is None:
            predicted = np.array([str(r["prediction"]) == positive for r in records], dtype=np.int64)
        else:
            predicted = (probability >= thresholds[index]).astype(np.int64)
        total += confusion_matrix(gold, predicted, labels=[0, 1])
    return total


def _mean(rows: pd.DataFrame, column: str) -> float:
    if column not in rows:
        return math.nan
    values = pd.to_numeric(rows[column], errors="coerce")
    return float(values.mean()) if values.notna().any() else math.nan
