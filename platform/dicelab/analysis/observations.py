"""Which number each trial contributes (best or final dev metric), and whether it counts in the statistics."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from dicelab.analysis.runs import RunSet
from dicelab.errors import DicelabError, TrackingError
from dicelab.stats import TESTS
from dicelab.tracking import conventions as names

TASK = "task.name"
VARIANT = "data.variant"
LOSS = "loss.name"
SEED = "train.seed"
# Params that only replicate a configuration (different random draws), never a hyperparameter.
REPLICATE_KEYS = (SEED, "data.variant_options.seed", "data.synthetic.seed")
# Params that cannot change a result (where files go, logging cadence, thread counts).
BOOKKEEPING_PREFIXES = ("tracking.",)
BOOKKEEPING_KEYS = ("data.cache_dir", "train.num_threads", "train.log_every_steps", "train.eval_batch_size")
LOSS_ORDER = ("ce", "wce", "focal", "dice", "tversky", "dsc")  # the paper's order; others follow by name
VARIANT_ORDER = ("original", "+positive", "+negative", "-negative", "+positive+negative")
MISSING_LABEL = "n/a"  # a group key the runs did not log (e.g. no data.variant param)
DEGENERATE = "degenerate"  # the exclusion of a trial tagged dicelab.degenerate

_METRIC_LABELS = {"f1": "F1", "macro_f1": "macro F1", "em": "EM", "accuracy": "accuracy"}


@dataclass(frozen=True)
class AnalysisOptions:
    metric: str | None = None  # dev metric without prefix ("f1"); None: each trial's dicelab.metric tag
    use: Literal["best", "final"] = "best"  # best_dev_<metric> over evaluations, or the last dev_<metric>
    include_early_stopped: bool = True  # a stopped trial's best value is still an observation of its config
    confidence: float = 0.95
    baseline: str = "loss.name=ce"  # KEY=VALUE: the configuration(s) every other one is compared with
    detect: float | None = None  # difference to size seeds for; None: the paper's delta, else 1 point
    test: Literal["permutation", "t"] = "permutation"  # the paired test behind every p-value

    def __post_init__(self) -> None:
        if self.use not in ("best", "final"):
            raise DicelabError(f"use must be 'best' or 'final', got {self.use!r}")
        if not 0.0 < self.confidence < 1.0:
            raise DicelabError(f"confidence must be between 0 and 1, got {self.confidence}")
        key, equals, value = self.baseline.partition("=")
        if not (key.strip() and equals and value.strip()):
            raise DicelabError(f"baseline must be KEY=VALUE (e.g. loss.name=ce), got {self.baseline!r}")
        if self.detect is not None and not (math.isfinite(self.detect) and self.detect > 0):
            raise DicelabError(
                f"detect must be a positive difference in the metric's unit, got {self.detect}"
            )
        if self.test not in TESTS:
            raise DicelabError(f"test must be one of {', '.join(TESTS)}, got {self.test!r}")

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def baseline_key(self) -> str:
        return self.baseline.partition("=")[0].strip()

    @property
    def baseline_value(self) -> str:
        return self.baseline.partition("=")[2].strip()

    def column(self, metric: str) -> str:
        return names.best_metric(metric) if self.use == "best" else names.dev_metric(metric)

    @property
    def counted_outcomes(self) -> tuple[str, ...]:
        return (names.COMPLETED, names.EARLY_STOPPED) if self.include_early_stopped else (names.COMPLETED,)


def exclusion_counts(rows: pd.DataFrame, options: AnalysisOptions) -> dict[str, int]:
    """n_failed (outcome not counted), n_degenerate, n_missing (no finite value) among `rows`."""
    failed = ~rows["outcome"].isin(options.counted_outcomes)
    degenerate = ~failed & (rows["exclusion"] == DEGENERATE)
    missing = ~failed & ~degenerate & ~rows["usable"]
    return {
        "n_failed": int(failed.sum()),
        "n_degenerate": int(degenerate.sum()),
        "n_missing": int(missing.sum()),
    }


def exclusion_reasons(rows: pd.DataFrame, options: AnalysisOptions) -> str:
    """Why trials of `rows` do not count, e.g. "3 failed, 1 degenerate" ("" when all of them count)."""
    counts = exclusion_counts(rows, options)
    reasons = (("n_failed", "failed"), ("n_degenerate", "degenerate"), ("n_missing", "without a value"))
    return ", ".join(f"{counts[key]} {word}" for key, word in reasons if counts[key])


def paper_order(name: str, preferred: tuple[str, ...]) -> tuple[int, str]:
    """Sort key: names in the paper's order first, the rest alphabetically."""
    return (preferred.index(name) if name in preferred else len(preferred), name)


def metric_label(metric: str) -> str:
    return _METRIC_LABELS.get(metric, metric)


