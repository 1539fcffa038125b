"""CoNLL column files (IOB1 -> IOB2, -DOCSTART-, column indices) and SQuAD JSON (v1.1, v2.0)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dicelab.data import read_split_file
from dicelab.data.iob import TagError, to_iob2
from dicelab.errors import ConfigError, DataError

CONLL_IOB1 = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O
. . O O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER
-DOCSTART- -X- -X- O
Hans NNP B-NP I-PER
Schmidt NNP I-NP B-PER


"""


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        (["I-PER", "I-PER", "O", "I-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),
        (["I-PER", "B-PER", "I-PER"], ["B-PER", "B-PER", "I-PER"]),  # IOB1: B- between two adjacent entities
        (["I-ORG", "I-LOC"], ["B-ORG", "B-LOC"]),
        (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),  # IOB2 stays as it is
    ],
)
def test_to_iob2(tags, expected):
    assert to_iob2(tags) == expected


def test_to_iob2_rejects_other_schemes():
    with pytest.raises(TagError) as error:
        to_iob2(["O", "PER"])
    assert error.value.position == 1


def test_conll_iob1_with_docstart_anywhere(write):
    frame = read_split_file(write("train.txt", CONLL_IOB1), family="tagging")
    assert frame["tokens"].tolist() == [
        ["EU", "rejects", "German", "call", "."],
        ["Peter", "Blackburn"],
        ["Hans", "Schmidt"],
    ]
    assert frame["tags"].tolist() == [
        ["B-ORG", "O", "B-MISC", "O", "O"],
        ["B-PER", "I-PER"],
        ["B-PER", "B-PER"],
    ]


def test_conll_columns_are_separated_by_spaces_and_tabs_only(write):
    """A character-per-line Chinese corpus holds U+3000 (the ideographic space) as a token, web text a
    no-break space: str.split() would split them away and leave a line of one column."""
    text = "中 B-LOC\n\u3000 O\n国\tE-LOC\n\nNew\u00a0York B-LOC\n"
    frame = read_split_file(write("train.char.bmes", text), family="tagging")
    assert frame["tokens"].tolist() == [["中", "\u3000", "国"], ["New\u00a0York"]]
    assert frame["tags"].tolist() == [["B-LOC", "O", "B-LOC"], ["B-LOC"]]


def test_conll_column_indices(write):
    text = "EU B-NP I-ORG\nrejects B-VP O\n"
    frame = read_split_file(write("train.conll", text), family="tagging", columns={"tokens": 0, "tags": 1})
    assert frame["tags"].tolist() == [["B-NP", "B-VP"]]


def test_conll_column_names_are_rejected(write):
    with pytest.raises(ConfigError, match=r"data\.columns\.tags': CoNLL columns are 0-based indices"):
        read_split_file(write("train.conll", "EU B-ORG\n"), family="tagging", columns={"tags": "ner"})


def test_conll_ragged_row(write):
    with pytest.raises(DataError, match=r"train\.txt:10: expected 4 columns, found 3"):
        read_split_file(
            write("train.txt", CONLL_IOB1.replace("Blackburn NNP I-NP I-PER", "Blackburn NNP I-PER")),
            "tagging",
        )


def test_conll_bad_tag_names_its_line(write):
    with pytest.raises(DataError, match=r"train\.txt:5: tag 'X-MISC' is not IOB"):
        read_split_file(write("train.txt", CONLL_IOB1.replace("I-MISC", "X-MISC")), family="tagging")


def test_conll_tags_outside_the_label_set(write):
    labels = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
    with pytest.raises(DataError, match=r"train\.txt:5: tag 'B-MISC' not in label set \[O, B-PER"):
        read_split_file(write("train.txt", CONLL_IOB1), family="tagging", labels=labels)


def test_tagging_jsonl_length_mismatch(write):
    with pytest.raises(DataError, match=r"train\.jsonl:1: 2 tokens but 1 tags"):
        read_split_file(write("train.jsonl", '{"tokens": ["a", "b"], "ner_tags": ["O"]}\n'), family="tagging")


def test_tagging_parquet(tmp_path):
    path = tmp_path / "dev.parquet"
    pd.DataFrame({"words": [["Oslo", "is", "cold"]], "tags": [["I-LOC", "O", "O"]]}).to_parquet(path)
    frame = read_split_file(path, family="tagging")
    assert frame.iloc[0].to_dict() == {"tokens": ["Oslo", "is", "cold"], "tags": ["B-LOC", "O", "O"]}


