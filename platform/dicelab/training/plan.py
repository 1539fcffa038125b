"""How many optimizer steps a trial takes and which examples each one sees.

Each epoch shuffles the training set with its own seed (train.seed, epoch), so the batches of any epoch are
known without replaying earlier ones: a resumed trial picks up mid-epoch on exactly the same batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dicelab.config import TrainConfig
from dicelab.errors import DataError


@dataclass(frozen=True)
class TrainingPlan:
    examples: int
    batch_size: int
    grad_accum_steps: int
    seed: int
    steps_per_epoch: int
    total_steps: int

    @classmethod
    def of(cls, examples: int, train: TrainConfig) -> TrainingPlan:
        if examples == 0:
            raise DataError("the training split has no examples (after data limits and resampling)")
        batches_per_epoch = math.ceil(examples / train.batch_size)
        # The last step of an epoch may accumulate fewer batches (as in Hugging Face Trainer).
        steps_per_epoch = math.ceil(batches_per_epoch / train.grad_accum_steps)
        total_steps = train.max_steps or train.epochs * steps_per_epoch
        return cls(
            examples, train.batch_size, train.grad_accum_steps, train.seed, steps_per_epoch, total_steps
        )

    @property
    def epochs(self) -> int:
        return math.ceil(self.total_steps / self.steps_per_epoch)

    def epoch_of(self, step: int) -> float:
        return step / self.steps_per_epoch

    def steps_of_epoch(self, epoch: int) -> list[list[list[int]]]:
        """The epoch's optimizer steps, each a list of micro-batches of example indices."""
        order = np.random.default_rng([self.seed % 2**63, epoch]).permutation(self.examples).tolist()
        batches = [
            order[start : start + self.batch_size] for start in range(0, self.examples, self.batch_size)
        ]
        accum = self.grad_accum_steps
        return [batches[start : start + accum] for start in range(0, len(batches), accum)]
