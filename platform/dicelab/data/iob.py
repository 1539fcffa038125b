"""Tag sequences of the common entity schemes, normalised to IOB2 (the one scheme dicelab trains on).

- IOB1 starts an entity with I- and uses B- only between two adjacent entities of one type; IOB2 starts every
  entity with B-. Rewriting each I-X that does not continue an X entity as B-X converts IOB1 to IOB2 and
  leaves valid IOB2 unchanged, as seqeval's conversion does.
- IOBES (B-, I-, E- end, S- single), BMES (B-, M- middle, E-, S-; the usual layout of Chinese NER and
  segmentation sets such as OntoNotes 4 and MSRA as Lattice-LSTM distributes them) and BILOU (B-, I-, L- last,
  U- unit) mark where an entity ends as well. An entity's first tag becomes B-, the others I-: the same
  entities, so span F1 is unchanged. After an end (E-, L-) or a single (S-, U-), an inside tag starts a new
  entity, as it would after O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

BEGIN, INSIDE = ("B",), ("I", "M", "E", "L")  # prefixes that start / continue an entity
SINGLE = ("S", "U")  # an entity of one token
CLOSING = ("E", "L", "S", "U")  # the entity ends at this token
PREFIXES = (*BEGIN, *INSIDE, *SINGLE)


class TagError(ValueError):
    """A tag of no known scheme (O, or PREFIX-TYPE with a prefix of IOB, IOBES, BMES or BILOU); `position` is
    its 0-based index in the sentence."""

    def __init__(self, position: int, tag: str):
        super().__init__(f"tag {tag!r} is not IOB (expected O, B-TYPE or I-TYPE; or IOBES, BMES, BILOU)")
        self.position = position


def to_iob2(tags: Sequence[str]) -> list[str]:
    result: list[str] = []
    open_type: str | None = None  # the type of the entity the next inside tag would continue
    for position, tag in enumerate(tags):
        if tag == "O":
            result.append(tag)
            open_type = None
            continue
        prefix, entity_type = _split(position, tag)
        continues = prefix in INSIDE and open_type == entity_type
        result.append(f"{'I' if continues else 'B'}-{entity_type}")
        open_type = None if prefix in CLOSING else entity_type
    return result


def iob2_labels(names: Sequence[str]) -> list[str]:
    """A label set as the normalised tags use it: an IOB2 list stays as it is (its order too); one of another
    scheme (S-PER, E-PER, M-PER, ...) becomes the IOB2 set of its types."""
    prefixes = {_split(position, name)[0] for position, name in enumerate(names) if name != "O"}
    if prefixes <= {"B", "I"}:
        return list(names)
    return tag_set(entity_types(name for name in names if name != "O"))


def _split(position: int, tag: str) -> tuple[str, str]:
    """(prefix, type) of a tag other than O; a TagError when it is of no known scheme."""
    prefix, dash, entity_type = tag.partition("-")
    if not dash or prefix not in PREFIXES or not entity_type:
        raise TagError(position, tag)
    return prefix, entity_type


def entity_types(tags: Iterable[str]) -> set[str]:
    return {tag.partition("-")[2] for tag in tags if tag != "O"}


def tag_set(types: Iterable[str]) -> list[str]:
    """The IOB2 label set of some entity types: "O" first, then B-X, I-X per type in sorted order."""
    return ["O", *(f"{prefix}-{name}" for name in sorted(types) for prefix in ("B", "I"))]
