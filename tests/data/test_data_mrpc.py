"""The real MRPC files (GLUE layout, UTF-8 byte-order mark), when ../shared/data is present."""

from __future__ import annotations

import pytest

from dicelab.data import read_split_file


def test_mrpc_files(mrpc_dir):
    train = read_split_file(mrpc_dir / "train.tsv")
    dev = read_split_file(mrpc_dir / "dev.tsv")
    assert (len(train), len(dev)) == (3668, 408)
    assert (train["label"] == "1").mean() == pytest.approx(0.674, abs=5e-4)
    assert (dev["label"] == "1").mean() == pytest.approx(0.684, abs=5e-4)
    assert train.loc[0, "text_a"].startswith("Amrozi accused his brother")
    assert not train["text_a"].str.startswith("\ufeff").any()
    assert (train["text_a"].str.len() > 0).all() and (train["text_b"].str.len() > 0).all()


def test_mrpc_through_the_local_source(mrpc_dir, make_config, load_raw):
    raw = load_raw(make_config(source="local", path=str(mrpc_dir)))
    assert raw.label_names == ["0", "1"]
    assert (len(raw.train), len(raw.dev)) == (3668, 408)


def test_mrpc_dev_carved_from_train_and_the_labelled_dev_file_as_test(mrpc_dir, make_config, load_raw):
    splits = {"train": "train", "dev": {"carve_from": "train", "fraction": 0.1}, "test": "dev"}
    raw = load_raw(make_config(source="local", path=str(mrpc_dir), splits=splits))
    assert (len(raw.train), len(raw.dev), len(raw.splits["test"])) == (3301, 367, 408)
    assert (raw.dev["label"] == "1").mean() == pytest.approx(0.674, abs=2e-3)  # stratified
