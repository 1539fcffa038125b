"""Fewer garbage collections while an analysis allocates its tables, tests and figures.

Python starts a collection every 700 net allocations of container objects, and every hundredth is a full
one over the whole heap; an analysing process holds MLflow, pandas, SciPy, Optuna and matplotlib, millions
of objects, and a report allocates pandas and Optuna objects by the hundred thousand: most of those full
collections walk the libraries' objects, not the report's (measured in docs/performance.md). Only cyclic
garbage waits longer for its collection; everything else is freed as before.
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


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collector's first threshold to FIRST_THRESHOLD for the block, then put back what was set.
    A threshold of 0 (collection switched off) or one already higher is kept as it is."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            first, second, third = _saved = gc.get_threshold()
            if 0 < first < FIRST_THRESHOLD:
                gc.set_threshold(FIRST_THRESHOLD, second, third)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
