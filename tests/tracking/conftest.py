"""A team's tracking server for the tests: PostgreSQL 15 + `mlflow server` with basic auth, started once per
session in a temp dir on 127.0.0.1 and stopped by process id at the end, leaving no process and no directory.

PostgreSQL is a requirement of the test suite: without `initdb` the tests fail with a line saying how to
install it (never a skip, which would hide that the team-server path went untested).
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dicelab.errors import TrackingError
from dicelab.tracking import team_server


@dataclass
class TeamServerUnderTest:
    server: team_server.TeamServer
    username: str
    password: str
    # Ray's start-up waits raised for a busy 2-core machine (tests/conftest.py): a sweep's local Ray gets them
    ray_waits: dict[str, str] = field(default_factory=dict)

    @property
    def uri(self) -> str:
        return self.server.tracking_uri

    def env(self, **extra: str) -> dict[str, str]:
        """A client's environment: this server, its login, libpq's password file for the database URI, and
        Ray's start-up waits (no other RAY_ or MLFLOW_ variable of the test process)."""
        base = {key: value for key, value in os.environ.items() if not key.startswith(("MLFLOW_", "RAY_"))}
        return {
            **base,
            **self.ray_waits,
            **self.server.client_environment(),
            "MLFLOW_TRACKING_USERNAME": self.username,
            "MLFLOW_TRACKING_PASSWORD": self.password,
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
            "TOKENIZERS_PARALLELISM": "false",
            **extra,
        }


@pytest.fixture(scope="session")
def team_server_under_test(start_up_waits: dict[str, str]) -> Iterator[TeamServerUnderTest]:
    try:
        team_server.postgres_bin()
    except TrackingError as error:
        pytest.fail(str(error), pytrace=False)
    directory = Path(tempfile.mkdtemp(prefix="dl-ts-", dir="/tmp"))  # reachable by the postgres user
    password = secrets.token_urlsafe(18)
    with team_server.running(directory, ("admin", password)) as server:
        yield TeamServerUnderTest(server, "admin", password, dict(start_up_waits))
    assert not directory.exists()
