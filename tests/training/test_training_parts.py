"""The loop's parts: step plan, optimizer groups and schedule, device/precision choice, RNG snapshots."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn

from dicelab.config import TrainConfig
from dicelab.errors import ConfigError, DataError
from dicelab.training.optim import build_optimizer, build_scheduler
from dicelab.training.plan import TrainingPlan
from dicelab.training.runtime import (
    restore_rng,
    rng_state,
    select_device,
    select_precision,
    torch_settings,
)


def test_plan_counts_steps_with_accumulation_and_max_steps():
    plan = TrainingPlan.of(100, TrainConfig(batch_size=8, grad_accum_steps=3, epochs=2, batching="random"))
    assert plan.steps_per_epoch == 5  # 13 batches: 4 full steps of 3 and a last step of 1
    assert (plan.total_steps, plan.epochs) == (10, 2)
    capped = TrainingPlan.of(
        100, TrainConfig(batch_size=8, grad_accum_steps=3, epochs=2, max_steps=12, batching="random")
    )
    assert (capped.total_steps, capped.epochs) == (12, 3)  # max_steps overrides epochs
    assert capped.epoch_of(7) == pytest.approx(1.4)


def test_each_epoch_sees_every_example_once_in_its_own_seeded_order():
    def steps(seed: int, epoch: int) -> list:
        train = TrainConfig(batch_size=8, grad_accum_steps=2, seed=seed, batching="random")
        return TrainingPlan.of(50, train).steps_of_epoch(epoch)

    first = steps(3, 0)
    assert [len(step) for step in first] == [2, 2, 2, 1]
    flat = [index for step in first for batch in step for index in batch]
    assert sorted(flat) == list(range(50))
    assert first == steps(3, 0) and first != steps(3, 1) and first != steps(4, 0)


def test_an_empty_training_split_is_a_data_error():
    with pytest.raises(DataError, match="no examples"):
        TrainingPlan.of(0, TrainConfig())


def test_no_weight_decay_on_biases_and_layer_norms_and_a_linear_warmup_decay():
    model = nn.Sequential(nn.Embedding(10, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    optimizer = build_optimizer(model, TrainConfig(weight_decay=0.1, learning_rate=1.0))
    decayed, exempt = optimizer.param_groups
    assert decayed["weight_decay"] == 0.1 and exempt["weight_decay"] == 0.0
    assert {tuple(p.shape) for p in decayed["params"]} == {(10, 4), (2, 4)}
    assert {tuple(p.shape) for p in exempt["params"]} == {(4,), (4,), (2,)}
    scheduler = build_scheduler(optimizer, TrainConfig(warmup_ratio=0.2, learning_rate=1.0), total_steps=10)
    rates = []
    for _ in range(10):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert rates == pytest.approx([0.0, 0.5, 1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125])


def test_bf16_and_cuda_are_refused_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    cpu = torch.device("cpu")
    assert select_device(TrainConfig()) == cpu
    assert select_precision(TrainConfig(), cpu) == "fp32"
    with pytest.raises(ConfigError, match=r"train\.precision"):
        select_precision(TrainConfig(precision="bf16"), cpu)
    with pytest.raises(ConfigError, match=r"train\.device"):
        select_device(TrainConfig(device="cuda"))


def test_trial_settings_are_undone_afterwards():
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    with torch_settings(TrainConfig(num_threads=threads + 1), torch.device("cpu")):
        assert torch.get_num_threads() == threads + 1
        assert torch.are_deterministic_algorithms_enabled()
    assert torch.get_num_threads() == threads
    assert torch.are_deterministic_algorithms_enabled() == deterministic


def test_rng_snapshots_replay_every_generator():
    state = rng_state()
    drawn = (random.random(), np.random.rand(), torch.rand(3))
    restore_rng(state)
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert drawn[:2] == again[:2] and torch.equal(drawn[2], again[2])
