"""dicelab.garbage: the collector's first threshold raised while an analysis runs and put back, raised for
good in dicelab's own processes (a command run as the program, a prestarted trial worker), and a trial
worker's imports frozen once."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from dicelab import garbage
from dicelab.analysis import report
from dicelab.garbage import FIRST_THRESHOLD, fewer_collections
from dicelab.sweeps import warm_workers


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_the_first_threshold_is_raised_inside_and_put_back_after_an_error():
    with pytest.raises(RuntimeError), fewer_collections():
        assert gc.get_threshold() == (FIRST_THRESHOLD, 10, 10)
        raise RuntimeError("a report that fails")
    assert gc.get_threshold() == (700, 10, 10)


def test_nested_and_concurrent_analyses_restore_once_the_last_one_ends():
    inner_started, outer_may_end = threading.Event(), threading.Event()
    seen: list[tuple[int, int, int]] = []

    def other_analysis() -> None:
        with fewer_collections():
            inner_started.set()
            outer_may_end.wait(10)
        seen.append(gc.get_threshold())

    with fewer_collections():
        with fewer_collections():  # an analysis inside another (analyze_experiment -> build_report)
            pass
        assert gc.get_threshold()[0] == FIRST_THRESHOLD
        thread = threading.Thread(target=other_analysis)
        thread.start()
        inner_started.wait(10)
    assert gc.get_threshold()[0] == FIRST_THRESHOLD  # the other thread's analysis still runs
    outer_may_end.set()
    thread.join(10)
    assert seen == [(700, 10, 10)] and gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("first", [0, 100_000])
def test_a_threshold_set_by_the_user_to_off_or_higher_is_kept(first: int):
    gc.set_threshold(first, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (first, 10, 10)
    assert gc.get_threshold() == (first, 10, 10)


def test_build_report_runs_with_the_raised_threshold(monkeypatch: pytest.MonkeyPatch, tmp_path):
    seen = []

    def compose_seeing_the_threshold(*args, **kwargs):
        seen.append(gc.get_threshold()[0])
        raise RuntimeError("stop here")

    monkeypatch.setattr(report, "compose", compose_seeing_the_threshold)
    monkeypatch.setattr(report, "ReportContext", lambda *args: _NoFigures())
    monkeypatch.setattr(report, "caveats", lambda ctx: [])
    with pytest.raises(RuntimeError, match="stop here"):
        report.build_report(_Runs(), tmp_path / "out", log_to_mlflow=False)
    assert seen == [FIRST_THRESHOLD] and gc.get_threshold() == (700, 10, 10)
    assert garbage._depth == 0


class _Runs:
    """Stands in for a RunSet: build_report reads its experiments for the report's folder."""

    def __init__(self) -> None:
        self.experiments = ["e"]


class _Figures:
    def drain(self) -> None:
        pass


class _NoFigures:
    """Stands in for ReportContext: a report that fails in `compose` drains its figures and closes it."""

    def __init__(self) -> None:
        self.figures = _Figures()

    def close(self) -> None:
        pass


def _in_a_fresh_process(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_dicelab_command_run_as_the_program_raises_its_threshold_for_good():
    code = (
        "import gc, sys\n"
        "from dicelab.cli.dispatch import main\n"
        "sys.argv = ['dicelab', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(gc.get_threshold()[0])"
    )
    assert _in_a_fresh_process(code) == str(FIRST_THRESHOLD)


def test_a_prestarted_trial_worker_raises_it_before_the_trials_imports():
    # the first of the modules a private local Ray's prestarted workers import
    assert warm_workers.TRIAL_MODULES[0] == "dicelab.sweeps.worker_start"
    code = "import gc, dicelab.sweeps.worker_start\nprint(gc.get_threshold()[0])"
    assert _in_a_fresh_process(code) == str(FIRST_THRESHOLD)


def test_the_imported_libraries_are_frozen_once_per_process():
    code = (
        "import gc\n"
        "from dicelab import garbage\n"
        "garbage.freeze_imported()\n"
        "first = gc.get_freeze_count()\n"
        "made = [[index] for index in range(1000)]  # a trial's objects, after the freeze\n"
        "garbage.freeze_imported()\n"
        "print(first > 0, gc.get_freeze_count() == first)"
    )
    assert _in_a_fresh_process(code) == "True True"
