"""The MLflow server stopped in the middle of a sweep and started again: the trials wait it out (the client's
retries), nothing is lost or duplicated."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest
from mlflow import MlflowClient

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

EPOCHS = 5
OUTAGE_S = 15


def _mlflow_server(tools, store: Path, port: int):
    from_bin = Path(tools.env["PATH"].split(":")[0]) / "mlflow"
    args = [
        str(from_bin),
        "server",
        "--host=127.0.0.1",
        f"--port={port}",
        "--workers=1",
        f"--backend-store-uri=sqlite:///{store / 'mlflow.db'}",
        f"--artifacts-destination={store / 'artifacts'}",
    ]
    return tools.start_process("mlflow-server", args, store)


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_mlflow_server_stopped_and_restarted_mid_sweep(tmp_path, sweep_tools, fault_figure, seldom):
    store = tmp_path / "mlflow"
    store.mkdir()
    port = sweep_tools.free_port()
    uri = f"http://127.0.0.1:{port}"
    server = _mlflow_server(sweep_tools, store, port)
    driver = None
    try:
        sweep_tools.wait_until(lambda: _healthy(uri), 120, "the MLflow server", server)
        name = "fault-mlflow"
        config = sweep_tools.write_sweep(
            tmp_path,
            name,
            {"seeds": [1, 2], "space": {"loss.name": {"grid": ["ce"]}}, "max_concurrent": 1},
            train={"epochs": EPOCHS},
        )
        client = MlflowClient(uri)

        def first_evaluation() -> bool:
            _, trials = sweep_tools.sweep_runs(uri, name)
            return any(client.get_metric_history(run.info.run_id, "dev_f1") for run in trials)

        driver = sweep_tools.start(["sweep", str(config), "--tracking-uri", uri], tmp_path)
        sweep_tools.wait_until(seldom(first_evaluation), 400, "the first evaluation", driver)
        server.stop()
        stopped_at = time.time()
        time.sleep(OUTAGE_S)
        server = _mlflow_server(sweep_tools, store, port)
        sweep_tools.wait_until(lambda: _healthy(uri), 120, "the restarted MLflow server", server)
        restarted_at = time.time()
        assert driver.popen.wait(timeout=600) == 0, driver.log.read_text()[-4000:]

        parents, trials = sweep_tools.sweep_runs(uri, name)
        assert len(parents) == 1 and parents[0].info.status == "FINISHED"
        runs = sweep_tools.by_trial(parents[0], trials)
        assert len(runs) == 2 and all(run.info.status == "FINISHED" for run in runs.values())
        histories = [client.get_metric_history(run.info.run_id, "dev_f1") for run in runs.values()]
        lost = sum(EPOCHS - len({point.step for point in history}) for history in histories)
        assert lost == 0
        # logged after the restart: the first evaluation whose timestamp follows the outage
        after = [point.timestamp / 1000 for history in histories for point in history]
        after = [stamp for stamp in after if stamp >= stopped_at]
        recovered = f"{min(after) - restarted_at:.0f} after the restart" if after else "no evaluation after"
        fault_figure(
            f"MLflow server stopped for {OUTAGE_S} s mid-sweep, restarted",
            trials_finished=f"{len(runs)}/2",
            runs_duplicated=len(trials) - len(runs),
            evaluations_lost=lost,
            seconds_to_recover=recovered,
        )
    finally:
        if driver is not None:
            driver.stop()
        server.stop()
