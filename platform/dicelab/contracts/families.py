"""The contract every registered backbone family passes, a plugin's included: what a task head asks of a
family, answered for the model configs an encoder of any family could have (`dicelab.tasks.families`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from dicelab.tasks.families import FAMILIES, BackboneFamily

# Model configs as `transformers` gives them: a BERT-like table, RoBERTa's padded one, relative positions.
MODEL_CONFIGS = (
    SimpleNamespace(type_vocab_size=2, max_position_embeddings=512, pad_token_id=0),
    SimpleNamespace(type_vocab_size=1, max_position_embeddings=514, pad_token_id=1),
    SimpleNamespace(
        type_vocab_size=0, max_position_embeddings=-1, pad_token_id=5, position_biased_input=False
    ),
)


class FamilyContract:
    def __init__(self, name: str):
        self.name = name

    @property
    def family(self) -> BackboneFamily:
        return FAMILIES.get(self.name)

    def test_is_registered_under_its_model_type(self) -> None:
        family = self.family
        assert isinstance(family, BackboneFamily), f"{self.name!r} is a {type(family).__name__}"
        assert family.model_type == self.name, (
            f"registered as {self.name!r}, model_type {family.model_type!r}"
        )

    def test_names_its_summary_token(self) -> None:
        assert self.family.summary_token in ("first", "last"), self.family.summary_token

    def test_says_whether_a_model_takes_segment_ids(self) -> None:
        for config in MODEL_CONFIGS:
            answer: Any = self.family.segment_ids(config)
            assert isinstance(answer, bool), f"segment_ids({config}) gave {answer!r}, not a bool"

    def test_says_how_long_a_sequence_may_be(self) -> None:
        for config in MODEL_CONFIGS:
            answer: Any = self.family.positions(config)
            assert answer is None or (isinstance(answer, int) and answer > 0), f"positions gave {answer!r}"
