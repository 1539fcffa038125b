"""Sentence-pair files: GLUE TSV layouts, CSV, JSONL, Parquet, column mapping, and malformed input."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from dicelab.data import read_split_file
from dicelab.data.readers import read_table
from dicelab.errors import ConfigError, DataError

MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
MRPC_ROWS = (
    '1\t702876\t702977\tAmrozi accused his brother, whom he called "the witness".\t'
    'Referring to him as only "the witness", Amrozi accused his brother.\n'
    "0\t2108705\t2108831\tYucaipa owned Dominick's before selling the chain.\t"
    "Yucaipa bought Dominick's in 1995.\n"
)
QQP_HEADER = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
QQP_ROWS = (
    "201359\t303345\t303346\tWhy are African-Americans so beautiful?\tWhy are hispanics so beautiful?\t0\n"
    "263843\t69383\t380476\tI want to pursue PhD in Computer Science\tHow can I pursue a PhD?\t1\n"
)


def test_mrpc_layout_with_bom_and_quotes(write):
    frame = read_split_file(write("train.tsv", MRPC_HEADER + MRPC_ROWS, bom=True))
    assert list(frame.columns) == ["text_a", "text_b", "label"]
    assert frame["label"].tolist() == ["1", "0"]
    # quoting is off: the quotes are part of the text
    assert frame.loc[0, "text_a"] == 'Amrozi accused his brother, whom he called "the witness".'
    assert frame.loc[1, "text_b"] == "Yucaipa bought Dominick's in 1995."


@pytest.mark.parametrize("header", [True, False])
def test_qqp_layout_with_or_without_header(write, header):
    frame = read_split_file(write("dev.tsv", (QQP_HEADER if header else "") + QQP_ROWS))
    assert frame["label"].tolist() == ["0", "1"]
    assert frame.loc[0, "text_a"] == "Why are African-Americans so beautiful?"
    assert frame.loc[1, "text_b"] == "How can I pursue a PhD?"


def test_qqp_stray_whitespace_around_fields(write):
    rows = " 201359 \t 303345\t303346 \t  Why so?  \t Why not? \t 1 \r\n\n"
    frame = read_split_file(write("dev.tsv", rows))
    assert frame.iloc[0].tolist() == ["Why so?", "Why not?", "1"]


def test_mrpc_layout_without_header(write):
    frame = read_split_file(write("train.tsv", MRPC_ROWS))
    assert frame["label"].tolist() == ["1", "0"]
    assert frame.loc[1, "text_a"] == "Yucaipa owned Dominick's before selling the chain."


def test_sst_single_sentences(write):
    frame = read_split_file(write("train.tsv", "sentence\tlabel\nit 's a charming journey .\t1\nflat .\t0\n"))
    assert frame["text_a"].tolist() == ["it 's a charming journey .", "flat ."]
    assert frame["text_b"].isna().all()
    assert frame["label"].tolist() == ["1", "0"]


def test_csv_with_quoted_fields(write):
    text = 'text,label\n"a, b and ""c""",pos\n"two\nlines",neg\n'
    frame = read_split_file(write("train.csv", text))
    assert frame["text_a"].tolist() == ['a, b and "c"', "two\nlines"]
    assert frame["label"].tolist() == ["pos", "neg"]


def test_jsonl_with_integer_labels(write):
    rows = [
        {"sentence1": "a", "sentence2": "b", "label": 1},
        {"sentence1": "c", "sentence2": "d", "label": 0},
    ]
    frame = read_split_file(write("dev.jsonl", "".join(json.dumps(row) + "\n" for row in rows)))
    assert frame.to_dict("list") == {"text_a": ["a", "c"], "text_b": ["b", "d"], "label": ["1", "0"]}


def test_parquet_with_column_mapping(tmp_path):
    path = tmp_path / "train.parquet"
    pd.DataFrame({"left": ["a", "c"], "right": ["b", "d"], "gold": [1.0, 0.0]}).to_parquet(path)
    frame = read_split_file(path, columns={"text_a": "left", "text_b": "right", "label": "gold"})
    assert frame.to_dict("list") == {"text_a": ["a", "c"], "text_b": ["b", "d"], "label": ["1", "0"]}


def test_headerless_file_with_column_indices(write):
    frame = read_split_file(
        write("train.tsv", "x\ty\t0\nz\tw\t1\n"), columns={"text_a": 0, "text_b": 1, "label": 2}
    )
    assert frame.to_dict("list") == {"text_a": ["x", "z"], "text_b": ["y", "w"], "label": ["0", "1"]}


def test_labels_checked_when_given(write):
    path = write("train.tsv", QQP_HEADER + QQP_ROWS)
    assert len(read_split_file(path, labels=["0", "1"])) == 2
    with pytest.raises(DataError, match=r"train\.tsv:2: label '0' not in label set \[1\]"):
        read_split_file(path, labels=["1"])


def test_ragged_row_names_file_and_line(write):
    text = MRPC_HEADER + MRPC_ROWS + "1\t1\t2\tonly one string\n"
    with pytest.raises(DataError, match=r"train\.tsv:4: expected 5 fields, found 4"):
        read_split_file(write("train.tsv", text, bom=True))


