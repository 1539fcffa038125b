"""load_raw_dataset: split files, label sets, checks, limits, fingerprints, resampling variants."""

from __future__ import annotations

import shutil

import pytest

from dicelab.errors import ConfigError, DataError

HEADER = "sentence1\tsentence2\tlabel\n"


def pairs(*labels: str) -> str:
    return HEADER + "".join(f"first {i}\tsecond {i}\t{label}\n" for i, label in enumerate(labels))


@pytest.fixture
def pair_dir(tmp_path, write):
    write("glue/train.tsv", pairs("1", "0", "0", "1", "0", "0", "0", "1"))
    write("glue/dev.tsv", pairs("0", "1", "0"))
    return tmp_path / "glue"


def test_local_source_finds_split_files_by_name(make_config, load_raw, pair_dir):
    raw = load_raw(make_config(source="local", path=str(pair_dir)))
    assert raw.family == "pairs"
    assert raw.label_names == ["0", "1"]
    assert (len(raw.train), len(raw.dev)) == (8, 3)
    assert list(raw.train.index) == list(range(8))  # plain RangeIndex for the tasks
    assert raw.manifest is None
    assert len(raw.fingerprint) == 64


def test_splits_may_name_files(make_config, load_raw, pair_dir):
    shutil.copy(pair_dir / "dev.tsv", pair_dir / "held_out.tsv")
    raw = load_raw(
        make_config(source="local", path=str(pair_dir), splits={"train": "train.tsv", "dev": "held_out"})
    )
    assert len(raw.dev) == 3


def test_split_file_errors(make_config, load_raw, pair_dir, tmp_path):
    with pytest.raises(DataError, match=r"test: cannot read \(no such file; also tried \.tsv"):
        load_raw(make_config(source="local", path=str(pair_dir), splits={"train": "train", "dev": "test"}))
    shutil.copy(pair_dir / "dev.tsv", pair_dir / "dev.csv")
    with pytest.raises(DataError, match=r"several files for 'dev' \(dev\.tsv, dev\.csv\)"):
        load_raw(make_config(source="local", path=str(pair_dir)))
    with pytest.raises(DataError, match=r"absent: cannot read \(not a directory"):
        load_raw(make_config(source="local", path=str(tmp_path / "absent")))
    with pytest.raises(ConfigError, match=r"data\.path"):
        load_raw(make_config(source="local"))


def test_empty_split(make_config, load_raw, pair_dir, write):
    write("glue/dev.tsv", HEADER)
    with pytest.raises(DataError, match=r"dev\.tsv: split 'dev' is empty"):
        load_raw(make_config(source="local", path=str(pair_dir)))


def test_dev_label_outside_the_training_labels(make_config, load_raw, pair_dir, write):
    write("glue/dev.tsv", pairs("0", "1", "2"))
    with pytest.raises(DataError, match=r"dev\.tsv:4: label '2' not in label set \[0, 1\]"):
        load_raw(make_config(source="local", path=str(pair_dir)))


def test_declared_label_set_and_positive_label(make_config, load_raw, pair_dir):
    raw = load_raw(make_config(source="local", path=str(pair_dir), labels=["1", "0"]))
    assert raw.label_names == ["0", "1"]  # the positive label "1" goes last
    raw = load_raw(make_config(source="local", path=str(pair_dir), positive_label="0"))
    assert raw.label_names == ["1", "0"]
    with pytest.raises(DataError, match=r"train\.tsv:2: label '1' not in label set \[0, 2\]"):
        load_raw(make_config(source="local", path=str(pair_dir), labels=["0", "2"], positive_label="2"))
    with pytest.raises(ConfigError, match=r"data\.positive_label': 'yes' is not a label"):
        load_raw(make_config(source="local", path=str(pair_dir), positive_label="yes"))


def test_multiclass_labels_in_numeric_order(make_config, load_raw, write, tmp_path):
    write("sst5/train.tsv", "sentence\tlabel\n" + "".join(f"s{i}\t{i % 11}\n" for i in range(22)))
    write("sst5/dev.tsv", "sentence\tlabel\nx\t10\n")
    raw = load_raw(make_config(source="local", path=str(tmp_path / "sst5")))
    assert raw.label_names == [str(i) for i in range(11)]


