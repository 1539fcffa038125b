"""What several fault tests share: real small disks that can be filled up, and looks at a sweep's store that
cost next to no CPU."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dicelab.tracking import conventions as names

# What a fault test waits for (a trial finished, another one evaluating on a given node) is read from the
# sweep's SQLite store with SQL, read-only: about a millisecond a look, where an MlflowClient look (a search
# of the experiment's runs and their metric histories) costs about 0.07 CPU-s. So the tests look every
# 0.5 s (the integration conftest's wait_until) for nothing, and the fault lands within a second of its
# moment. What the tests assert is read through MlflowClient.
_REQUIRED = {
    "experiments": {"experiment_id", "name"},
    "runs": {"run_uuid", "experiment_id", "status"},
    "tags": {"key", "value", "run_uuid"},
    "metrics": {"key", "run_uuid", "step"},
}


@dataclass
class TrialLook:
    """A trial's run as the store holds it at one look."""

    run_id: str
    status: str  # MLflow's: RUNNING, FINISHED, FAILED, KILLED
    tags: dict[str, str] = field(default_factory=dict)
    evaluations: int = 0  # distinct steps of its dev metric


class StoreLooks:
    """Read-only SQL looks at the MLflow SQLite store `db` (a sweep's, or an MLflow server's backend)."""

    def __init__(self, db: Path, metric: str = "f1") -> None:
        self.db, self.metric = db, names.dev_metric(metric)
        self._checked = False

    def trials(self, experiment: str) -> list[TrialLook]:
        """The trial runs of `experiment`; [] while the store does not exist or is locked by a writer."""
        try:
            with contextlib.closing(sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=1)) as db:
                self._check(db)
                return self._trials(db, experiment)
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):  # a store being created: its tables come with its first run
                return []
            if "unable to open" in str(error) or "locked" in str(error):
                return []
            raise

    def _check(self, db: sqlite3.Connection) -> None:
        """MLflow's schema has the columns read here (else fail at once, not after a wait's timeout)."""
        if self._checked:
            return
        for table, needed in _REQUIRED.items():
            found = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            if not found:
                return  # not created yet: checked at a later look
            missing = needed - found
            assert not missing, f"MLflow's store has no {sorted(missing)} in table {table}: update StoreLooks"
        self._checked = True

    def _trials(self, db: sqlite3.Connection, experiment: str) -> list[TrialLook]:
        rows = db.execute(
            "SELECT r.run_uuid, r.status FROM runs r JOIN experiments e ON r.experiment_id = e.experiment_id"
            " JOIN tags t ON t.run_uuid = r.run_uuid WHERE e.name = ? AND t.key = ? AND t.value = ?",
            (experiment, names.ROLE, names.ROLE_TRIAL),
        ).fetchall()
        looks = {run_id: TrialLook(run_id, status) for run_id, status in rows}
        if not looks:
            return []
        marks = ",".join("?" * len(looks))
        for run_id, key, value in db.execute(
            f"SELECT run_uuid, key, value FROM tags WHERE run_uuid IN ({marks})", list(looks)
        ):
            looks[run_id].tags[key] = value
        for run_id, count in db.execute(
            f"SELECT run_uuid, COUNT(DISTINCT step) FROM metrics WHERE key = ? AND run_uuid IN ({marks})"
            " GROUP BY run_uuid",
            [self.metric, *looks],
        ):
            looks[run_id].evaluations = count
        return list(looks.values())


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
def store_looks() -> type[StoreLooks]:
    """StoreLooks, the class (conftest modules are not importable under --import-mode=importlib, hence a
    fixture): `store_looks(path_to_mlflow_db).trials(experiment)`."""
    return StoreLooks
