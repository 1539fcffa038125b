"""The quick modes of the scale benchmarks, run as a user would: benchmarks/tracking_scale.py --quick (a
PostgreSQL team server, a 40-run store written in bulk and checked against log_batch, analyses over HTTP and
the database URI, phases and growth ratios) and benchmarks/sweep_scale.py --quick (a 4-trial sweep of trials
that train nothing, one at a time, on local Ray against SQLite). Both start servers or Ray in their own
processes, so they are integration tests by hand (tests/conftest.py cannot see inside the subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dicelab.tracking import team_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("MLFLOW_", "RAY_"))}
    environment[team_server.WORKERS_VARIABLE] = "1"  # a team server serving the benchmark alone
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=1400,
        cwd=cwd,
        env=environment,
        check=False,
    )


def test_tracking_scale_quick_writes_a_checked_store_and_times_every_phase(tmp_path):
    store = Path(f"/tmp/dl-scale-test-{os.getpid()}")  # below /tmp: reachable by the postgres user as root
    out = tmp_path / "scale.json"
    try:
        done = _run("tracking_scale.py", "--quick", "--store", str(store), "--out", str(out), cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "bulk loader checked against log_batch" in done.stdout
        figures = json.loads(out.read_text())
        assert figures["store"]["runs"] == 40
        rows = figures["analyze"]
        assert sorted((row["runs"], row["source"]) for row in rows) == sorted(
            (runs, source) for runs in (10, 20) for source in ("http", "database")
        )
        for row in rows:
            assert row["trials"] == row["runs"]
            phases = ("search", "paper", "tables", "histories", "report")
            assert all(row[f"{phase}_s"] >= 0 for phase in phases), row
            assert row["histories_s"] > 0 and row["search_s"] > 0, row  # both reads happened
        assert set(figures["http_analyze_growth"]) == {"10->20"}
        recorded = team_server.TeamServer.load(store)  # stopped at the end, the store kept for reuse
        assert recorded.mlflow is None and recorded.postgres is None
        assert (store / "scale-store.json").is_file()
    finally:
        recorded = team_server.TeamServer.load(store) if (store / "server.json").is_file() else None
        if recorded is not None:
            recorded.stop()
        shutil.rmtree(store, ignore_errors=True)


def test_sweep_scale_quick_meters_a_sweep_of_trials_that_train_nothing(tmp_path):
    out = tmp_path / "sweep.json"
    done = _run("sweep_scale.py", "--quick", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["exit_code"] == 0
    assert row["trials"] == row["trials_finished"] == 4
    assert row["recorded_p50_ms"] is not None and 0 < row["recorded_p50_ms"] <= row["recorded_p95_ms"]
    assert row["state_saves"] > 0 and row["driver_cpu_ms_per_trial"] > 0 and row["searcher_ms_per_trial"] > 0
    # MLflow requests counted in the driver and in the trial worker: each trial creates its run and logs
    assert row["trial_workers"] == 1 and row["trial_requests"]["create_run"] == 4
    assert row["trial_requests"]["log_batch"] >= 4
    # each ended trial's run read by the id its results carry, not searched for
    assert row["driver_requests"]["get_run"] >= 4 and row["driver_requests"]["search_runs"] < 4
    assert row["requests_per_trial"] == pytest.approx(
        (sum(row["driver_requests"].values()) + sum(row["trial_requests"].values())) / 4, abs=0.01
    )
    assert row["http_requests_per_trial"] == 0  # SQLite: no HTTP
    assert row["driver_peak_rss_mb"] > 100 and row["trial_seconds"] == 1.0
