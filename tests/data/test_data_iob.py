"""Entity tag schemes (IOB1, IOB2, IOBES, BMES, BILOU) normalised to IOB2: the same entities as seqeval reads
from the original tags, in files and in `data.labels`."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from seqeval.metrics.sequence_labeling import get_entities

from dicelab.data import read_split_file
from dicelab.data.iob import TagError, iob2_labels, to_iob2
from dicelab.errors import ConfigError, DataError

# seqeval reads IOB1, IOB2 and IOBES; BMES and BILOU are IOBES under other letters
AS_IOBES = {"M": "I", "L": "E", "U": "S"}


def _iobes(tags: list[str]) -> list[str]:
    return [tag if tag == "O" else f"{AS_IOBES.get(tag[0], tag[0])}{tag[1:]}" for tag in tags]


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        # IOBES
        (
            ["B-PER", "I-PER", "E-PER", "S-LOC", "O", "S-LOC"],
            ["B-PER", "I-PER", "I-PER", "B-LOC", "O", "B-LOC"],
        ),
        (["S-PER", "S-PER"], ["B-PER", "B-PER"]),  # two one-token entities side by side stay two
        # BMES (Chinese NER, one character a token)
        (["B-GPE", "M-GPE", "E-GPE", "S-PER"], ["B-GPE", "I-GPE", "I-GPE", "B-PER"]),
        # BILOU
        (["B-ORG", "I-ORG", "L-ORG", "U-ORG", "O"], ["B-ORG", "I-ORG", "I-ORG", "B-ORG", "O"]),
        # an inside tag after an entity's end starts a new entity, as after O
        (["B-PER", "E-PER", "I-PER", "E-PER"], ["B-PER", "I-PER", "B-PER", "I-PER"]),
        (["S-PER", "E-PER"], ["B-PER", "B-PER"]),
    ],
)
def test_schemes_with_ends_become_iob2(tags, expected):
    assert to_iob2(tags) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.just("O"),
            st.builds("{}-{}".format, st.sampled_from("BIMELSU"), st.sampled_from(["PER", "LOC"])),
        ),
        max_size=12,
    )
)
def test_the_entities_are_seqevals_of_the_original_tags(tags):
    """Any sequence of these prefixes, well formed or not: IOB2 holds the entities seqeval reads from it."""
    assert get_entities(to_iob2(tags)) == get_entities(_iobes(tags))


def test_a_bmes_conll_file_reads_as_iob2(write):
    text = "中 B-GPE\n国 E-GPE\n的 O\n李 S-PER\n\n北 B-LOC\n京 M-LOC\n市 E-LOC\n"
    frame = read_split_file(write("train.txt", text), family="tagging")
    assert frame["tags"].tolist() == [["B-GPE", "I-GPE", "O", "B-PER"], ["B-LOC", "I-LOC", "I-LOC"]]


def test_an_unknown_prefix_names_its_line(write):
    with pytest.raises(DataError, match=r"train\.txt:2: tag 'X-PER' is not IOB"):
        read_split_file(write("train.txt", "Hans B-PER\nSchmidt X-PER\n"), family="tagging")


def test_a_label_set_of_another_scheme_becomes_its_iob2_set():
    assert iob2_labels(["O", "S-PER", "B-PER", "I-PER", "E-PER", "S-LOC"]) == [
        "O",
        "B-LOC",
        "I-LOC",
        "B-PER",
        "I-PER",
    ]
    assert iob2_labels(["O", "I-PER", "B-PER"]) == ["O", "I-PER", "B-PER"]  # IOB2 keeps its order
    with pytest.raises(TagError, match="'PER' is not IOB"):
        iob2_labels(["O", "PER"])


def test_data_labels_in_iobes_check_the_normalised_tags(make_config, load_raw, tmp_path, write):
    write("ner/train.txt", "Hans B-PER\nSchmidt E-PER\nin O\nBonn S-LOC\n")
    write("ner/dev.txt", "Bonn S-LOC\n")
    labels = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]
    raw = load_raw(
        make_config(
            task="token_tagging", source="local", path=str(tmp_path / "ner"), format="conll", labels=labels
        )
    )
    assert raw.label_names == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert raw.splits["train"]["tags"].tolist() == [["B-PER", "I-PER", "O", "B-LOC"]]
    with pytest.raises(ConfigError, match=r"config key 'data.labels': tag 'X-PER' is not IOB"):
        load_raw(
            make_config(
                task="token_tagging",
                source="local",
                path=str(tmp_path / "ner"),
                format="conll",
                labels=["O", "X-PER"],
            )
        )