def test_limits_keep_a_seeded_sample_in_file_order(make_config, load_raw, pair_dir):
    config = make_config(source="local", path=str(pair_dir), max_train_examples=5, max_dev_examples=2)
    first, second = load_raw(config), load_raw(config)
    assert (len(first.train), len(first.dev)) == (5, 2)
    assert first.train.equals(second.train) and first.fingerprint == second.fingerprint
    numbers = [int(text.split()[1]) for text in first.train["text_a"]]
    assert numbers == sorted(numbers)
    assert first.fingerprint != load_raw(make_config(source="local", path=str(pair_dir))).fingerprint


def test_fingerprint_follows_content_not_location(make_config, load_raw, pair_dir, tmp_path, write):
    copy = shutil.copytree(pair_dir, tmp_path / "copy")
    original = load_raw(make_config(source="local", path=str(pair_dir))).fingerprint
    assert load_raw(make_config(source="local", path=str(copy))).fingerprint == original
    write("copy/dev.tsv", pairs("0", "1", "1"))  # same size, one byte changed
    assert load_raw(make_config(source="local", path=str(copy))).fingerprint != original


def test_source_family_must_match_the_task(make_config, load_raw):
    with pytest.raises(
        ConfigError, match=r"'synthetic_pairs' gives pairs data, task 'token_tagging' needs tagging"
    ):
        load_raw(
            make_config(task="token_tagging", source="synthetic_pairs", synthetic={"n_train": 5, "n_dev": 5})
        )


def test_tagging_label_set_is_inferred_with_both_prefixes(make_config, load_raw, write, tmp_path):
    write("ner/train.txt", "Oslo B-LOC\nis O\n\nPeter B-PER\nSmith I-PER\n")
    write("ner/dev.txt", "New B-LOC\nYork I-LOC\n\nAnn B-PER\n")
    raw = load_raw(make_config(task="token_tagging", source="local", path=str(tmp_path / "ner")))
    assert raw.label_names == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    write("ner/dev.txt", "Reuters B-ORG\n")
    with pytest.raises(DataError, match=r"dev\.txt:1: tag 'B-ORG' not in label set"):
        load_raw(make_config(task="token_tagging", source="local", path=str(tmp_path / "ner")))


def test_variant_on_non_pair_data_is_refused(make_config, load_raw):
    with pytest.raises(ConfigError, match=r"data\.variant': resampling variants apply to pairs data"):
        load_raw(make_config(task="token_tagging", source="synthetic_tagging", variant="+positive"))


def test_resampling_variant_is_applied_and_fingerprinted(make_config, load_raw):
    synthetic = {"n_train": 200, "n_dev": 20, "positive_rate": 0.25}
    original = load_raw(make_config(source="synthetic_pairs", synthetic=synthetic))
    raw = load_raw(make_config(source="synthetic_pairs", synthetic=synthetic, variant="-negative"))
    assert raw.manifest is not None
    assert (raw.train["label"] == "1").mean() == pytest.approx(0.5)
    assert len(raw.train) == 100 and raw.dev.equals(original.dev)
    assert raw.fingerprint != original.fingerprint
    again = load_raw(make_config(source="synthetic_pairs", synthetic=synthetic, variant="-negative"))
    assert again.fingerprint == raw.fingerprint


MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"


@pytest.mark.parametrize(
    ("train", "bad_line"),
    [
        (MRPC_HEADER + "1\t1\t2\ta\tb\n7\t3\t4\tc\td\n", 3),  # MRPC with its header
        ("1\t1\t2\ta\tb\n7\t3\t4\tc\td\n", 2),  # MRPC without header (recognised by its shape)
        ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t1\t2\ta\tb\t2\n", 2),  # QQP
    ],
)
def test_glue_binary_layouts_reject_other_labels(make_config, load_raw, tmp_path, write, train, bad_line):
    """QQP and MRPC labels are 0/1: a '7' is a broken row, not a second class of a new label set."""
    write("glue/train.tsv", train)
    write("glue/dev.tsv", MRPC_HEADER + "1\t1\t2\ta\tb\n")
    with pytest.raises(DataError, match=rf"train\.tsv:{bad_line}: label '[27]' not in label set \[0, 1\]"):
        load_raw(make_config(source="local", path=str(tmp_path / "glue")))


