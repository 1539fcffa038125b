"""Ray Tune alone, no dicelab: which node runs the trials when one node's actors start slower than a trial
lasts. Run by hand (`python tests/integration/tune_actor_reuse_repro.py`; not collected by pytest):

A two-node cluster on 127.0.0.1 (as the integration tests start it: one CPU and one declared GPU per node),
8 trials at {cpu: 0.25, gpu: 0.25}, each one 3-second step. Every trial actor on the worker node waits
STARTUP_S seconds in `setup` (standing in for a slow start: a trial actor importing torch, transformers,
Tune and MLflow on a loaded machine). Ray reserves 4 trials on each node either way; with
`reuse_actors=True` Tune hands the last 4 trials to the head's finished actors (removing the worker node's
actors, still starting), so all 8 run on the head; with `reuse_actors=False` 4 run on each node.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import conftest  # the integration tests' cluster helpers

STARTUP_S = 20.0


def run(address: str, head: str, reuse: bool, storage: str) -> tuple[Counter[str], float]:
    import ray
    from ray import tune

    class Slow(tune.Trainable):
        def setup(self, config: dict) -> None:
            if ray.get_runtime_context().get_node_id() != head:
                time.sleep(STARTUP_S)

        def step(self) -> dict:
            time.sleep(3)
            return {"node": ray.get_runtime_context().get_node_id(), "done": True}

        def reset_config(self, new_config: dict) -> bool:
            return True

    ray.init(address=address, logging_level="WARNING")
    try:
        started = time.monotonic()
        grid = tune.Tuner(
            tune.with_resources(Slow, {"cpu": 0.25, "gpu": 0.25}),
            param_space={"i": tune.grid_search(list(range(8)))},
            tune_config=tune.TuneConfig(reuse_actors=reuse),
            run_config=tune.RunConfig(storage_path=storage, name=f"reuse-{reuse}", verbose=0),
        ).fit()
        seconds = time.monotonic() - started
        return Counter("head" if r.metrics["node"] == head else "worker" for r in grid), seconds
    finally:
        ray.shutdown()


def start_cluster(directory: Path, env: dict[str, str], nodes: list[conftest.Process]) -> str:
    """Head and worker node (one CPU, one declared GPU each) without a dashboard: less to start on 2 cores.
    Each is started as the integration tests start theirs (`conftest.start_ray_node`: waited for, started
    once more when its raylet missed Ray's fixed wait to register, stopped if it fails) and goes into
    `nodes` once started, so the caller stops it."""
    port = conftest.free_port()
    common = [
        "--num-cpus=1",
        "--num-gpus=1",
        "--block",
        "--disable-usage-stats",
        "--node-ip-address=127.0.0.1",
    ]
    head = conftest.start_ray_node(
        "ray-head",
        [
            *(str(conftest.BIN / "ray"), "start", "--head", f"--port={port}", "--include-dashboard=false"),
            *(f"--ray-client-server-port={conftest.free_port()}", f"--temp-dir={directory / 'ray'}"),
            *common,
            *conftest._node_ports(),
        ],
        env,
        directory,
    )
    nodes.append(head)
    worker = conftest.start_ray_node(
        "ray-worker",
        [
            *(str(conftest.BIN / "ray"), "start", f"--address=127.0.0.1:{port}"),
            *(f"--temp-dir={directory / 'ray-worker'}", *common, *conftest._node_ports()),
        ],
        env,
        directory,
    )
    nodes.append(worker)
    return f"127.0.0.1:{port}"


def main() -> None:
    import ray

    directory = Path(tempfile.mkdtemp(prefix="dl-r-", dir="/tmp"))
    token = directory / "auth_token"
    token.write_text(os.urandom(32).hex())
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token), PATH=f"{conftest.BIN}:{env['PATH']}")
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    nodes: list[conftest.Process] = []
    try:
        address = start_cluster(directory, env, nodes)
        ray.init(address=address, logging_level="WARNING")
        head = next(node["NodeID"] for node in ray.nodes() if "node:__internal_head__" in node["Resources"])
        ray.shutdown()
        for reuse in (True, False):
            placed, seconds = run(address, head, reuse, str(directory / "tune"))
            print(f"reuse_actors={reuse}: trials per node {dict(placed)}, {seconds:.0f} s", flush=True)
    finally:
        for node in reversed(nodes):
            node.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