def squad(version: str, qas: list[dict], context: str = "Oslo is the capital of Norway.") -> str:
    document = {
        "version": version,
        "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}],
    }
    return json.dumps(document, indent=1)


def test_squad_v1(write):
    qas = [
        {
            "id": "q1",
            "question": "What is Oslo?",
            "answers": [{"text": "the capital", "answer_start": 8}] * 2,
        },
        {"id": "q2", "question": "Of what?", "answers": [{"text": "Norway", "answer_start": 23}]},
    ]
    frame = read_split_file(write("dev.json", squad("1.1", qas)), family="spans")
    assert list(frame.columns) == ["id", "question", "context", "answer_texts", "answer_starts"]
    assert frame["id"].tolist() == ["q1", "q2"]
    assert frame["answer_texts"].tolist() == [["the capital", "the capital"], ["Norway"]]
    assert frame["answer_starts"].tolist() == [[8, 8], [23]]


def test_squad_v2_unanswerable(write):
    plausible = [{"text": "Norway", "answer_start": 23}]
    qas = [
        {"id": "q3", "question": "Who?", "answers": [], "is_impossible": True, "plausible_answers": plausible}
    ]
    frame = read_split_file(write("train.json", squad("v2.0", qas)), family="spans")
    assert frame.loc[0, "answer_texts"] == [] and frame.loc[0, "answer_starts"] == []


def test_squad_questions_without_answers_are_inputs_to_predict_on(write):
    """gold=False (`dicelab predict`): questions to answer carry no `answers`; training data still needs them,
    and a file in which only some questions have them is refused either way."""
    qas = [{"id": "q1", "question": "What is Oslo?"}, {"id": "q2", "question": "Of what?"}]
    frame = read_split_file(write("test.json", squad("v2.0", qas)), family="spans", gold=False)
    assert frame.to_dict(orient="records") == [
        {"id": "q1", "question": "What is Oslo?", "context": "Oslo is the capital of Norway."},
        {"id": "q2", "question": "Of what?", "context": "Oslo is the capital of Norway."},
    ]
    with pytest.raises(DataError, match=r"train\.json: question 1: missing SQuAD field 'answers'"):
        read_split_file(write("train.json", squad("v2.0", qas)), family="spans")
    mixed = [qas[0], {**qas[1], "answers": [{"text": "Norway", "answer_start": 23}]}]
    with pytest.raises(DataError, match=r"mixed\.json: question 1: missing SQuAD field 'answers'"):
        read_split_file(write("mixed.json", squad("v2.0", mixed)), family="spans", gold=False)
    impossible = [{**qas[0], "is_impossible": True}, {**qas[1], "answers": []}]  # gold: no answer
    gold = read_split_file(write("dev.json", squad("v2.0", impossible)), family="spans", gold=False)
    assert gold["answer_texts"].tolist() == [[], []]


def test_squad_wrong_offset_names_the_question(write):
    qas = [{"id": "q9", "question": "Of what?", "answers": [{"text": "Norway", "answer_start": 22}]}]
    with pytest.raises(DataError, match=r"dev\.json: question 'q9': answer 'Norway' is not at offset 22"):
        read_split_file(write("dev.json", squad("1.1", qas)), family="spans")


def test_squad_structure_errors(write):
    with pytest.raises(DataError, match=r"not SQuAD JSON"):
        read_split_file(write("dev.json", "[]"), family="spans")
    with pytest.raises(DataError, match=r"dev\.json: question 1: missing SQuAD field 'question'"):
        read_split_file(write("dev.json", squad("1.1", [{"id": "q", "answers": []}])), family="spans")
    with pytest.raises(DataError, match=r"dev\.json:3: invalid JSON"):
        read_split_file(write("dev.json", '{\n "data": [\n oops]}'), family="spans")


def test_spans_jsonl_with_canonical_columns(write):
    row = {"id": "a", "question": "q?", "context": "xyz", "answer_texts": ["y"], "answer_starts": [1]}
    frame = read_split_file(write("train.jsonl", json.dumps(row) + "\n"), family="spans")
    assert frame.iloc[0].to_dict() == row
