"""What a trial's runner reserved for it (GPU share and ids) and what the trial used (cost, peak memory).

The runner fills `TrialResources`: a sweep passes Ray's assignment (`gpu_fraction` = the trial's "GPU"
resource, `gpu_ids` = `ray.get_gpu_ids()`); `dicelab trial` passes nothing, which means a whole GPU when the
trial runs on CUDA and none on CPU. `ResourceMeter` measures the trial from the model's construction to the
end of training and turns it into the metrics every trial logs:

- `cost/wall_seconds`: wall time;
- `cost/cpu_seconds`: process CPU time (`time.process_time`): every thread of the process, so torch's
  intra-op pool is counted, and inside a Ray actor so are Ray's own threads (idle, a small share);
- `cost/gpu_seconds`: the reserved GPU fraction x wall time. The reservation is what a cluster charges, so a
  trial that fell back to CPU (its GPU invisible to CUDA) is still charged for it;
- `gpu/peak_memory_mb`: on CUDA only, `torch.cuda.max_memory_allocated` since the trial's start, and
  `gpu/total_memory_mb`, the GPU's memory (the analysis says how many such trials fit on one GPU).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass

import torch

from dicelab.tracking import conventions as names


@dataclass(frozen=True)
class TrialResources:
    gpu_fraction: float = 0.0  # share of one GPU reserved for the trial (Ray: 0.25 packs four on a GPU)
    gpu_ids: tuple[str, ...] = ()  # GPU ids the runner assigned (Ray's get_gpu_ids), as strings


def default_resources(device: torch.device) -> TrialResources:
    """A trial run without a runner (`dicelab trial`) has the whole device to itself."""
    return TrialResources(gpu_fraction=1.0 if device.type == "cuda" else 0.0)


class ResourceMeter:
    """Wall and CPU time, and on CUDA peak memory, from `start()` on."""

    def __init__(self, device: torch.device, resources: TrialResources):
        self.device, self.resources = device, resources
        self._wall = self._cpu = 0.0

    def start(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def metrics(self) -> dict[str, float]:
        wall = time.perf_counter() - self._wall
        metrics = {
            names.COST_WALL_SECONDS: wall,
            names.COST_CPU_SECONDS: time.process_time() - self._cpu,
            names.COST_GPU_SECONDS: self.resources.gpu_fraction * wall,
        }
        peak = peak_memory_mb(self.device)
        if peak is not None:
            metrics[names.GPU_PEAK_MEMORY_MB] = peak
            total = torch.cuda.get_device_properties(self.device).total_memory
            metrics[names.GPU_TOTAL_MEMORY_MB] = total / 2**20
        return metrics


def peak_memory_mb(device: torch.device) -> float | None:
    """The most memory torch's allocator held on `device` since the last reset, in MiB; None off CUDA."""
    if device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 2**20


def release_memory(device: torch.device) -> None:
    """Return the cached blocks of a finished trial to the driver, so the next trial on the GPU (or another
    process packed beside it) can have them. The caller drops its references first."""
    gc.collect()  # reference cycles (optimizer state <-> parameters) would keep tensors alive
    if device.type == "cuda":
        torch.cuda.empty_cache()
