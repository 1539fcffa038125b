"""Reading a SQL store without MLflow: experiments, params and local artifacts come from MLflow's tables and
files directly (dicelab.tracking.sql_tables); artifacts behind a tracking server's proxy fall back as MLflow's
own client would. With DICELAB_ANALYSIS_SQL=0, or tables of a schema dicelab does not know, MLflow's public
client reads the same runs."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa

from dicelab.analysis import _run_tables, _store, load_runs
from dicelab.analysis.publishing import log_report
from dicelab.errors import TrackingError
from dicelab.tracking import conventions as names
from dicelab.tracking import sql_tables

PAPER = {"metric": "f1", "results": {"ce": {"original": 91.3}}}


def test_a_sql_store_is_read_without_importing_mlflow(tracking_uri, sweep_log):
    """`dicelab analyze --no-log` of a SQL store: the runs, the paper's numbers from the config artifact and
    the report's modules, and MLflow never imported (about 3.5 s of the command)."""
    log = sweep_log("quick", paper=PAPER)
    for seed in range(3):
        log.trial(0.8 + seed / 100, loss="ce", seed=seed)
    script = textwrap.dedent(
        f"""
        import json, sys
        import dicelab.analysis.report, dicelab.cli.analyze
        from dicelab.analysis import load_runs
        runs = load_runs("quick", {tracking_uri!r})
        print(json.dumps({{
            "mlflow": sorted(m for m in sys.modules if m == "mlflow" or m.startswith("mlflow.")),
            "trials": len(runs.trials),
            "paper": runs.papers["quick"].result("ce", "original"),
        }}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    found = json.loads(done.stdout.splitlines()[-1])
    assert found == {"mlflow": [], "trials": 3, "paper": 91.3}


def test_a_report_is_logged_to_a_sql_stores_parent_run_without_opening_mlflows_store(
    tracking_uri, sweep_log, tmp_path
):
    """The report goes to the parent run's artifact root, read with SQL, through MLflow's artifact
    repository: MLflow's tracking store (1.5 CPU-s to open for SQLite) is never opened, and MLflow's client
    lists the files where they were logged. A root behind a team server's proxy is out of a database URI's
    reach: MLflow's client is asked, and its refusal is one line that says where the report is. (The
    report's own sections import no MLflow: test_a_sql_store_is_read_without_importing_mlflow.)

    In a process of its own: MLflow caches each run's artifact repository per process (the sweep logged here
    made one for the proxied run's old root), and the store must not have been opened before."""
    log = sweep_log("quick")
    log.trial(0.8)
    proxied = sweep_log("proxied")
    proxied.trial(0.9)
    _set_artifact_root(tracking_uri, proxied.parent_id, f"mlflow-artifacts:/1/{proxied.parent_id}/artifacts")
    out = tmp_path / "report"
    (out / "figures").mkdir(parents=True)
    (out / "report.html").write_text("<html></html>")
    (out / "figures" / "a.png").write_bytes(b"png")
    script = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        from dicelab.analysis import load_runs
        from dicelab.analysis.publishing import log_report
        from dicelab.errors import TrackingError
        run = log_report(load_runs("quick", {tracking_uri!r}), Path({str(out)!r}))
        opened = "mlflow.store.tracking.sqlalchemy_store" in sys.modules
        try:
            log_report(load_runs("proxied", {tracking_uri!r}), Path({str(out)!r}))
            error = None
        except TrackingError as raised:
            error = str(raised)
        print(json.dumps({{"run": run, "tracking_store": opened, "error": error}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    found = json.loads(done.stdout.splitlines()[-1])
    assert (found["run"], found["tracking_store"]) == (log.parent_id, False)
    logged = {item.path for item in log.client.list_artifacts(log.parent_id, names.REPORT_DIR)}
    assert logged == {f"{names.REPORT_DIR}/report.html", f"{names.REPORT_DIR}/figures"}
    figures = log.client.list_artifacts(log.parent_id, f"{names.REPORT_DIR}/figures")
    assert [item.path for item in figures] == [f"{names.REPORT_DIR}/figures/a.png"]

    error = found["error"]
    assert error.startswith(f"the report is in {out} but logging it to MLflow failed: "), error
    assert "the tracking URI must be a valid http or https URI" in error and "\n" not in error  # one line


def _set_artifact_root(uri: str, run_id: str, root: str) -> None:
    engine = sa.create_engine(uri)
    try:
        with engine.begin() as connection:
            runs = sql_tables.RUNS
            connection.execute(sa.update(runs).where(runs.c.run_uuid == run_id).values(artifact_uri=root))
    finally:
        engine.dispose()


def test_proxied_artifacts_fall_back_to_the_parent_runs_params(tracking_uri, sweep_log, tmp_path):
    """A team server keeps artifacts behind its proxy (mlflow-artifacts:/...), which a database URI cannot
    reach: the paper numbers come from the parent run's params, as with MLflow's client."""
    log = sweep_log("quick", paper={"metric": "f1", "results": {"ce": {"original": 50.0}}})
    log.client.log_param(log.parent_id, "paper.results.ce.original", "91.3")
    log.trial(0.9)
    _set_artifact_root(tracking_uri, log.parent_id, f"mlflow-artifacts:/1/{log.parent_id}/artifacts")

    with pytest.raises(_store.ArtifactUnavailable, match="only through the tracking server"):
        _store.download_artifact(tracking_uri, log.parent_id, names.CONFIG_ARTIFACT, tmp_path)
    assert load_runs("quick", tracking_uri).papers["quick"].result("ce", "original") == 91.3


def test_a_local_artifact_is_read_where_it_lies(tracking_uri, sweep_log, tmp_path):
    log = sweep_log("quick", paper=PAPER)
    path = _store.download_artifact(tracking_uri, log.parent_id, names.CONFIG_ARTIFACT, tmp_path)
    assert Path(log.client.get_run(log.parent_id).info.artifact_uri.removeprefix("file://")) in path.parents
    with pytest.raises(_store.ArtifactUnavailable, match="does not exist"):
        _store.download_artifact(tracking_uri, log.parent_id, "race/eliminations.csv", tmp_path)


def test_a_deleted_experiment_is_not_found(tracking_uri, sweep_log):
    sweep_log("kept").trial(0.9)
    gone = sweep_log("gone")
    gone.trial(0.9)
    gone.client.delete_experiment(gone.experiment_id)
    assert _store.find_experiment(tracking_uri, "kept").name == "kept"
    with pytest.raises(TrackingError, match=r"no experiment 'gone' in .*\(available: Default, kept\)"):
        _store.find_experiment(tracking_uri, "gone")


def test_a_store_that_is_not_mlflows_is_one_line(tmp_path):
    path = tmp_path / "other.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE notes (body TEXT)"))
    engine.dispose()
    with pytest.raises(TrackingError, match=r"cannot read the MLflow store .*other\.db: .*no such table"):
        _store.find_experiment(f"sqlite:///{path}", "quick")
    assert sa.inspect(sa.create_engine(f"sqlite:///{path}")).get_table_names() == ["notes"]  # left as it was


def _trials(runs) -> pd.DataFrame:
    return runs.trials.drop(columns=["logged_metrics"]).sort_values("run_id", ignore_index=True)


def test_with_the_switch_off_mlflows_client_reads_the_same_runs(
    tracking_uri, sweep_log, monkeypatch, tmp_path
):
    log = sweep_log("quick", paper=PAPER)
    for seed in range(3):
        log.trial(0.8 + seed / 100, loss="ce", seed=seed)
    log.trial(None, loss="dsc", outcome="failed", reason="boom", history=[])
    with_sql = load_runs("quick", tracking_uri)

    monkeypatch.setenv(_store.SQL_SWITCH, "0")

    def refuse(*args: object) -> None:
        raise AssertionError("read with SQL although DICELAB_ANALYSIS_SQL=0")

    monkeypatch.setattr(_run_tables, "_read_sql", refuse)
    monkeypatch.setattr(_store, "_find_sql", refuse)
    monkeypatch.setattr(_store, "artifact_root", refuse)
    with_client = load_runs("quick", tracking_uri)
    pd.testing.assert_frame_equal(_trials(with_sql), _trials(with_client), check_dtype=False)
    assert with_client.papers["quick"].result("ce", "original") == 91.3
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.html").write_text("<html></html>")
    assert log_report(with_client, out) == log.parent_id  # through MLflow's client
    assert [item.path for item in log.client.list_artifacts(log.parent_id, names.REPORT_DIR)] == [
        f"{names.REPORT_DIR}/report.html"
    ]


def test_tables_it_does_not_know_are_read_by_mlflows_client_with_one_warning(
    tracking_uri, sweep_log, monkeypatch, caplog
):
    """A newer MLflow that renamed a column dicelab reads: the SQL fails, MLflow's client reads the runs."""
    log = sweep_log("quick", paper=PAPER)
    log.trial(0.8, seed=1)
    log.trial(0.7, seed=2)
    expected = load_runs("quick", tracking_uri)
    monkeypatch.setattr(_store, "_unreadable", set())
    renamed = sa.Table(
        "runs",
        sa.MetaData(),
        *(sa.Column(c.name, c.type) for c in sql_tables.RUNS.columns if c.name != "status"),
        sa.Column("run_status", sa.String(20), key="status"),  # what dicelab's query asks for
    )
    monkeypatch.setattr(sql_tables, "RUNS", renamed)
    with caplog.at_level(logging.WARNING, logger=_store.__name__):
        found = load_runs("quick", tracking_uri)
    pd.testing.assert_frame_equal(_trials(expected), _trials(found), check_dtype=False)
    assert found.papers["quick"].result("ce", "original") == 91.3
    warnings = [r.getMessage() for r in caplog.records if r.name == _store.__name__]
    assert len(warnings) == 1 and "reading through MLflow's client instead" in warnings[0], warnings
    assert not _store.reads_sql(tracking_uri)  # for the rest of the process
