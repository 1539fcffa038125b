"""Fractional GPUs on a real two-node Ray cluster without a GPU: each node declares one (`ray start
--num-gpus=1`), and a sweep of 8 trials at `search.resources.gpu: 0.25` runs 4 at a time on a declared
GPU, never more. Each trial records the GPU id Ray gave it and its node; CUDA cannot see that GPU on this
machine, so every trial trains on CPU and says so once (a tag on its run) instead of failing; the trials
charge GPU-seconds for their reservation and the parent run sums them."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest
from mlflow.entities import Run

from dicelab.sweeps.parent_run import COST_CPU_HOURS, COST_GPU_HOURS, COST_TRIALS
from dicelab.sweeps.trainable import GPU_IDS, NODE_IP, RAY_NODE
from dicelab.tracking import conventions as names

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

TRIALS, SHARE = 8, 0.25


def max_overlap(runs: list[Run]) -> int:
    """The most runs that were running at one instant (start inclusive, end exclusive)."""
    edges = sorted([(run.info.start_time, 1) for run in runs] + [(run.info.end_time, -1) for run in runs])
    running = most = 0
    for _, step in edges:  # at equal times the end (-1) sorts first: a run ending as another starts
        running += step
        most = max(most, running)
    return most


@pytest.mark.parametrize("own_ray_cluster", [["--num-gpus=1"]], indirect=True)
def test_quarter_gpu_trials_pack_four_per_declared_gpu(tmp_path, own_ray_cluster, mlflow_server, sweep_tools):
    if _cuda_available():
        pytest.skip("this machine has CUDA: the declared GPUs would be real ones")
    config = sweep_tools.write_sweep(
        tmp_path,
        "it-gpu-packing",
        # one configuration, 8 seeds; CPUs never limit (8 x 0.25 = the cluster's 2), GPUs do (8 x 0.25 = 2)
        {"seeds": list(range(1, TRIALS + 1)), "resources": {"cpu": 0.25, "gpu": SHARE}},
        data={"synthetic": {"n_train": 192, "n_dev": 32}},  # long enough for the trials to overlap
    )
    started = time.monotonic()
    done = sweep_tools.run(
        ["sweep", str(config), "--address", own_ray_cluster.address, "--tracking-uri", mlflow_server],
        tmp_path,
        timeout_s=500,
    )
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{TRIALS} completed" in done.stdout

    parents, trials = sweep_tools.sweep_runs(mlflow_server, "it-gpu-packing")
    runs = list(sweep_tools.by_trial(parents[0], trials).values())
    assert len(runs) == TRIALS

    # Each trial got one GPU id from Ray and ran on a node of the cluster; 4 trials per (node, GPU).
    per_gpu: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in runs:
        per_gpu[(run.data.tags[RAY_NODE], run.data.tags.get(GPU_IDS, ""))].append(run)
    overlaps = {f"{node[:8]} GPU {gpu}": max_overlap(group) for (node, gpu), group in per_gpu.items()}
    print(f"gpu packing: sweep {seconds:.0f} s; most trials at once per GPU: {overlaps}")
    addresses: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        assert run.data.tags[RAY_NODE] in own_ray_cluster.node_ids
        assert run.data.tags[GPU_IDS] == "0"  # each node declares one GPU, id 0
        addresses[run.data.tags[RAY_NODE]].add(run.data.tags[NODE_IP])
    assert all(len(found) == 1 and "" not in found for found in addresses.values()), addresses
    # Packed: 4 trials at once on a GPU, never more on any (Ray may place all 8 on one node's GPU in two
    # waves of 4, as seen on a busy machine, or spread them over both nodes).
    assert max(overlaps.values()) == 4 and sum(len(group) for group in per_gpu.values()) == TRIALS, overlaps

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


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()