def observations(runs: RunSet, options: AnalysisOptions) -> pd.DataFrame:
    """The trials with `metric`, `value` (scaled to the paper's unit), `unit`, `usable` and `exclusion`.

    A trial is usable when its outcome counts (completed, early_stopped unless excluded), its value is
    finite and it is not tagged degenerate; every other trial keeps its row with `exclusion` saying why
    (failed, NaN metric, degenerate, ...).
    Scores whose values all lie in [0, 1] are shown in percent, like the paper's tables (a loss is not).
    """
    frame = runs.trials.copy()
    if options.metric:
        _check_metric(frame, options)
    for key in (TASK, VARIANT, LOSS):
        frame[key] = frame[key].fillna(MISSING_LABEL).astype(str) if key in frame else MISSING_LABEL
    frame["metric"] = _resolved_metric(frame, options)
    raw = np.full(len(frame), math.nan)
    present = np.zeros(len(frame), dtype=bool)
    for metric, rows in frame.groupby("metric", sort=False).groups.items():
        column = options.column(str(metric))
        if column in frame:
            positions = frame.index.get_indexer(rows)
            raw[positions] = pd.to_numeric(frame.loc[rows, column], errors="coerce").to_numpy(dtype=float)
            present[positions] = [column in logged for logged in frame.loc[rows, "logged_metrics"]]
    counted = frame["outcome"].isin(options.counted_outcomes).to_numpy()
    # MLflow stores +-inf as +-float max, so those count as infinite too.
    finite = np.isfinite(raw) & (np.abs(raw) < sys.float_info.max)
    degenerate = (
        frame["degenerate"].notna().to_numpy() if "degenerate" in frame else np.zeros(len(frame), bool)
    )
    frame["exclusion"] = np.select(
        [~counted, ~present, ~finite, degenerate],
        [frame["outcome"].astype(str), "metric not logged", "metric is NaN or inf", DEGENERATE],
        default="",
    )
    # A degenerate trial (one class predicted) keeps its value in trials.csv but enters no mean.
    frame["usable"] = counted & finite & ~degenerate
    frame["scale"] = 1.0
    for metric, rows in frame.groupby("metric", sort=False).groups.items():
        positions = frame.index.get_indexer(rows)
        values = raw[positions][finite[positions]]
        is_loss = str(metric).endswith("loss")  # log_loss: a cross entropy, not a share
        if values.size and values.min() >= 0.0 and values.max() <= 1.0 and not is_loss:
            frame.loc[rows, "scale"] = 100.0
    frame["value"] = np.where(finite, raw, math.nan) * frame["scale"].to_numpy()
    frame["unit"] = np.where(frame["scale"] == 100.0, "%", "")
    return frame


def _check_metric(frame: pd.DataFrame, options: AnalysisOptions) -> None:
    """A --metric that no trial logged, while trials logged others, is a typo, not a sweep of failures."""
    prefix = options.column("")
    logged: set[str] = set().union(*(metrics for metrics in frame["logged_metrics"] if metrics))
    found = sorted(name.removeprefix(prefix) for name in logged if name.startswith(prefix))
    if found and options.metric not in found:
        raise DicelabError(
            f"--metric {options.metric}: no trial logged {options.column(options.metric)} "
            f"(the trials' dev metrics: {', '.join(found)})"
        )


def _resolved_metric(frame: pd.DataFrame, options: AnalysisOptions) -> pd.Series:
    if options.metric:
        return pd.Series(options.metric, index=frame.index)
    # Trials that failed before tagging take their task's usual metric (else the sweep's usual one).
    tagged = frame["metric"]
    usual = tagged.groupby(frame[TASK]).agg(lambda s: s.mode().iloc[0] if s.notna().any() else None)
    resolved = tagged.fillna(frame[TASK].map(usual))
    if tagged.notna().any():
        resolved = resolved.fillna(tagged.mode().iloc[0])
    elif len(frame):
        raise TrackingError(
            f"no trial has a {names.PRIMARY_METRIC} tag to say which metric it selected on; "
            "pass --metric (e.g. --metric f1)"
        )
    return resolved.astype(str)


def metric_range(unit: str) -> tuple[float, float] | None:
    """The range a metric can take: percent scores lie in [0, 100]; a metric of unknown kind has none."""
    return (0.0, 100.0) if unit == "%" else None


def value_label(metric: str, unit: str, options: AnalysisOptions) -> str:
    """Axis and column label, e.g. "best dev F1 (%)"."""
    which = "best dev" if options.use == "best" else "final dev"
    return f"{which} {metric_label(metric)}" + (f" ({unit})" if unit else "")


def hyperparameter_columns(frame: pd.DataFrame, param_columns: list[str]) -> list[str]:
    """Params that vary within `frame` and are neither group keys, replicates nor bookkeeping.

    The loss's own params come first (loss.alpha before train.learning_rate).
    """
    skip = {TASK, VARIANT, LOSS, *REPLICATE_KEYS, *BOOKKEEPING_KEYS}
    varying = [
        column
        for column in param_columns
        if column in frame
        and column not in skip
        and not column.startswith(BOOKKEEPING_PREFIXES)
        and frame[column].nunique(dropna=True) > 1
    ]
    return sorted(varying, key=lambda column: (not column.startswith("loss."), column))
