"""What `dicelab analyze` and `dicelab.analyze()` both do: load an experiment's runs, judge them with the
options given (the paired test defaults to the one its seed race decided with) and write the report."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from rich.console import Console

from dicelab.analysis.observations import AnalysisOptions
from dicelab.analysis.report import Report, build_report
from dicelab.analysis.runs import RunSet, load_runs


def race_test(runs: RunSet) -> str | None:
    """The paired test the experiment's newest seed race decided with, if it was one: the analysis then
    judges by the same test as the race (a race on the t test would otherwise be re-read by a test that
    cannot decide below 6 seeds)."""
    own = runs.parents[runs.parents["experiment"] == runs.experiments[0]]
    tests = own["race_test"].dropna() if "race_test" in own else own.iloc[0:0]
    return str(tests.iloc[0]) if len(tests) else None


def newest_sweep(runs: RunSet) -> tuple[str, str] | None:
    """The newest sweep invocation of the report's experiment and a note naming it, when it has several."""
    own = runs.parents[runs.parents["experiment"] == runs.experiments[0]].dropna(subset=["sweep_id"])
    if own["sweep_id"].nunique() < 2:
        return None
    sweep_id = str(own.iloc[0]["sweep_id"])  # parents are newest first
    note = (
        f"`{runs.experiments[0]}` was swept {own['sweep_id'].nunique()} times: this report judges the newest "
        f"sweep, `{sweep_id}`, on its own (`--sweep-id ID` for another, `--all-sweeps` to pool them)"
    )
    return sweep_id, note


def analyze_experiment(
    experiment: str,
    tracking_uri: str | None = None,
    *,
    out: str | Path | None = None,
    compare: Sequence[str] = (),
    sweep_ids: Sequence[str] | None = None,
    metric: str | None = None,
    use: Literal["best", "final"] = "best",
    include_early_stopped: bool = True,
    confidence: float = 0.95,
    baseline: str = "loss.name=ce",
    detect: float | None = None,
    test: Literal["permutation", "t"] | None = None,
    log_to_mlflow: bool = True,
    console: Console | None = None,
    all_sweeps: bool = False,
) -> tuple[RunSet, Report]:
    """The experiment's runs and its report (see `dicelab analyze --help` for the options); `console`: where
    a spinner shows progress (None: no progress). Without `sweep_ids`, `compare` or `all_sweeps`, an
    experiment swept more than once is judged on its newest sweep invocation alone (a note says so)."""
    interactive = console is not None and console.is_terminal
    runs = load_runs([experiment, *compare], tracking_uri, sweep_ids=sweep_ids, progress=interactive)
    newest = None if sweep_ids or compare or all_sweeps else newest_sweep(runs)
    if newest is not None:
        # a second `make demo` (or any re-run) is judged on its own, not pooled with the earlier sweeps
        runs = load_runs(experiment, tracking_uri, sweep_ids=[newest[0]])
        runs.notes.insert(0, newest[1])
    options = AnalysisOptions(
        metric=metric,
        use=use,
        include_early_stopped=include_early_stopped,
        confidence=confidence,
        baseline=baseline,
        detect=detect,
        test=test or race_test(runs) or "permutation",  # type: ignore[arg-type]
    )
    spinner = console.status("writing the report") if console is not None and interactive else None
    with spinner or contextlib.nullcontext():
        report = build_report(runs, out, options, log_to_mlflow=log_to_mlflow)
    return runs, report
