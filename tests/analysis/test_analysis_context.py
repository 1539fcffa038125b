"""The report's context: from FORK_IMPORTANCE_FROM trials on, its importance is computed by a forked child
(`dicelab.forking`) and is the table computed here; a report that fails stops that child.

The child is forked from this test's process with `can_fork` patched (pytest-xdist's threads make it
false here); it only computes and answers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from dicelab import forking
from dicelab.analysis import context, load_runs, report
from dicelab.analysis.context import ReportContext
from dicelab.analysis.importance import importance_from_observations
from dicelab.analysis.observations import AnalysisOptions


@pytest.fixture(scope="module")
def runs(module_sweep_log, module_tracking_uri):
    log = module_sweep_log("importance")
    for alpha in (0.2, 0.4, 0.6, 0.8):
        for seed in range(3):
            value = 0.7 + alpha / 10 + seed / 100
            log.trial(value, loss="tversky", seed=seed, params={"loss.alpha": alpha, "loss.gamma": 1 + seed})
    return load_runs("importance", module_tracking_uri)


@pytest.fixture
def forkable(monkeypatch):
    monkeypatch.setattr(forking, "can_fork", lambda: True)


def test_from_the_threshold_a_child_computes_the_same_importance(runs, forkable, monkeypatch, tmp_path):
    monkeypatch.setattr(context, "FORK_IMPORTANCE_FROM", len(runs.trials))
    ctx = ReportContext(runs, AnalysisOptions(), tmp_path)
    assert ctx._importance.forked
    forked = ctx.importance
    here = importance_from_observations(ctx.obs, runs)
    assert not forked.table.empty
    pd.testing.assert_frame_equal(forked.table, here.table)
    assert forked.notes == here.notes


def test_below_the_threshold_it_is_computed_here(runs, forkable, monkeypatch, tmp_path):
    monkeypatch.setattr(context, "FORK_IMPORTANCE_FROM", len(runs.trials) + 1)
    ctx = ReportContext(runs, AnalysisOptions(), tmp_path)
    assert not ctx._importance.forked and not ctx.importance.table.empty


def test_a_report_that_fails_stops_the_child(runs, forkable, monkeypatch, tmp_path):
    monkeypatch.setattr(context, "FORK_IMPORTANCE_FROM", 0)
    children: list[int] = []
    built = ReportContext.__post_init__

    def remember(self: ReportContext) -> None:
        built(self)
        children.append(self._importance._pid)

    def fails(*args: object) -> None:
        raise RuntimeError("a section failed")

    monkeypatch.setattr(ReportContext, "__post_init__", remember)
    monkeypatch.setattr(report, "compose", fails)
    with pytest.raises(RuntimeError, match="a section failed"):
        report.build_report(runs, tmp_path / "report", log_to_mlflow=False)
    (pid,) = children
    assert pid is not None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped by the report
    assert not (tmp_path / "report").exists()


def test_an_analysis_in_a_terminal_still_forks(runs, module_tracking_uri, tmp_path):
    """The loading bar's refresh thread has ended, and the report's spinner runs none, when the report
    forks: in a single-threaded process every fork is taken."""
    script = textwrap.dedent(
        f"""
        import io
        from rich.console import Console
        from dicelab import forking
        from dicelab.analysis import context
        from dicelab.analysis.analyze import analyze_experiment

        context.FORK_IMPORTANCE_FROM = 0
        answers = []
        can_fork = forking.can_fork
        forking.can_fork = lambda: answers.append(can_fork()) or answers[-1]
        console = Console(file=io.StringIO(), force_terminal=True)
        assert console.is_terminal
        analyze_experiment(
            "importance", {module_tracking_uri!r}, out={str(tmp_path / "report")!r}, log_to_mlflow=False,
            console=console,
        )
        print(answers)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[True, True]"  # the importance's child, then the drawing one
