"""IOB tag sequences: IOB1 (and invalid IOB2) normalised to IOB2, as seqeval's conversion does.

IOB1 starts an entity with I- and uses B- only between two adjacent entities of one type; IOB2 starts every
entity with B-. Rewriting each I-X that does not continue an X entity as B-X converts IOB1 to IOB2 and
leaves valid IOB2 unchanged, so it is applied to every tagged input.
"""

from __future__ import annotations

from collections.abc import Sequence


class TagError(ValueError):
    """A tag that is neither O nor B-TYPE / I-TYPE; `position` is its 0-based index in the sentence."""

    def __init__(self, position: int, tag: str):
        super().__init__(f"tag {tag!r} is not IOB (expected O, B-TYPE or I-TYPE)")
        self.position = position


def to_iob2(tags: Sequence[str]) -> list[str]:
    result: list[str] = []
    previous_type: str | None = None
    for position, tag in enumerate(tags):
        if tag == "O":
            result.append(tag)
            previous_type = None
            continue
        prefix, dash, entity_type = tag.partition("-")
        if not dash or prefix not in ("B", "I") or not entity_type:
            raise TagError(position, tag)
        if prefix == "I" and previous_type != entity_type:
            prefix = "B"
        result.append(f"{prefix}-{entity_type}")
        previous_type = entity_type
    return result


def entity_types(tags: Sequence[str]) -> set[str]:
    return {tag[2:] for tag in tags if tag != "O"}


def tag_set(types: Sequence[str] | set[str]) -> list[str]:
    """The IOB2 label set of some entity types: "O" first, then B-X, I-X per type in sorted order."""
    return ["O", *(f"{prefix}-{name}" for name in sorted(types) for prefix in ("B", "I"))]
