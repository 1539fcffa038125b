"""Tiny random-initialised encoders of every backbone family, saved as local model directories.

Each family's model is built from its config class (hidden size 32, 2 layers) and its tokenizer is the
family's own transformers tokenizer class over a vocabulary trained offline with `tokenizers` on the given
texts (WordPiece for BERT / DistilBERT / ELECTRA, byte-level BPE for RoBERTa and ModernBERT, Unigram for
ALBERT / DeBERTa-v2 / XLNet / XLM-RoBERTa), with the family's special tokens and ids, padding side and
segment ids. Saved with
`save_pretrained`, a directory loads through the same AutoTokenizer / AutoModel path as a hub id
(`model.backbone: <directory>`): nothing is downloaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    AlbertConfig,
    AlbertTokenizer,
    AutoModel,
    BertConfig,
    BertTokenizer,
    DebertaV2Config,
    DebertaV2Tokenizer,
    DistilBertConfig,
    DistilBertTokenizer,
    ElectraConfig,
    ElectraTokenizer,
    ModernBertConfig,
    PreTrainedTokenizerFast,
    RobertaConfig,
    RobertaTokenizer,
    XLMRobertaConfig,
    XLMRobertaTokenizer,
    XLNetConfig,
    XLNetTokenizer,
)

VOCABULARY = 600
MAX_POSITIONS = 128
SIZES = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


def _wordpiece(texts: list[str], specials: list[str]) -> dict[str, int]:
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=VOCABULARY, special_tokens=specials, show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer.get_vocab()


def _byte_bpe(texts: list[str], specials: list[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCABULARY,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    model = json.loads(tokenizer.to_str())["model"]
    return model["vocab"], [tuple(merge) for merge in model["merges"]]


def _unigram(texts: list[str], specials: list[str], unk: str) -> list[tuple[str, float]]:
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=VOCABULARY, special_tokens=specials, unk_token=unk, show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer)
    return [(piece, score) for piece, score in json.loads(tokenizer.to_str())["model"]["vocab"]]


BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
XLNET_SPECIALS = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]  # xlnet-base


def _tokenizer(model_type: str, texts: list[str]) -> Any:
    if model_type in ("bert", "electra", "distilbert"):
        kind = {"bert": BertTokenizer, "electra": ElectraTokenizer, "distilbert": DistilBertTokenizer}
        return kind[model_type](vocab=_wordpiece(texts, BERT_SPECIALS), do_lower_case=True)
    if model_type == "roberta":
        vocab, merges = _byte_bpe(texts, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        return RobertaTokenizer(vocab=vocab, merges=merges)
    if model_type == "albert":
        vocab = _unigram(texts, ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"], "<unk>")
        return AlbertTokenizer(vocab=vocab, unk_id=1)
    if model_type == "deberta-v2":
        vocab = _unigram(texts, ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"], "[UNK]")
        return DebertaV2Tokenizer(vocab=vocab, unk_id=3)
    if model_type == "xlnet":
        return XLNetTokenizer(vocab=_unigram(texts, XLNET_SPECIALS, "<unk>"), unk_id=0)
    if model_type == "xlm-roberta":  # SentencePiece with fairseq's ids: <s> 0, <pad> 1, </s> 2, <unk> 3
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        return XLMRobertaTokenizer(vocab=_unigram(texts, specials, "<unk>"))
    if model_type == "modernbert":
        return _modernbert_tokenizer(texts)
    raise ValueError(model_type)


def _modernbert_tokenizer(texts: list[str]) -> Any:
    """ModernBERT's layout: a byte-level BPE (OLMo's) in a generic fast tokenizer, with BERT's [CLS] / [SEP]
    template and no segment ids among its model inputs."""
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    vocab, merges = _byte_bpe(texts, specials)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    cls, sep = ("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[cls, sep]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
        model_input_names=["input_ids", "attention_mask"],
    )


def _config(model_type: str, tokenizer: Any) -> Any:
    common = {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id}
    positions = {"max_position_embeddings": MAX_POSITIONS}
    configs: dict[str, Callable[[], Any]] = {
        "bert": lambda: BertConfig(**common, **SIZES, **positions),
        "electra": lambda: ElectraConfig(**common, **SIZES, **positions, embedding_size=16),
        "albert": lambda: AlbertConfig(**common, **SIZES, **positions, embedding_size=16),
        # RoBERTa numbers positions from pad id + 1: two more than the longest input
        "roberta": lambda: RobertaConfig(
            **common, **SIZES, max_position_embeddings=MAX_POSITIONS + 2, type_vocab_size=1
        ),
        "distilbert": lambda: DistilBertConfig(
            **common, dim=32, n_layers=2, n_heads=2, hidden_dim=64, **positions
        ),
        # DeBERTa-v3's layout: relative attention in buckets, no absolute positions, no segment embeddings
        "deberta-v2": lambda: DebertaV2Config(
            **common,
            **SIZES,
            **positions,
            relative_attention=True,
            position_buckets=32,
            pos_att_type=["p2c", "c2p"],
            position_biased_input=False,
            type_vocab_size=0,
        ),
        "xlnet": lambda: XLNetConfig(**common, d_model=32, n_layer=2, n_head=2, d_inner=64),
        "xlm-roberta": lambda: XLMRobertaConfig(
            **common, **SIZES, max_position_embeddings=MAX_POSITIONS + 2, type_vocab_size=1
        ),
        # rotary positions, alternating global and local (sliding-window) attention, no segment embeddings
        "modernbert": lambda: ModernBertConfig(
            **common,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=MAX_POSITIONS,
            global_attn_every_n_layers=2,
            local_attention=16,
            cls_token_id=tokenizer.cls_token_id,
            sep_token_id=tokenizer.sep_token_id,
            bos_token_id=tokenizer.cls_token_id,
            eos_token_id=tokenizer.sep_token_id,
        ),
    }
    return configs[model_type]()


FAMILY_MODEL_TYPES = (
    "albert",
    "bert",
    "deberta-v2",
    "distilbert",
    "electra",
    "modernbert",
    "roberta",
    "xlm-roberta",
    "xlnet",
)


def save_backbone(model_type: str, texts: list[str], directory: Path, seed: int = 0) -> Path:
    """A tiny random `model_type` encoder and its trained tokenizer, saved in `directory`."""
    tokenizer = _tokenizer(model_type, texts)
    torch.manual_seed(seed)
    encoder = AutoModel.from_config(_config(model_type, tokenizer))
    encoder.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
