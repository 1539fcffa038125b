"""The files of a saved model (a "bundle"): weights, tokenizer, config, label map and decoding settings.

    <bundle>/
      dicelab_model.json        format, task, family, label names, decoding settings, metrics, step
      config.yaml               the trial's dicelab config
      plugins/                  the plugin modules the config names (`plugins:` points here)
      tokenizer/                the tokenizer (save_pretrained)
      encoder/model.safetensors the encoder's weights, Hugging Face layout (and encoder/config.json for a
                                pretrained backbone, so it loads from here without the hub)
      head.safetensors          the task head's weights

The encoder sits in its own Hugging Face directory because a pretrained encoder can only be built by loading
one: the task builds its model with `model.backbone` pointed there, and no hub download is needed. tiny-bert
is built from the config, as in the trial; both then load every weight with a strict check.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from dicelab.config import ExperimentConfig, config_to_yaml
from dicelab.errors import DataError
from dicelab.plugins.copies import copy_plugins
from dicelab.tasks import TASKS

BUNDLE_FORMAT = 1
INFO_FILE = "dicelab_model.json"
CONFIG_FILE = "config.yaml"
TOKENIZER_DIR = "tokenizer"
ENCODER_DIR = "encoder"
ENCODER_WEIGHTS = "model.safetensors"  # the name transformers' from_pretrained looks for
HEAD_WEIGHTS = "head.safetensors"
BUNDLE_ARTIFACT = "bundle"  # the bundle's name among an MLflow model directory's artifacts
ENCODER_PREFIX = "encoder."  # every task model keeps its backbone as `self.encoder`
TINY_BERT = "tiny-bert"


@dataclass
class BundleInfo:
    """What dicelab_model.json holds."""

    task: str  # registry name, e.g. "token_tagging"
    family: str  # the data family the task reads: pairs | tagging | spans
    label_names: list[str]
    decoding: dict[str, Any]  # the task's decoding settings (task section of the config)
    metric: str | None = None  # the dev metric the trial selected on
    metrics: dict[str, float] = field(default_factory=dict)  # dev metrics of these weights
    step: int | None = None  # optimizer step of these weights
    backbone: str = TINY_BERT
    format: int = BUNDLE_FORMAT

    @classmethod
    def of_trial(
        cls,
        config: ExperimentConfig,
        label_names: list[str],
        *,
        metrics: dict[str, float] | None = None,
        metric: str | None = None,
        step: int | None = None,
    ) -> BundleInfo:
        """What a trial's model records about itself: its task and family from `config`, its decoding
        settings, and the dev `metrics` of its weights (`metric`: the one the trial selected on)."""
        task = TASKS.get(config.task.name)
        return cls(
            task=task.name,
            family=task.family,
            label_names=list(label_names),
            decoding=config.task.model_dump(mode="json"),
            metric=metric or config.train.metric,
            metrics={key: float(value) for key, value in (metrics or {}).items()},
            step=step,
            backbone=config.model.backbone,
        )


def write_bundle(
    directory: Path,
    config: ExperimentConfig,
    info: BundleInfo,
    tokenizer: Any,
    state_dict: dict[str, torch.Tensor],
) -> None:
    """Write a bundle into `directory` (created; must not hold another bundle)."""
    encoder_dir = directory / ENCODER_DIR
    encoder_dir.mkdir(parents=True, exist_ok=True)
    (directory / INFO_FILE).write_text(json.dumps(asdict(info), indent=2), encoding="utf-8")
    if config.plugins:  # the model carries its plugins' code: it loads wherever it is copied to
        config = config.model_copy(update={"plugins": copy_plugins(config.plugins, directory)})
    (directory / CONFIG_FILE).write_text(config_to_yaml(config), encoding="utf-8")
    tokenizer.save_pretrained(str(directory / TOKENIZER_DIR))
    encoder = {k[len(ENCODER_PREFIX) :]: v for k, v in state_dict.items() if k.startswith(ENCODER_PREFIX)}
    head = {k: v for k, v in state_dict.items() if not k.startswith(ENCODER_PREFIX)}
    save_file(_unshared(encoder), str(encoder_dir / ENCODER_WEIGHTS), metadata={"format": "pt"})
    save_file(_unshared(head), str(directory / HEAD_WEIGHTS))
    if config.model.backbone != TINY_BERT:
        from transformers import AutoConfig

        from dicelab.tasks.backbones import resolve_backbone

        revision = getattr(config.model, "revision", None)  # the hub revision the trial trained from
        source = resolve_backbone(config.model.backbone)
        encoder_config = AutoConfig.from_pretrained(source, revision=revision)
        encoder_config.save_pretrained(str(encoder_dir))


def read_info(directory: Path) -> BundleInfo:
    path = directory / INFO_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DataError(f"{path}: not a readable dicelab model ({error})") from None
    if data.get("format") != BUNDLE_FORMAT:
        raise DataError(f"{path}: model format {data.get('format')!r}, this dicelab reads {BUNDLE_FORMAT}")
    return BundleInfo(**data)


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    """The model's whole state dict (encoder keys prefixed again)."""
    encoder = load_file(str(directory / ENCODER_DIR / ENCODER_WEIGHTS))
    return {**{ENCODER_PREFIX + k: v for k, v in encoder.items()}, **load_file(str(directory / HEAD_WEIGHTS))}


def is_bundle(directory: Path) -> bool:
    return (directory / INFO_FILE).is_file()


def _unshared(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Contiguous tensors, each with its own storage (safetensors refuses tensors that share memory, e.g.
    tied embeddings)."""
    seen: set[int] = set()
    result = {}
    for key, tensor in state.items():
        tensor = tensor.detach().contiguous()
        pointer = tensor.untyped_storage().data_ptr()
        result[key] = tensor.clone() if pointer in seen and tensor.numel() else tensor
        seen.add(pointer)
    return result