def test_missing_column_lists_the_found_ones(write):
    with pytest.raises(
        DataError, match=r"train\.tsv: missing column 'label' \(found: sentence1, sentence2\)"
    ):
        read_split_file(write("train.tsv", "sentence1\tsentence2\na\tb\n"))


def test_inputs_to_predict_on_may_leave_out_the_label_and_get_no_label_column(write):
    """gold=False (`dicelab predict`): GLUE's test files have no label; training data still needs one."""
    test_tsv = "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1\t2\tA cat sat.\tA cat was sitting.\n"
    frame = read_split_file(write("test.tsv", test_tsv), gold=False)
    assert list(frame.columns) == ["text_a", "text_b"]
    assert frame.iloc[0].to_dict() == {"text_a": "A cat sat.", "text_b": "A cat was sitting."}
    labelled = read_split_file(write("dev.tsv", MRPC_HEADER + MRPC_ROWS), gold=False)
    assert labelled["label"].tolist() == ["1", "0"]  # gold that is there is read
    with pytest.raises(DataError, match=r"missing column 'label'"):
        read_split_file(write("train.tsv", test_tsv))


def test_a_mapped_label_column_may_be_missing_from_inputs_to_predict_on(write):
    """A model trained with `data.columns` reads inputs with the same mapping, which names the gold too."""
    mapped = {"text_a": "left", "text_b": "right", "label": "gold"}
    frame = read_split_file(write("new.csv", "left,right\na,b\n"), columns=mapped, gold=False)
    assert frame.to_dict(orient="records") == [{"text_a": "a", "text_b": "b"}]
    with pytest.raises(DataError, match=r"missing column 'gold'"):
        read_split_file(write("train.csv", "left,right\na,b\n"), columns=mapped)


def test_a_table_in_memory_is_read_as_a_file_with_its_usual_names():
    glue = pd.DataFrame({"sentence1": ["A cat sat.", "x"], "sentence2": ["A cat was sitting.", None]})
    frame = read_table(glue, "pairs", gold=False)
    assert frame.to_dict(orient="records") == [
        {"text_a": "A cat sat.", "text_b": "A cat was sitting."},
        {"text_a": "x", "text_b": ""},
    ]
    qqp = pd.DataFrame({"question1": ["q"], "question2": ["r"], "is_duplicate": [1]}, index=[7])
    assert read_table(qqp, "pairs").to_dict(orient="records") == [
        {"text_a": "q", "text_b": "r", "label": "1"}
    ]
    with pytest.raises(DataError, match=r"^frame: missing column 'text_a' \(found: left\)"):
        read_table(pd.DataFrame({"left": ["a"]}), "pairs", origin="frame")


def test_missing_mapped_column(write):
    with pytest.raises(DataError, match=r"missing column 'gold'"):
        read_split_file(write("train.tsv", "sentence\tlabel\na\t1\n"), columns={"label": "gold"})


def test_unknown_column_key_is_a_config_error(write):
    with pytest.raises(ConfigError, match=r"unknown column 'sentence'"):
        read_split_file(write("train.tsv", "sentence\tlabel\na\t1\n"), columns={"sentence": "sentence"})


def test_missing_label_value(write):
    with pytest.raises(DataError, match=r"dev\.jsonl:2: missing label"):
        read_split_file(write("dev.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n'))


def test_unrecognised_headerless_file(write):
    with pytest.raises(DataError, match=r"train\.tsv:1: no header row"):
        read_split_file(write("train.tsv", "a\tb\tc\n"))


def test_invalid_json_line(write):
    with pytest.raises(DataError, match=r"dev\.jsonl:2: invalid JSON"):
        read_split_file(write("dev.jsonl", '{"text": "a", "label": 1}\n{"text": \n'))


def test_unreadable_files(tmp_path, write):
    with pytest.raises(DataError, match=r"absent\.tsv: cannot read \(No such file"):
        read_split_file(tmp_path / "absent.tsv")
    with pytest.raises(DataError, match=r"cannot read \(Is a directory"):
        read_split_file(tmp_path)
    latin1 = tmp_path / "latin1.tsv"
    latin1.write_bytes(b"sentence\tlabel\ncaf\xe9\t1\n")
    with pytest.raises(DataError, match=r"latin1\.tsv:2: cannot read \(not UTF-8"):
        read_split_file(latin1)
    broken = write("broken.parquet", "not parquet")
    with pytest.raises(DataError, match=r"broken\.parquet: cannot read"):
        read_split_file(broken)


def test_format_that_cannot_hold_the_family(write):
    with pytest.raises(DataError, match=r"format 'conll' cannot hold pairs data"):
        read_split_file(write("train.txt", "a O\n"), format="conll")


def test_empty_file_gives_an_empty_frame(write):
    assert read_split_file(write("dev.tsv", "")).empty
    assert read_split_file(write("dev.tsv", MRPC_HEADER, bom=True)).empty
