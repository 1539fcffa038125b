"""A plugin's loss in a sweep joining the two-node cluster (`--address`): the driver sends the plugin with
its runtime env, every trial's worker imports it and checks its hash, and the runs say which version ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.plugins.conftest import poly1_source

from dicelab.plugins.loading import digest_of
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def test_a_plugin_loss_sweeps_on_a_two_node_cluster(tmp_path: Path, ray_cluster, mlflow_server, sweep_tools):
    lab = tmp_path / "my_lab"  # outside the repository, outside the working directory
    lab.mkdir()
    plugin = lab / "poly1_cluster.py"
    plugin.write_text(poly1_source("poly1"))
    config = sweep_tools.write_sweep(
        tmp_path,
        "it-cluster-plugin",
        {"seeds": [1], "conditional": {"poly1": {}, "ce": {}}, "max_concurrent": 2},
        train={"epochs": 1},
    )
    args = ["sweep", str(config), "--plugin", str(plugin), "--address", ray_cluster.address]
    done = sweep_tools.run([*args, "--tracking-uri", mlflow_server], tmp_path, timeout_s=600)
    assert done.returncode == 0, done.stdout + done.stderr
    parents, trials = sweep_tools.sweep_runs(mlflow_server, "it-cluster-plugin")
    assert len(parents) == 1 and len(trials) == 2
    assert {run.data.params["loss.name"] for run in trials} == {"poly1", "ce"}
    assert {run.data.tags[names.OUTCOME] for run in trials} == {names.COMPLETED}
    fingerprint = f"poly1_cluster={digest_of(plugin)}"
    assert {run.data.tags.get("dicelab.plugins") for run in [*parents, *trials]} == {fingerprint}
