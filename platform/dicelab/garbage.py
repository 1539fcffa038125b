"""Fewer and shorter garbage collections in dicelab's processes.

Python starts a collection every 700 net allocations of container objects, and every hundredth is a full
one over the whole heap. A dicelab process holds torch, transformers, MLflow, Ray, pandas or SciPy:
hundreds of thousands of objects, which every full collection walks again, while importing them, while a
trial trains and while a report is built (measured in docs/performance.md). Two remedies:

- a first threshold of FIRST_THRESHOLD allocations (`fewer_collections` around an analysis,
  `for_this_process` in the processes dicelab starts: its commands and its trial workers), so that full
  collections come about 70 times less often;
- `freeze_imported` once a trial worker has imported what trials need: the libraries' objects, alive until
  the process ends, leave the collector's generations, so later collections walk only what came after.

Only cyclic garbage waits longer for its collection; everything else is freed as before.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

FIRST_THRESHOLD = 50_000
_lock = threading.Lock()
_depth = 0  # analyses running now (threads, or an analysis inside another): the last one restores
_saved: tuple[int, int, int] | None = None
_frozen = False
import os
_PLAIN = bool(os.environ.get("DICELAB_AB_PLAIN"))  # A/B switch (benchmarks/ray_speedups_ab.py)


def _raised(threshold: tuple[int, int, int]) -> tuple[int, int, int]:
    """`threshold` with its first value at FIRST_THRESHOLD, unless 0 (collection off) or already higher."""
    first, second, third = threshold
    return (FIRST_THRESHOLD, second, third) if 0 < first < FIRST_THRESHOLD else threshold


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collector's first threshold to FIRST_THRESHOLD for the block, then put back what was set.
    A threshold of 0 (collection switched off) or one already higher is kept as it is."""
    global _depth, _saved
    if _PLAIN:
        yield
        return
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(*_raised(_saved))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None


def for_this_process() -> None:
    """The raised first threshold for the rest of this process: for processes dicelab starts and owns (a
    `dicelab` command run as a program, a trial worker), never for a user's own process."""
    with _lock:
        gc.set_threshold(*_raised(gc.get_threshold()))


def freeze_imported() -> None:
    """Leave every object alive now out of later collections, once per process: called by a trial worker
    before its first trial, when it holds the libraries and nothing of a trial yet (an object frozen is never
    collected, so a later call could keep a finished trial's cyclic garbage for good)."""
    global _frozen
    if _PLAIN:
        return
    with _lock:
        if not _frozen:
            gc.freeze()
            _frozen = True
