"""The disk of the MLflow artifacts fills up in the middle of a sweep: the trial fails with a clear reason
(no space left on device), and once there is space again `--resume --retry-failed` finishes it, in the same
run.

The full disk is real: a small tmpfs mounted over the store's artifact directory (needs root, as in CI's
containers; skipped elsewhere) and filled up once the sweep's parent run is open. (A full disk under Tune's
own storage, `search.storage`: test_fault_checkpoint_disk.py.)

One trial: Tune ends a failed trial's worker, so each further failing trial would cost a worker process (a
torch, transformers, Tune and MLflow import) in the sweep and another in the resume, and would check nothing
the first one does not.
"""

from __future__ import annotations

import time

import pytest
from mlflow import MlflowClient

from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

EPOCHS = 2


def test_a_full_artifact_disk_fails_clearly_and_the_sweep_resumes(
    tmp_path, small_disks, sweep_tools, fault_figure
):
    # where the default store keeps its artifacts
    artifacts = small_disks.mount(tmp_path / ".dicelab" / "mlartifacts", "1m")
    name = "fault-disk"
    config = sweep_tools.write_sweep(
        tmp_path,
        name,
        {
            "seeds": [1],
            "space": {"loss.name": {"grid": ["ce"]}},
            "max_concurrent": 1,
            "max_failures": 0,
            "save_model": "none",
        },
        train={"epochs": EPOCHS, "save_model": "none"},
    )
    uri = f"sqlite:///{tmp_path / '.dicelab' / 'mlflow.db'}"
    filler = artifacts / "filler"

    def parent_open() -> bool:
        """The parent run is set up (its config logged, on this disk: trials log theirs at their end): the
        disk fills up under the trials, not under it. A look at the disk, not at MLflow: next to no CPU."""
        return any(artifacts.rglob(names.CONFIG_ARTIFACT))

    driver = sweep_tools.start(["sweep", str(config)], tmp_path)
    try:
        sweep_tools.wait_until(parent_open, 300, "the sweep's parent run", driver)
        small_disks.fill(filler)  # the disk is full from here on
        assert driver.popen.wait(timeout=600) == 1, driver.log.read_text()[-4000:]  # its trial failed
    finally:
        driver.stop()
    log = driver.log.read_text()
    parents, trials = sweep_tools.sweep_runs(uri, name)
    assert len(trials) == 1 and all(run.info.status == "FAILED" for run in trials), log[-4000:]
    reasons = {run.data.tags[names.REASON] for run in trials}
    assert all("No space left on device" in reason for reason in reasons), reasons

    filler.unlink()  # space again
    started = time.monotonic()
    resumed = sweep_tools.run(["sweep", str(config), "--resume", "--retry-failed"], tmp_path, timeout_s=600)
    recover_s = time.monotonic() - started
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    parents, trials = sweep_tools.sweep_runs(uri, name)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    runs = sweep_tools.by_trial(parents[0], trials)
    assert len(runs) == 1 and all(run.info.status == "FINISHED" for run in runs.values())
    assert all(run.data.tags[names.OUTCOME] == names.COMPLETED for run in runs.values())
    client = MlflowClient(uri)
    lost = sweep_tools.lost_evaluations(client, runs.values(), EPOCHS)
    assert lost == 0
    fault_figure(
        "artifact disk full mid-sweep (tmpfs), then --resume --retry-failed",
        trials_finished=f"0/1, then {len(runs)}/1",
        runs_duplicated=len(trials) - len(runs),
        evaluations_lost=lost,
        seconds_to_recover=f"{recover_s:.0f} (resume)",
    )