def test_glue_binary_layout_label_set_even_when_train_has_one_class(make_config, load_raw, tmp_path, write):
    write("glue/train.tsv", MRPC_HEADER + "1\t1\t2\ta\tb\n1\t3\t4\tc\td\n")
    write("glue/dev.tsv", MRPC_HEADER + "0\t1\t2\ta\tb\n")
    raw = load_raw(make_config(source="local", path=str(tmp_path / "glue")))
    assert raw.label_names == ["0", "1"]


def test_a_test_split_is_read_and_fingerprinted(make_config, load_raw, pair_dir, write):
    write("glue/test.tsv", pairs("1", "0"))
    without = load_raw(make_config(source="local", path=str(pair_dir)))
    raw = load_raw(
        make_config(
            source="local", path=str(pair_dir), splits={"train": "train", "dev": "dev", "test": "test"}
        )
    )
    assert len(raw.splits["test"]) == 2
    assert raw.fingerprint != without.fingerprint


def test_only_train_dev_and_test_are_splits(make_config):
    with pytest.raises(ValueError, match=r"splits\.validation"):
        make_config(source="local", splits={"train": "train", "validation": "dev"})


def test_dev_carved_from_train_is_stratified_seeded_and_fingerprinted(make_config, load_raw, write, tmp_path):
    labels = ["1"] * 30 + ["0"] * 70
    write("glue/train.tsv", pairs(*labels))
    write("glue/dev.tsv", pairs("0", "1", "0"))
    carved = {"carve_from": "train", "fraction": 0.2, "seed": 3}
    splits = {"train": "train", "dev": carved, "test": "dev"}
    raw = load_raw(make_config(source="local", path=str(tmp_path / "glue"), splits=splits))
    assert (len(raw.train), len(raw.dev), len(raw.splits["test"])) == (80, 20, 3)
    assert (raw.dev["label"] == "1").sum() == 6  # stratified: 30% positive, as train
    assert not set(raw.dev["text_a"]) & set(raw.train["text_a"])  # a partition of the file
    train_order = [int(text.split()[1]) for text in raw.train["text_a"]]
    assert train_order == sorted(train_order)  # file order kept
    again = load_raw(make_config(source="local", path=str(tmp_path / "glue"), splits=splits))
    assert list(again.dev["text_a"]) == list(raw.dev["text_a"]) and again.fingerprint == raw.fingerprint
    other = load_raw(
        make_config(
            source="local", path=str(tmp_path / "glue"), splits={**splits, "dev": {**carved, "seed": 4}}
        )
    )
    assert list(other.dev["text_a"]) != list(raw.dev["text_a"]) and other.fingerprint != raw.fingerprint
    # a train limit applies after carving: dev stays the same examples
    limited = load_raw(
        make_config(source="local", path=str(tmp_path / "glue"), splits=splits, max_train_examples=10)
    )
    assert list(limited.dev["text_a"]) == list(raw.dev["text_a"]) and len(limited.train) == 10


def test_carving_errors(make_config, load_raw, pair_dir):
    with pytest.raises(ValueError, match=r"splits\.dev\.carve_from: 'test' is not a split read"):
        make_config(source="local", splits={"train": "train", "dev": {"carve_from": "test", "fraction": 0.1}})
    with pytest.raises(DataError, match=r"train\.tsv: cannot carve 'dev' \(0\.1 of 8 examples"):
        load_raw(
            make_config(
                source="local",
                path=str(pair_dir),
                splits={"train": "train", "dev": {"carve_from": "train", "fraction": 0.1}},
            )
        )


def test_a_synthetic_source_maps_its_splits_by_name(make_config, load_raw):
    splits = {"train": "train", "dev": {"carve_from": "train", "fraction": 0.25}, "test": "dev"}
    config = make_config(splits=splits)
    config.data.synthetic.n_train, config.data.synthetic.n_dev = 40, 12
    raw = load_raw(config)
    assert (len(raw.train), len(raw.dev), len(raw.splits["test"])) == (30, 10, 12)
    with pytest.raises(
        ConfigError, match=r"data\.splits\.test': source 'synthetic_pairs' has no split 'held'"
    ):
        load_raw(make_config(splits={"train": "train", "dev": "dev", "test": "held"}))
