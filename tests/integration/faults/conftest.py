"""What several fault tests share: real small disks that can be filled up, and polls of a sweep's store that
cost little CPU."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# How often a fault test looks at the sweep's MLflow store while it waits for the moment of its fault. One
# look (a query of the experiment's runs and their metric histories) costs about 0.07 CPU-s; the shared
# wait_until looks every 0.5 s, which over the minutes a sweep takes on a loaded 2-core machine cost the
# test process as much CPU as a trial's worker. Every 1.5 s the fault still lands within an epoch or two.
POLL_S = 1.5


def every(seconds: float, predicate: Callable[[], Any]) -> Callable[[], Any]:
    """`predicate`, called at most once every `seconds` (falsy in between), for `wait_until`."""
    last = [float("-inf")]

    def throttled() -> Any:
        if time.monotonic() - last[0] < seconds:
            return None
        last[0] = time.monotonic()
        return predicate()

    return throttled


class SmallDisks:
    """tmpfs mounts of this test (needs root, as in CI's containers: the test is skipped elsewhere)."""

    def __init__(self) -> None:
        self.mounted: list[Path] = []

    def mount(self, path: Path, size: str) -> Path:
        """A tmpfs of `size` ("1m", "64m") mounted at `path` (created)."""
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): needs root")
        self.mounted.append(path)
        return path

    @staticmethod
    def fill(filler: Path) -> None:
        """Write `filler` until its disk has no space left (closing it may fail too: ignored)."""
        with contextlib.suppress(OSError), filler.open("wb") as out:
            while True:
                out.write(b"\0" * 65536)
                out.flush()

    def unmount_all(self) -> None:
        for path in reversed(self.mounted):
            subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def small_disks() -> Iterator[SmallDisks]:
    disks = SmallDisks()
    try:
        yield disks
    finally:
        disks.unmount_all()


@pytest.fixture
def seldom() -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    """`seldom(predicate)`: the predicate looked at every POLL_S seconds (conftest modules are not importable
    under --import-mode=importlib, hence a fixture)."""
    return lambda predicate: every(POLL_S, predicate)
