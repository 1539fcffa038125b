"""Plugin tests load modules into the process's registries: `isolated_plugins` puts them back as they were."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dicelab.plugins import loading

POLY1 = '''"""Poly-1 (Leng et al., ICLR 2022): cross entropy plus epsilon * (1 - p_t)."""

import torch
import torch.nn.functional as F

from dicelab.losses import LOSSES, Loss
from dicelab.losses.functional import compute_precision, prepare


@LOSSES.register("{name}")
class Poly1Loss(Loss):
    def __init__(self, *, epsilon: float = 1.0, ignore_index: int = -100):
        super().__init__(ignore_index=ignore_index)
        self.options["epsilon"] = float(epsilon)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        with compute_precision(logits):
            inputs = prepare(logits, target, self.options["ignore_index"])
            if inputs.size == 0:
                return inputs.zero()
            if inputs.binary:
                target = inputs.target.to(inputs.logits.dtype)
                log_p_t = -F.binary_cross_entropy_with_logits(inputs.logits, target, reduction="none")
            else:
                log_p_t = inputs.logits.log_softmax(-1).gather(-1, inputs.target[:, None]).squeeze(-1)
            return (self.options["epsilon"] * (1 - log_p_t.exp()) - log_p_t).mean()
'''


def poly1_source(name: str = "poly1") -> str:
    return POLY1.replace("{name}", name)


@pytest.fixture
def isolated_plugins() -> Iterator[None]:
    from dicelab.data.sources import SOURCES
    from dicelab.losses import LOSSES

    registries = [LOSSES, SOURCES]
    saved = [(dict(r._entries), dict(r._origins)) for r in registries]
    loaded, entry_points = dict(loading._LOADED), loading._ENTRY_POINTS_LOADED
    yield
    plugins = set(loading._LOADED) - set(loaded)  # their modules go, the libraries they imported stay
    for name in [name for name in sys.modules if name.split(".")[0] in plugins]:
        del sys.modules[name]
    for registry, (entries, origins) in zip(registries, saved, strict=True):
        registry._entries, registry._origins = entries, origins
    loading._LOADED.clear()
    loading._LOADED.update(loaded)
    loading._ENTRY_POINTS_LOADED = entry_points


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
