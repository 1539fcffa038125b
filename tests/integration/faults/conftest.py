"""What several fault tests share: real small disks that can be filled up."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


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
