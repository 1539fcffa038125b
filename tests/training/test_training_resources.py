"""What a trial used and where it ran: cost metrics (wall, CPU, GPU seconds), peak GPU memory, the memory
given back at the end, and the CPU fallback of a trial given a GPU that CUDA cannot see."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from mlflow import MlflowClient

from dicelab.config import TrainConfig
from dicelab.tracking import conventions as names
from dicelab.training import MultiReporter, Reporter, run_trial
from dicelab.training.reporters import MlflowReporter
from dicelab.training.reporters.console import usage_line
from dicelab.training.resources import ResourceMeter, TrialResources, peak_memory_mb, release_memory
from dicelab.training.runtime import fallback_reason, select_device

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="fakes a CUDA device where there is none")


@pytest.mark.parametrize(
    ("assigned", "visible", "available", "count", "falls_back"),
    [
        (["0"], "", False, 0, True),  # Ray assigned GPU 0, CUDA is not there at all
        ([], "0,1", False, 0, True),  # only the environment says so
        ([], "2", True, 0, True),  # CUDA loads but counts no device
        (["0"], "0", True, 1, False),  # the GPU is there
        ([], "", False, 0, False),  # nothing assigned: a CPU trial
        ([], "-1", False, 0, False),  # "-1" hides every GPU on purpose
    ],
)
def test_fallback_decision(assigned, visible, available, count, falls_back):
    reason = fallback_reason(assigned, visible, available, count)
    assert (reason is not None) == falls_back
    if falls_back:
        assert reason.startswith("GPU ") and reason.endswith("training on CPU in fp32") and "\n" not in reason


@no_cuda
def test_an_assigned_gpu_cuda_cannot_see_means_cpu_even_when_cuda_was_asked():
    assert select_device(TrainConfig(device="cuda"), ["0"]) == torch.device("cpu")


class Ended(Reporter):
    def __init__(self) -> None:
        self.info: dict = {}
        self.result = None

    def on_start(self, config, info):
        self.info = info

    def on_end(self, result):
        self.result = result


@no_cuda
def test_a_trial_given_an_invisible_gpu_trains_on_cpu_says_so_once_and_is_charged_its_share(
    capsys, store, make_config, inputs_for
):
    config = make_config("pairs", "train.max_steps=3", "train.precision=fp16")
    ended, mlflow = Ended(), MlflowReporter(store, "fallback")
    resources = TrialResources(gpu_fraction=0.25, gpu_ids=("3",))

    result = run_trial(config, MultiReporter([ended, mlflow]), inputs=inputs_for(config), resources=resources)

    assert result.outcome == names.COMPLETED
    assert ended.info["device"] == "cpu" and ended.info["precision"] == "fp32"
    reason = ended.info["device_fallback"]
    assert reason.startswith("GPU 3 was assigned but CUDA")
    assert capsys.readouterr().err.count(reason) == 1
    usage = result.resource_metrics
    assert usage[names.COST_GPU_SECONDS] == pytest.approx(0.25 * usage[names.COST_WALL_SECONDS])
    assert names.GPU_PEAK_MEMORY_MB not in usage  # no CUDA memory was used
    run = MlflowClient(store).get_run(result.run_id)
    assert run.data.tags[names.DEVICE_FALLBACK] == reason
    for key in (names.COST_WALL_SECONDS, names.COST_CPU_SECONDS, names.COST_GPU_SECONDS, names.SKIPPED_STEPS):
        assert run.data.metrics[key] == pytest.approx(usage[key])


def test_every_trial_reports_wall_and_cpu_seconds_and_no_gpu_seconds_on_cpu(make_config, inputs_for):
    config = make_config("pairs", "train.max_steps=4")
    ended = Ended()
    result = run_trial(config, ended, inputs=inputs_for(config))
    usage = result.resource_metrics
    assert ended.result.resource_metrics is usage  # set before on_end
    assert usage[names.COST_WALL_SECONDS] > 0 and usage[names.COST_CPU_SECONDS] > 0
    assert usage[names.COST_GPU_SECONDS] == 0.0 and usage[names.SKIPPED_STEPS] == 0.0
    assert ended.info["device_fallback"] is None
    line = usage_line(usage)
    assert line.startswith("used ") and "CPU-s" in line and "GPU" not in line


def test_peak_memory_is_none_off_cuda():
    assert peak_memory_mb(torch.device("cpu")) is None


@no_cuda
def test_on_cuda_the_meter_resets_and_reads_the_peak_and_the_end_empties_the_cache(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device: calls.append(f"reset {device}"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device: 1536 * 2**20)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    properties = SimpleNamespace(total_memory=80 * 2**30)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: properties)
    gpu = torch.device("cuda", 0)

    meter = ResourceMeter(gpu, TrialResources(gpu_fraction=0.5))
    meter.start()
    metrics = meter.metrics()
    release_memory(gpu)

    assert calls == ["reset cuda:0", "empty_cache"]
    assert metrics[names.GPU_PEAK_MEMORY_MB] == 1536.0
    assert metrics[names.GPU_TOTAL_MEMORY_MB] == 80 * 1024.0
    assert metrics[names.COST_GPU_SECONDS] == pytest.approx(0.5 * metrics[names.COST_WALL_SECONDS])
    assert "peak GPU memory 1536 MiB" in usage_line(metrics)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_gpu_trial_logs_its_peak_memory_and_gives_it_back(make_config, inputs_for):
    config = make_config("pairs", "train.max_steps=4", "train.device=cuda")
    before = torch.cuda.memory_allocated()
    result = run_trial(config, inputs=inputs_for(config))
    assert result.resource_metrics[names.GPU_PEAK_MEMORY_MB] > 0
    assert torch.cuda.memory_allocated() == before
