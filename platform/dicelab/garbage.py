"""Fewer and shorter garbage collections in dicelab's trial workers.

Python starts a collection every 700 net allocations of container objects, and every hundredth is a full
one over the whole heap. A dicelab process holds torch, transformers, MLflow, Ray, pandas or SciPy:
hundreds of thousands of objects, which every full collection walks again, while importing them, while a
trial trains and while a report is built. Two remedies, kept with a local sweep's Ray tuning
(benchmarks/ray_speedups_ab.py):

- a first threshold of FIRST_THRESHOLD allocations (`for_this_process` in the trial workers of a sweep),
  so that full collections come about 70 times less often;
- `freeze_imported` once a trial worker has imported what trials need: the libraries' objects, alive until
  the process ends, leave the collector's generations, so later collections walk only what came after.

Only cyclic garbage waits longer for its collection; everything else is freed as before. Part of a local
sweep's tuning (`DICELAB_RAY_TUNING=0` turns it off; benchmarks/results/ray_speedups_ab.md). dicelab's
commands (analyze, validate) leave Python's collector alone: there it bought no wall time.
"""

from __future__ import annotations

import gc
import threading

FIRST_THRESHOLD = 50_000
_lock = threading.Lock()
_frozen = False


def _raised(threshold: tuple[int, int, int]) -> tuple[int, int, int]:
    """`threshold` with its first value at FIRST_THRESHOLD, unless 0 (collection off) or already higher."""
    first, second, third = threshold
    return (FIRST_THRESHOLD, second, third) if 0 < first < FIRST_THRESHOLD else threshold


def for_this_process() -> None:
    """The raised first threshold for the rest of this process: for a trial worker (dicelab's own process),
    never for a user's own process."""
    with _lock:
        gc.set_threshold(*_raised(gc.get_threshold()))


def freeze_imported() -> None:
    """Leave every object alive now out of later collections, once per process: called by a trial worker
    before its first trial, when it holds the libraries and nothing of a trial yet (an object frozen is never
    collected, so a later call could keep a finished trial's cyclic garbage for good)."""
    global _frozen
    with _lock:
        if not _frozen:
            gc.freeze()
            _frozen = True
