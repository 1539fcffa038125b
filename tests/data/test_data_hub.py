"""The hub path: `datasets.load_dataset` and the column / ClassLabel mapping, on local data in hub layout."""

from __future__ import annotations

import datasets
import pytest

from dicelab.data import hub, read_hub_split
from dicelab.data.hub import resolve_hub_name
from dicelab.errors import DataError

NER_NAMES = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def save_splits(directory, splits: dict[str, datasets.Dataset]) -> str:
    """Write splits as `<split>.parquet` (with their features) as a hub repository holds them."""
    directory.mkdir(parents=True)
    for name, dataset in splits.items():
        dataset.to_parquet(str(directory / f"{name}.parquet"))
    return str(directory)


@pytest.fixture
def glue_like(tmp_path):
    features = datasets.Features(
        {
            "sentence1": datasets.Value("string"),
            "sentence2": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["not_equivalent", "equivalent"]),
            "idx": datasets.Value("int32"),
        }
    )

    def split(labels):
        rows = {
            "sentence1": [f"a{i}" for i in range(len(labels))],
            "sentence2": [f"b{i}" for i in range(len(labels))],
            "label": labels,
            "idx": list(range(len(labels))),
        }
        return datasets.Dataset.from_dict(rows, features=features)

    return save_splits(tmp_path / "mrpc", {"train": split([1, 0, 1, 1]), "validation": split([0, 1])})


@pytest.fixture(autouse=True)
def _hf_cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


def test_pairs_keep_label_ids_as_strings(glue_like):
    frame = read_hub_split(glue_like, "train")
    assert frame.to_dict("list") == {
        "text_a": ["a0", "a1", "a2", "a3"],
        "text_b": ["b0", "b1", "b2", "b3"],
        "label": ["1", "0", "1", "1"],
    }


def test_dev_falls_back_to_validation(glue_like):
    assert read_hub_split(glue_like, "dev")["label"].tolist() == ["0", "1"]
    with pytest.raises(DataError, match=r"no split 'test' \(splits: train, validation\)"):
        read_hub_split(glue_like, "test")


def test_hub_source(glue_like, make_config, load_raw):
    raw = load_raw(make_config(source="hub", name=glue_like))
    assert raw.label_names == ["0", "1"]  # from the ClassLabel, in id order
    assert (len(raw.train), len(raw.dev)) == (4, 2)
    assert raw.description.startswith(f"hub {glue_like}")


def test_tag_ids_become_class_label_names(tmp_path, make_config, load_raw):
    features = datasets.Features(
        {
            "tokens": datasets.Sequence(datasets.Value("string")),
            "ner_tags": datasets.Sequence(datasets.ClassLabel(names=NER_NAMES)),
        }
    )
    rows = {
        "tokens": [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]],
        "ner_tags": [[3, 0, 7, 0], [1, 2]],
    }
    dataset = datasets.Dataset.from_dict(rows, features=features)
    name = save_splits(tmp_path / "conll", {"train": dataset, "validation": dataset})
    assert read_hub_split(name, "train", family="tagging")["tags"].tolist() == [
        ["B-ORG", "O", "B-MISC", "O"],
        ["B-PER", "I-PER"],
    ]
    raw = load_raw(make_config(task="token_tagging", source="hub", name=name))
    assert raw.label_names == NER_NAMES


def test_squad_answers(tmp_path):
    context = "Oslo is the capital of Norway."
    rows = {
        "id": ["q1", "q2"],
        "title": ["t", "t"],
        "context": [context, context],
        "question": ["What is Oslo?", "Who?"],
        "answers": [{"text": ["the capital"], "answer_start": [8]}, {"text": [], "answer_start": []}],
    }
    name = save_splits(tmp_path / "squad", {"validation": datasets.Dataset.from_dict(rows)})
    frame = read_hub_split(name, "dev", family="spans")
    assert frame["answer_texts"].tolist() == [["the capital"], []]
    assert frame["answer_starts"].tolist() == [[8], []]


def test_a_script_only_repository_is_read_from_its_parquet_conversion(tmp_path, monkeypatch):
    """QuoRef's main revision is a loading script, which datasets refuses; the hub's conversion keeps one
    folder per config (`<config>/<split>/0000.parquet`) on `refs/convert/parquet`. A local copy in that
    layout, with a second config beside it, is read through the same arguments."""
    assert hub.parquet_conversion(resolve_hub_name("quoref")[0]) == {
        "revision": "refs/convert/parquet",
        "data_dir": "default",
    }
    assert hub.parquet_conversion(resolve_hub_name("squad")[0]) == {}
    copy = tmp_path / "quoref"
    for config, question in (("default", "Who met Bob?"), ("other", "another config's question")):
        for split in ("train", "validation"):
            (copy / config / split).mkdir(parents=True)
            rows = {
                "id": [f"{config}-{split}"],
                "question": [question],
                "context": ["Ann met Bob."],
                "answers": [{"text": ["Ann"], "answer_start": [0]}],
            }
            datasets.Dataset.from_dict(rows).to_parquet(str(copy / config / split / "0000.parquet"))
    monkeypatch.setitem(hub.PARQUET_CONVERSIONS, str(copy), "default")
    frame = read_hub_split(str(copy), "dev", family="spans", cache_dir=str(tmp_path / "cache"))
    assert frame["question"].tolist() == ["Who met Bob?"]  # the default config's validation split only
    assert frame["answer_texts"].tolist() == [["Ann"]]


def test_a_dataset_that_cannot_load_is_a_data_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"hub dataset '.*empty': cannot load \(\w+: .+\)"):
        read_hub_split(str(tmp_path / "empty"), "train")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("glue/mrpc", ("nyu-mll/glue", "mrpc")),
        ("glue/qqp", ("nyu-mll/glue", "qqp")),
        ("glue/sst2", ("nyu-mll/glue", "sst2")),
        ("SST-5", ("SetFit/sst5", None)),
        ("conll2003", ("lhoestq/conll2003", None)),
        ("squad", ("rajpurkar/squad", None)),
        ("squad_v2", ("rajpurkar/squad_v2", None)),
        ("quoref", ("allenai/quoref", None)),
        ("someone/dataset:config", ("someone/dataset", "config")),
        ("someone/dataset", ("someone/dataset", None)),
        ("/data/glue_copy", ("/data/glue_copy", None)),
        ("./glue_copy", ("./glue_copy", None)),
    ],
)
def test_hub_names(name, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "glue" / "mrpc").mkdir(parents=True)  # a local folder never shadows a hub name
    assert resolve_hub_name(name) == expected
