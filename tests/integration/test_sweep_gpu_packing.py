"""Fractional GPUs on a real two-node Ray cluster without a GPU: each node of the tests' shared cluster
declares one (`ray start --num-gpus=1`, tests/integration/conftest.py), and a sweep of 8 trials at
`search.resources.gpu: 0.25` (cpu 0.25) has Ray reserve 4 trials on each node's GPU at once, never more on
one. Each trial records the GPU id Ray gave it and the node and worker process that ran it (checked against
the nodes' own worker logs); CUDA cannot see that GPU on this machine, so every trial trains on CPU and says
so once (a tag on its run) instead of failing; the trials charge GPU-seconds for their reservation and the
parent run sums them.

Which node's actors *run* the trials is Ray Tune's choice, not the reservation's: with actor reuse, a
trial whose own actor is still starting is handed a finished trial's actor instead (see docs/gpus.md,
"Which node runs a trial"). On this 2-core machine a trial's actor takes minutes to start (8 processes
import torch, transformers, Tune and MLflow at once) while a tiny trial trains in seconds, so the node
whose actors came up first may run all 8, 4 at a time; the test asserts what holds either way and
prints which it was."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from mlflow.entities import Run

from dicelab.sweeps.parent_run import COST_CPU_HOURS, COST_GPU_HOURS, COST_TRIALS
from dicelab.sweeps.trainable import GPU_IDS, NODE_IP, RAY_NODE, WORKER_PID
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

# Quarter GPUs, 8 trials: issue #25's packing case (4 per GPU at once). Each trial actor imports torch,
# transformers, Tune and MLflow (about 15 CPU-seconds); Tune's actor reuse usually starts fewer than 8.
TRIALS, SHARE = 8, 0.25
PER_GPU = round(1 / SHARE)  # each node declares one GPU


def max_overlap(runs: list[Run]) -> int:
    """The most runs that were running at one instant (start inclusive, end exclusive)."""
    edges = sorted([(run.info.start_time, 1) for run in runs] + [(run.info.end_time, -1) for run in runs])
    running = most = 0
    for _, step in edges:  # at equal times the end (-1) sorts first: a run ending as another starts
        running += step
        most = max(most, running)
    return most


def test_quarter_gpu_trials_pack_four_per_declared_gpu(tmp_path, ray_cluster, mlflow_server, sweep_tools):
    if _cuda_available():
        pytest.skip("this machine has CUDA: the declared GPUs would be real ones")
    config = sweep_tools.write_sweep(
        tmp_path,
        "it-gpu-packing",
        # one configuration, 8 seeds; CPUs never limit (8 x 0.25 = the cluster's 2), GPUs do (8 x 0.25 = 2)
        {"seeds": list(range(1, TRIALS + 1)), "resources": {"cpu": SHARE, "gpu": SHARE}},
        data={"synthetic": {"n_train": 192, "n_dev": 32}},  # long enough for the trials to overlap
    )
    started = time.monotonic()
    done = sweep_tools.run(
        ["sweep", str(config), "--address", ray_cluster.address, "--tracking-uri", mlflow_server],
        tmp_path,
        timeout_s=500,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{TRIALS} completed" in done.stdout

    parents, trials = sweep_tools.sweep_runs(mlflow_server, "it-gpu-packing")
    runs = list(sweep_tools.by_trial(parents[0], trials).values())
    assert len(runs) == TRIALS

    # Ray reserved the trials' bundles 4 per node: both declared GPUs packed to their capacity at once.
    reserved = reservations(ray_cluster, sweep_tools)
    assert reserved == dict.fromkeys(ray_cluster.node_ids, PER_GPU), reserved

    # Each run's tags say where it ran, and the nodes' own logs agree: its worker process was one of that
    # node's Ray workers. Ray gave it GPU 0 (each node declares one GPU).
    node_of_pid = worker_pids(ray_cluster)
    for run in runs:
        tags = run.data.tags
        assert tags[GPU_IDS] == "0", tags
        assert node_of_pid.get(int(tags[WORKER_PID])) == tags[RAY_NODE], (tags, node_of_pid)
    addresses: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        addresses[run.data.tags[RAY_NODE]].add(run.data.tags[NODE_IP])
    assert all(len(found) == 1 and "" not in found for found in addresses.values()), addresses

    # Packed: 4 trials at once on a GPU, never more on one.
    per_gpu: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in runs:
        per_gpu[(run.data.tags[RAY_NODE], run.data.tags[GPU_IDS])].append(run)
    overlaps = {node: max_overlap(group) for (node, _), group in per_gpu.items()}
    trials_on = Counter(run.data.tags[RAY_NODE] for run in runs)
    processes_on = {
        node: len({run.data.tags[WORKER_PID] for run in group}) for (node, _), group in per_gpu.items()
    }
    names_of = dict(zip(ray_cluster.node_ids, ("head", "worker"), strict=True))
    print(
        f"gpu packing: sweep {seconds:.0f} s; reserved per node {_named(reserved, names_of)}; "
        f"trials per node {_named(trials_on, names_of)} in {_named(processes_on, names_of)} actor "
        f"processes; most at once per GPU {_named(overlaps, names_of)}, in the cluster {max_overlap(runs)}"
    )
    assert max(overlaps.values()) == PER_GPU and sum(trials_on.values()) == TRIALS, overlaps
    # A node runs at most 4 trials at once, so a node that ran more than 4 handed later trials to the
    # actors of its first ones (Tune's actor reuse): never more actor processes than GPU shares.
    assert all(count <= PER_GPU for count in processes_on.values()), processes_on

    # CUDA cannot see the declared GPU: each trial trained on CPU and said so, once.
    for run in runs:
        fallback = run.data.tags[names.DEVICE_FALLBACK]
        assert "\n" not in fallback and "CPU" in fallback.upper(), fallback
        assert run.data.params["train.num_threads"] == "1"  # a quarter CPU: one torch thread

    # The reservation is charged: GPU-seconds = 0.25 x wall seconds; no peak memory without CUDA.
    for run in runs:
        metrics = run.data.metrics
        assert metrics[names.COST_GPU_SECONDS] == pytest.approx(SHARE * metrics[names.COST_WALL_SECONDS])
        assert names.GPU_PEAK_MEMORY_MB not in metrics
    parent = parents[0].data.metrics
    gpu_seconds = sum(run.data.metrics[names.COST_GPU_SECONDS] for run in runs)
    cpu_seconds = sum(run.data.metrics[names.COST_CPU_SECONDS] for run in runs)
    assert parent[COST_TRIALS] == TRIALS
    assert parent[COST_GPU_HOURS] == pytest.approx(gpu_seconds / 3600)
    assert parent[COST_CPU_HOURS] == pytest.approx(cpu_seconds / 3600)


def reservations(cluster: Any, tools: Any) -> dict[str, int]:
    """Node id -> how many trial reservations ({CPU: 0.25, GPU: 0.25} placement groups) Ray placed there,
    as Ray's state API lists them (`ray list placement-groups --detail`; removed ones included). Only this
    test's trials reserve that shape on the shared cluster."""
    placed: Counter[str] = Counter()
    for group in tools.state_list(cluster.dashboard, "placement_groups", tools.env, detail="True"):
        for bundle in group["bundles"]:
            if bundle["unit_resources"] == {"CPU": SHARE, "GPU": SHARE}:
                placed[bundle["node_id"]] += 1
    return dict(placed)


def worker_pids(cluster: Any) -> dict[int, str]:
    """Worker process id -> the node id whose Ray logs have that worker's log file
    (`worker-<id>-<job>-<pid>.out` in the node's temp dir: the head's is ray/, the worker's ray-worker/;
    a cluster started again by the tests has directories of its own)."""
    directory = cluster.nodes[0].log.parent
    found: dict[int, str] = {}
    for node_id, temp in zip(cluster.node_ids, ("ray", "ray-worker"), strict=True):
        for log in (directory / temp).glob("session_*/logs/worker-*.out"):
            found[int(log.stem.rsplit("-", 1)[1])] = node_id
    return found


def _named(values: dict[str, Any], names_of: dict[str, str]) -> str:
    return ", ".join(f"{names_of.get(node, node[:8])} {value}" for node, value in sorted(values.items()))


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
