import math

import yaml

from dicelab.analysis import paper_from_config
from dicelab.analysis.paper import paper_from_params


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
