"""Length-grouped training batches: every example once per epoch, seeded per epoch, far less padding."""

from __future__ import annotations

import numpy as np
import pytest

from dicelab.config import TrainConfig
from dicelab.training.plan import MEGA_BATCH, TrainingPlan

LENGTHS = np.random.default_rng(0).integers(5, 120, size=1000)


def plan(batching: str, seed: int = 3, **train: int) -> TrainingPlan:
    config = TrainConfig(batch_size=16, seed=seed, batching=batching, **train)
    return TrainingPlan.of(len(LENGTHS), config, LENGTHS)


def padded_tokens(batches: list[list[int]]) -> int:
    return sum(len(batch) * int(LENGTHS[batch].max()) for batch in batches)


def test_each_epoch_sees_every_example_once_in_as_many_batches_as_a_plain_shuffle():
    by_length, shuffled = plan("length"), plan("random")
    for epoch in range(2):
        batches = by_length.batches_of_epoch(epoch)
        assert sorted(index for batch in batches for index in batch) == list(range(len(LENGTHS)))
        assert len(batches) == len(shuffled.batches_of_epoch(epoch)) == by_length.steps_per_epoch
        assert sum(len(batch) < 16 for batch in batches) == 1  # 1000 = 62 x 16 + 8


def test_the_order_is_a_function_of_seed_and_epoch():
    first = plan("length").steps_of_epoch(1)
    assert first == plan("length").steps_of_epoch(1)  # a resumed trial recomputes the same epoch
    assert first != plan("length").steps_of_epoch(0) and first != plan("length", seed=4).steps_of_epoch(1)


def test_grouped_batches_pad_far_less_than_random_ones_and_come_in_random_order():
    tokens = LENGTHS.sum()
    grouped = plan("length").batches_of_epoch(0)
    random_padding = padded_tokens(plan("random").batches_of_epoch(0)) / tokens - 1
    grouped_padding = padded_tokens(grouped) / tokens - 1
    assert random_padding > 0.4 and grouped_padding < 0.1 * random_padding
    longest = [int(LENGTHS[batch].max()) for batch in grouped]
    assert longest != sorted(longest) and longest != sorted(longest, reverse=True)


def test_batches_mix_examples_only_within_a_mega_batch():
    # With 1000 examples and 16 x 50 per mega-batch, the first 800 of the shuffled order are one group.
    order = np.random.default_rng([3, 0]).permutation(len(LENGTHS))
    first_group = set(order[: 16 * MEGA_BATCH].tolist())
    for batch in plan("length").batches_of_epoch(0):
        assert len({index in first_group for index in batch}) == 1


def test_accumulation_groups_consecutive_batches_into_steps():
    grouped = plan("length", grad_accum_steps=3)
    steps = grouped.steps_of_epoch(0)
    assert [batch for step in steps for batch in step] == grouped.batches_of_epoch(0)
    assert [len(step) for step in steps] == [3] * 21


def test_length_batching_needs_every_length():
    with pytest.raises(ValueError, match="lengths"):
        TrainingPlan.of(10, TrainConfig(batching="length"))
    with pytest.raises(ValueError, match="lengths"):
        TrainingPlan.of(10, TrainConfig(batching="length"), np.ones(9, dtype=np.int64))
