"""Backbone families: what a task head must know about an encoder architecture to use it right.

Encoders differ in four ways that a head cannot guess:
- the summary token, whose hidden state a sentence classifier scores: the first token ([CLS], <s>) for
  BERT-style encoders; the last real token for XLNet, whose `<cls>` closes the sequence;
- segment embeddings: `token_type_ids` reach the encoder only where the model has them (RoBERTa, DistilBERT
  and DeBERTa-v3 have none; XLNet encodes segments relatively, without an embedding table, and uses them);
- padding: the pad id and padding side come from the tokenizer (XLNet pads on the left), see `Padding`;
- positions: how long a sequence may be. Most encoders have a table of max_position_embeddings absolute
  positions; RoBERTa and XLM-R number positions from pad_token_id + 1 (roberta-base's table of 514 holds 512
  tokens); XLNet's and DeBERTa-v3's positions are relative, with no such limit.

The family of a loaded model is its `config.model_type`; a model type not registered here is a one-line
ConfigError that names it and the known families, never a guess. Adding a family is one registration:

    FAMILIES.register("mpnet")(
        BackboneFamily("mpnet", summary_token="first", segment_ids=never, positions=table_after_padding)
    )

plus its case in the family contract suite (tests/tasks/test_tasks_families.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from dicelab.errors import ConfigError
from dicelab.registry import Registry

SummaryToken = Literal["first", "last"]
PaddingSide = Literal["left", "right"]


def always(config: Any) -> bool:
    return True


def never(config: Any) -> bool:
    return False


def by_type_vocabulary(config: Any) -> bool:
    """Segment embeddings exist when the embedding table has more than one type (RoBERTa's has one, so its
    tokenizers produce no segment ids; DeBERTa-v3's has none)."""
    return int(getattr(config, "type_vocab_size", 0) or 0) > 1


def position_table(config: Any) -> int | None:
    """The most tokens a sequence may hold: the rows of its absolute position table; None without one
    (XLNet's positions are relative: max_position_embeddings is -1)."""
    table = getattr(config, "max_position_embeddings", None)
    return int(table) if table is not None and table > 0 else None


def table_after_padding(config: Any) -> int | None:
    """RoBERTa-style position ids count from pad_token_id + 1 (fairseq's make_positions, kept by
    transformers): the table's first pad_token_id + 1 rows are never a token's (514 - 2 = 512 for
    roberta-base)."""
    table = position_table(config)
    return None if table is None else table - int(config.pad_token_id) - 1


def table_if_biased_input(config: Any) -> int | None:
    """DeBERTa-v2/v3 add absolute positions to the input only with position_biased_input (v3 does not: its
    positions are relative, max_position_embeddings only sizes the relative buckets)."""
    return position_table(config) if getattr(config, "position_biased_input", True) else None


@dataclass(frozen=True)
class BackboneFamily:
    model_type: str  # config.model_type of the encoders of this family
    summary_token: SummaryToken  # the real token whose hidden state summarises the sequence
    segment_ids: Callable[[Any], bool]  # given the model's config: does it take token_type_ids?
    # given the model's config: the most tokens a sequence may hold, None where positions are relative
    positions: Callable[[Any], int | None] = position_table


FAMILIES: Registry[BackboneFamily] = Registry("backbone family", builtins="dicelab.tasks.families")

for _family in (
    BackboneFamily("bert", "first", by_type_vocabulary),
    BackboneFamily("roberta", "first", by_type_vocabulary, table_after_padding),
    BackboneFamily("distilbert", "first", never),
    BackboneFamily("albert", "first", by_type_vocabulary),
    BackboneFamily("electra", "first", by_type_vocabulary),
    BackboneFamily("deberta-v2", "first", by_type_vocabulary, table_if_biased_input),
    BackboneFamily("xlnet", "last", always),  # relative segment encoding: no table, but segments matter
    BackboneFamily("xlm-roberta", "first", by_type_vocabulary, table_after_padding),
    BackboneFamily("modernbert", "first", never),  # its encoder takes no token_type_ids at all
):
    FAMILIES.register(_family.model_type)(_family)


def family_of(model_type: str, backbone: str) -> BackboneFamily:
    """The family of a model type; a one-line ConfigError naming `model.backbone` when it is unknown."""
    if model_type not in FAMILIES:
        raise ConfigError(
            f"model.backbone: {backbone!r} is a {model_type!r} model, a family dicelab does not know "
            f"(known: {', '.join(FAMILIES.names())}; docs/backbones.md says how to add one)"
        )
    return FAMILIES.get(model_type)


@dataclass(frozen=True)
class Padding:
    """How the encoder expects a batch padded: the tokenizer's pad id, pad segment id and padding side."""

    side: PaddingSide = "right"
    pad_id: int = 0
    pad_type_id: int = 0

    @classmethod
    def of(cls, tokenizer: Any) -> Padding:
        if tokenizer.pad_token_id is None:
            raise ConfigError(f"model.backbone: the tokenizer of {tokenizer.name_or_path!r} has no pad token")
        side = tokenizer.padding_side
        if side not in ("left", "right"):
            raise ConfigError(f"model.backbone: unknown padding side {side!r} of {tokenizer.name_or_path!r}")
        return cls(side, int(tokenizer.pad_token_id), int(getattr(tokenizer, "pad_token_type_id", 0) or 0))
