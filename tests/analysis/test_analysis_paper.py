import math

import yaml

from dicelab.analysis import paper_from_config
from dicelab.analysis.paper import compared_with, paper_from_params


def test_paper_section_as_written_in_a_sweep_config():
    section = yaml.safe_load(
        """
        metric: f1
        source: Li et al. 2020, Table 8
        results:
          ce: {original: 91.3, "+positive": 92.27}
          dsc: {original: 92.11}
        sensitivity:
          tversky: {"0.6": 84.67, 0.4: 84.1}
        """
    )
    paper, notes = paper_from_config(section)
    assert notes == []
    assert paper.metric == "f1" and paper.applies_to("f1") and not paper.applies_to("accuracy")
    assert paper.result("ce", "+positive") == 92.27
    assert paper.result("dsc", "original") == 92.11
    assert math.isnan(paper.result("dsc", "+positive"))
    assert paper.sensitivity_at("tversky", 0.6) == 84.67
    assert paper.sensitivity_at("tversky", 0.4) == 84.1
    assert math.isnan(paper.sensitivity_at("tversky", 0.5))


def test_malformed_entries_are_skipped_with_a_note():
    paper, notes = paper_from_config(
        {
            "results": {"ce": {"original": "n/a", "+positive": 92.0}, "dsc": 3},
            "sensitivity": {"tversky": {"a": 1}},
        }
    )
    assert paper.results == {"ce": {"+positive": 92.0}}
    assert paper.sensitivity == {}
    assert any("paper.results.ce.original" in note for note in notes)
    assert any("paper.results.dsc" in note for note in notes)
    assert any("paper.sensitivity.tversky.a" in note for note in notes)


def test_a_section_that_is_not_a_mapping_gives_no_numbers():
    paper, notes = paper_from_config([1, 2])
    assert not paper and notes


def test_flattened_params_keep_the_dot_of_hyperparameter_values():
    params = {
        "paper.metric": "f1",
        "paper.results.ce.+positive": "92.27",
        "paper.sensitivity.tversky.0.6": "84.67",
        "loss.name": "ce",
    }
    paper, notes = paper_from_params(params)
    assert notes == []
    assert paper.metric == "f1"
    assert paper.result("ce", "+positive") == 92.27
    assert paper.sensitivity_at("tversky", 0.6) == 84.67


def test_a_null_entry_is_not_recorded_and_hides_an_inherited_one():
    # a config that extends another (Table 4 Tweets over WSJ) nulls the number it cannot verify
    paper, notes = paper_from_config(
        {"results": {"ce": {"original": 92.34}, "dsc": None, "dice": {"original": None, "+positive": 90.0}}}
    )
    assert notes == []
    assert paper.results == {"ce": {"original": 92.34}, "dice": {"+positive": 90.0}}
    assert math.isnan(paper.result("dsc", "original"))


def test_the_split_and_the_tables_other_rows():
    paper, notes = paper_from_config(
        {"metric": "f1", "split": "test", "results": {"ce": {"original": 93.04}}, "baselines": {"CVT": 92.6}}
    )
    assert notes == [] and paper.split == "test" and paper.baselines == {"CVT": 92.6}
    assert paper_from_config({"results": {"ce": {"original": 1.0}}})[0].split is None  # not stated
    assert paper_from_config({"split": "validation"})[0].split == "dev"
    odd, notes = paper_from_config({"split": "held-out", "baselines": {"ELMo": "n/a"}})
    assert odd.split is None and odd.baselines == {}
    assert any("paper.split 'held-out'" in note for note in notes)
    assert any("paper.baselines.ELMo" in note for note in notes)
    flat, notes = paper_from_params({"paper.split": "test", "paper.baselines.BERT-Tagger": "92.8"})
    assert notes == [] and flat.split == "test" and flat.baselines == {"BERT-Tagger": 92.8}


def test_test_numbers_are_compared_with_test_scores_when_the_trials_have_them():
    on_test = paper_from_config({"split": "test", "results": {"ce": {"original": 91.3}}})[0]
    scored = compared_with(on_test, "f1", "best_dev_f1", {"best_dev_f1", "test_f1"})
    assert (scored.column, scored.split) == ("test_f1", "test") and "test-set numbers" in scored.note
    unscored = compared_with(on_test, "f1", "best_dev_f1", {"best_dev_f1"})
    assert (unscored.column, unscored.split) == ("best_dev_f1", "dev")
    assert "different splits" in unscored.note
    on_dev = paper_from_config({"split": "dev", "results": {"ce": {"original": 90.9}}})[0]
    dev = compared_with(on_dev, "f1", "best_dev_f1", {"best_dev_f1", "test_f1"})
    assert (dev.column, dev.split) == ("best_dev_f1", "dev") and "are dev numbers" in dev.note
    unstated = paper_from_config({"results": {"ce": {"original": 88.0}}})[0]
    silent = compared_with(unstated, "f1", "best_dev_f1", {"best_dev_f1", "test_f1"})
    assert silent.column == "best_dev_f1" and "does not say which split" in silent.note
