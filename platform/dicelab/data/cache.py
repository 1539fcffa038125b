"""Tokenized features cached on disk as Arrow, keyed by a fingerprint, built once per key.

    features, hit = cached_features(key, build, cache_dir)

`<cache_dir>/features/<fingerprint of key>/` holds a `DatasetDict.save_to_disk` directory and `key.json`
(what it was built from, for people). A build writes into a temporary directory that is renamed into place
when complete, under a file lock per key: trials racing for the same key build it once, the others wait
and load it, and a failed or killed build leaves nothing behind that looks complete.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import datasets
import datasets.utils.logging as datasets_logging
from filelock import FileLock

from dicelab.data.hashing import canonical_json, fingerprint

logger = logging.getLogger(__name__)

FEATURES_DIR = "features"
KEY_FILE = "key.json"


def cached_features(
    key: dict[str, Any],
    build: Callable[[], dict[str, datasets.Dataset]],
    cache_dir: str | Path,
) -> tuple[dict[str, datasets.Dataset], bool]:
    """The features for `key` (loaded memory-mapped from the cache) and whether they were already cached."""
    root = Path(cache_dir) / FEATURES_DIR
    target = root / fingerprint(key)
    if target.is_dir():  # published by a rename, so complete (unless damaged since: rebuilt below)
        loaded = _load_intact(target)
        if loaded is not None:
            return loaded, True
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if target.is_dir():  # built by another process while this one waited for the lock
            loaded = _load_intact(target)
            if loaded is not None:
                return loaded, True
            shutil.rmtree(target)  # truncated or corrupted after it was published: build it again
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=root))
        try:
            with _no_progress_bars():
                datasets.DatasetDict(build()).save_to_disk(str(staging))
            (staging / KEY_FILE).write_text(json.dumps(json.loads(canonical_json(key)), indent=2) + "\n")
            os.chmod(staging, 0o755)  # mkdtemp makes it private; the published directory should not be
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return _load(target), False


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """datasets' "Saving the dataset" bars off: a cache build is part of a trial, whose console says what it
    does in its own lines."""
    was_enabled = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            datasets_logging.enable_progress_bar()


def _load(directory: Path) -> dict[str, datasets.Dataset]:
    return dict(datasets.load_from_disk(str(directory)))


def _load_intact(directory: Path) -> dict[str, datasets.Dataset] | None:
    """The cached features, or None when they cannot be read (a truncated or overwritten Arrow file, a
    missing metadata file): a cache is rebuilt, never a reason for a sweep to crash."""
    try:
        return _load(directory)
    except Exception as error:  # pyarrow, datasets and the OS each raise their own kinds
        logger.warning("cached features %s are unreadable (%s): building them again", directory, error)
        return None


__all__ = ["cached_features", "fingerprint"]
