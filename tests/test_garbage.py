"""dicelab.garbage: the collector's first threshold raised for good in a trial worker (a prestarted one
before its imports), and a trial worker's imports frozen once."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from dicelab import garbage
from dicelab.garbage import FIRST_THRESHOLD
from dicelab.sweeps import warm_workers


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_a_trial_worker_raises_its_first_threshold_for_good_and_keeps_off_or_higher():
    garbage.for_this_process()
    assert gc.get_threshold()[0] == FIRST_THRESHOLD
    for first in (0, FIRST_THRESHOLD * 2):
        gc.set_threshold(first, 10, 10)
        garbage.for_this_process()
        assert gc.get_threshold()[0] == first


def _in_a_fresh_process(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


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
