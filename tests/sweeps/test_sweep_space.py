"""Search spaces: expansion, tied keys, per-loss spaces, named spaces, seeds, validation errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dicelab.errors import ConfigError
from dicelab.experiment import experiment_from_dict
from dicelab.sweeps.space import SweepPlan, check_overrides, named_spaces, plan_sweep

BASE: dict[str, Any] = {
    "name": "space-test",
    "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 40, "n_dev": 20}},
    "loss": {"name": "ce"},
}


def sweep(search: dict[str, Any], **sections: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(copy.deepcopy(sections))
    data["search"] = search
    return data


def plan_of(search: dict[str, Any], **sections: Any) -> SweepPlan:
    return plan_sweep(experiment_from_dict(sweep(search, **sections), "sweep.yaml"), "sweep.yaml")


def overrides(plan: SweepPlan) -> list[dict[str, Any]]:
    return [plan.trial_data(point)[1] for point in plan.points()]


def config_error(search: dict[str, Any], **sections: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        plan_of(search, **sections)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("sweep.yaml")
    return message


# -- grid expansion ----------------------------------------------------------------------------------------


def test_grid_is_the_cross_product_with_seeds_innermost():
    plan = plan_of(
        {
            "space": {
                "loss.name": {"grid": ["ce", "dice"]},
                "train.learning_rate": {"grid": [1.0e-4, 2.0e-4]},
            },
            "seeds": [1, 2, 3],
        }
    )
    points = plan.points()
    assert plan.num_trials == len(points) == 12
    assert plan.num_configurations == 4
    assert points[:3] == [
        {"loss.name": "ce", "train.learning_rate": 1e-4, "train.seed": seed} for seed in (1, 2, 3)
    ]
    configurations = {(p["loss.name"], p["train.learning_rate"]) for p in points}
    assert len(configurations) == 4
    for name, rate in configurations:  # every configuration runs with each seed
        assert sorted(
            p["train.seed"] for p in points if (p["loss.name"], p["train.learning_rate"]) == (name, rate)
        ) == [1, 2, 3]


def test_trial_configs_are_plain_validated_trial_configs():
    plan = plan_of({"space": {"train.batch_size": {"grid": [8, 16]}}, "seeds": [5]})
    configs = [plan.trial_config(point) for point in plan.points()]
    assert [(c.train.batch_size, c.train.seed) for c in configs] == [(8, 5), (16, 5)]
    assert all(c.search is None for c in configs)  # a trial is a `dicelab trial` config


def test_tied_key_follows_its_source_exactly():
    plan = plan_of(
        {"space": {"loss.alpha": {"grid": [0.3, 0.7]}}, "tied": {"loss.beta": "1 - loss.alpha"}},
        loss={"name": "tversky"},
    )
    assert overrides(plan) == [
        {"loss.alpha": 0.3, "loss.beta": 0.7},
        {"loss.alpha": 0.7, "loss.beta": 0.3},
    ]
    config = plan.trial_config(plan.points()[0])
    assert config.loss.params == {"alpha": 0.3, "beta": 0.7}


def test_tied_expressions_may_use_base_config_keys_and_whitelisted_functions():
    plan = plan_of(
        {
            "space": {"train.batch_size": {"grid": [8]}},
            "tied": {"train.eval_batch_size": "max(2 * train.batch_size, train.epochs)"},
        }
    )
    assert overrides(plan) == [{"train.batch_size": 8, "train.eval_batch_size": 16}]


@pytest.mark.parametrize(
    "expression",
    ["__import__('os').getpid()", "loss.alpha.__class__", "(lambda: 1)()", "'1'", "loss.alpha if 1 else 2"],
)
def test_tied_expressions_outside_the_whitelist_are_config_errors(expression):
    message = config_error(
        {"space": {"loss.alpha": {"grid": [0.3]}}, "tied": {"loss.beta": expression}},
        loss={"name": "tversky"},
    )
    assert "search.tied.loss.beta" in message


def test_tied_expression_on_a_missing_key_names_the_tied_key():
    message = config_error(
        {"space": {"loss.alpha": {"grid": [0.3]}}, "tied": {"loss.beta": "1 - loss.gamma"}},
        loss={"name": "tversky"},
    )
    assert "'search.tied.loss.beta'" in message and "loss.gamma" in message


# -- per-loss spaces and named spaces --------------------------------------------------------------------


def test_conditional_spaces_expand_to_the_union_of_per_loss_grids():
    plan = plan_of(
        {
            "space": {"train.learning_rate": {"grid": [1.0e-4, 3.0e-4]}},
            "conditional": {
                "tversky": {
                    "space": {"loss.alpha": {"grid": [0.3, 0.5, 0.7]}},
                    "tied": {"loss.beta": "1 - loss.alpha"},
                },
                "dsc": {"space": {"loss.alpha": {"grid": [0.1, 0.5]}}},
                "ce": {},
            },
        },
        loss={"name": "tversky", "alpha": 0.4, "beta": 0.6},
    )
    got = overrides(plan)
    assert len(got) == 2 * (3 + 2 + 1)
    assert {o["loss.name"] for o in got} == {"tversky", "dsc", "ce"}
    assert all(
        o["loss.beta"] == pytest.approx(1 - o["loss.alpha"]) for o in got if o["loss.name"] == "tversky"
    )
    assert all("loss.beta" not in o for o in got if o["loss.name"] != "tversky")
    ce = next(plan.trial_config(p) for p in plan.points() if p["loss.name"] == "ce")
    assert ce.loss.params == {}  # another loss than the base config's starts from its own defaults


def test_named_spaces_are_shipped_and_each_is_a_valid_sweep():
    spaces = named_spaces()
    assert {"tversky_alpha", "focal_gamma", "wce_k", "dsc_alpha", "table8"} <= set(spaces)
    for name, space in spaces.items():
        plan = plan_of({"spaces": [name]})
        assert plan.num_trials >= 2, name
        if space.loss is not None:
            assert all(plan.trial_config(p).loss.name == space.loss for p in plan.points())


def test_tversky_alpha_space_is_table_10():
    got = overrides(plan_of({"spaces": ["tversky_alpha"]}))
    assert [o["loss.alpha"] for o in got] == pytest.approx([0.1 * i for i in range(1, 10)])
    assert all(o["loss.alpha"] + o["loss.beta"] == pytest.approx(1.0) for o in got)
    assert {o["loss.beta"] for o in got} == {0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1}


def test_table8_space_is_losses_times_variants():
    got = overrides(plan_of({"spaces": ["table8"]}))
    assert len(got) == 4 * 5
    assert {o["data.variant"] for o in got} == {
        "original",
        "+positive",
        "+negative",
        "-negative",
        "+positive+negative",
    }


def test_named_spaces_per_loss_in_one_sweep():
    plan = plan_of(
        {"conditional": {"tversky": {"spaces": ["tversky_alpha"]}, "focal": {"spaces": ["focal_gamma"]}}}
    )
    got = overrides(plan)
    assert len(got) == 9 + len(named_spaces()["focal_gamma"].space["loss.gamma"].grid)


# -- random and optuna -----------------------------------------------------------------------------------


RANDOM = {
    "algorithm": "random",
    "num_samples": 4,
    "seed": 7,
    "seeds": [1, 2],
    "space": {
        "train.learning_rate": {"loguniform": [1.0e-5, 1.0e-3]},
        "train.batch_size": {"choice": [8, 16, 32]},
    },
    "conditional": {"dsc": {"space": {"loss.alpha": {"uniform": [0.0, 1.0]}}}, "dice": {}},
}


def test_random_points_are_drawn_up_front_seeded_and_within_bounds():
    first, again = plan_of(RANDOM).points(), plan_of(RANDOM).points()
    assert first == again
    assert plan_of({**RANDOM, "seed": 8}).points() != first
    assert len(first) == 2 * 4 * 2  # losses x num_samples x seeds
    for point in first:
        assert 1e-5 <= point["train.learning_rate"] <= 1e-3
        assert point["train.batch_size"] in (8, 16, 32)
        assert ("loss.alpha" in point) == (point["loss.name"] == "dsc")
    configurations = [p for p in first if p["train.seed"] == 1]
    assert [{**p, "train.seed": 2} for p in configurations] == [p for p in first if p["train.seed"] == 2]


def test_optuna_is_seeded_and_repeats_each_proposal_once_per_seed(tmp_path):
    from ray.tune.search.repeater import TRIAL_INDEX

    from dicelab.sweeps.trainable import point_of
    from dicelab.sweeps.tuning import search_algorithm

    search = {**RANDOM, "algorithm": "optuna", "num_samples": 3}
    plan = plan_of(search)
    assert plan.num_trials == 6

    def proposals(plan: SweepPlan) -> list[dict[str, Any]]:
        searcher = search_algorithm(plan, "f1", tmp_path)
        points = []
        for index in range(plan.num_trials):
            config = searcher.suggest(f"t{index}")
            points.append(point_of(config, plan))
            assert config[TRIAL_INDEX] == index % 2
            searcher.on_trial_complete(f"t{index}", {"dev_f1": 0.1 * index})
        return points

    first = proposals(plan)
    assert first == proposals(plan_of(search))
    assert first != proposals(plan_of({**search, "seed": 8}))
    for index in range(0, 6, 2):  # each proposal runs with seed 1, then seed 2
        assert first[index]["train.seed"] == 1 and first[index + 1] == {**first[index], "train.seed": 2}
    for point in first:
        plan.trial_config(point)  # per-loss parameters map back to config keys
        assert ("loss.alpha" in point) == (point["loss.name"] == "dsc")


def test_optuna_probe_points_cover_every_value_and_both_bounds():
    plan = plan_of({**RANDOM, "algorithm": "optuna"})
    probes = plan.probe_points()
    rates = {p["train.learning_rate"] for p in probes}
    assert rates == {1e-5, 1e-3}
    assert {p["train.batch_size"] for p in probes} == {8, 16, 32}
    assert {p["loss.alpha"] for p in probes if p["loss.name"] == "dsc"} == {0.0, 1.0}


# -- validation: every mistake is a one-line ConfigError naming the key ----------------------------------


@pytest.mark.parametrize(
    ("search", "names"),
    [
        ({"algoritm": "grid"}, "search.algoritm"),
        ({"algorithm": "bayes"}, "search.algorithm"),
        ({"space": {"loss.alpha": {"grid": [0.1], "uniform": [0, 1]}}}, "search.space.loss.alpha"),
        ({"space": {"loss.alpha": {"uniform": [0.9, 0.1]}}}, "search.space.loss.alpha"),
        ({"space": {"train.learning_rate": {"loguniform": [0, 1]}}}, "search.space.train.learning_rate"),
        (
            {"space": {"train.learning_rate": {"uniform": [1.0e-5, 1.0e-4]}}},
            "search.space.train.learning_rate",
        ),
        (
            {"algorithm": "optuna", "num_samples": 4, "space": {"train.batch_size": {"grid": [8, 16]}}},
            "search.space.train.batch_size",
        ),
        ({"algorithm": "random", "space": {"train.batch_size": {"choice": [8]}}}, "search.num_samples"),
        ({"num_samples": 3, "space": {"train.batch_size": {"grid": [8]}}}, "search.num_samples"),
        ({"seeds": [1, 1]}, "search.seeds"),
        ({"seeds": [1], "space": {"train.seed": {"grid": [3]}}}, "search.space.train.seed"),
        ({"spaces": ["nope"]}, "search.spaces[0]"),
        ({"spaces": ["tversky_alpha", "focal_gamma"]}, "search.spaces[1]"),
        ({"space": {"loss.name": {"grid": ["ce"]}}, "conditional": {"dsc": {}}}, "search.conditional.dsc"),
        ({"conditional": {"dsc": {"space": {"loss.name": {"grid": ["ce"]}}}}}, "search.conditional.dsc"),
        (  # found by the catalogue fuzz test: a nested value where a loss name belongs
            {"space": {"loss.name": {"grid": [{"value": "ce"}, "dsc"]}}, "conditional": {"dsc": {}}},
            "search.space.loss.name",
        ),
        ({"space": {"lossalpha": {"grid": [1]}}}, "search.space.lossalpha"),
        ({"space": {"search.seed": {"grid": [1]}}}, "search.space.search.seed"),
        (
            {"space": {"train.epochs": {"grid": [1]}}, "tied": {"train.epochs": "2"}},
            "search.tied.train.epochs",
        ),
        ({"tied": {"loss.beta": "1 - loss.alpha", "loss.alpha": "0.5"}}, "loss.beta"),
        ({"scheduler": {"name": "asha", "grace_period": 5}}, "search.scheduler.grace_period"),
        ({"scheduler": {"name": "asha", "reduction_factor": 1}}, "search.scheduler.reduction_factor"),
        ({"resources": {"gpu": 1.5}}, "search.resources.gpu"),
        ({"resources": {"cpu": 0}}, "search.resources.cpu"),
        ({"max_concurrent": 0}, "search.max_concurrent"),
        ({"metric": "dev f1"}, "search.metric"),
    ],
)
def test_invalid_search_sections_are_config_errors_naming_the_key(search, names):
    assert names in config_error(search)


def test_a_grid_under_a_sampling_algorithm_says_what_to_use_instead():
    message = config_error(
        {"algorithm": "optuna", "num_samples": 4, "space": {"train.batch_size": {"grid": [8, 16]}}}
    )
    expected = "grid is not allowed with algorithm optuna (use choice, or search.algorithm: grid)"
    assert message.endswith(expected), message


def test_a_bad_value_in_a_grid_is_caught_before_any_trial_runs():
    message = config_error({"space": {"loss.alpha": {"grid": [0.3, -0.5]}}}, loss={"name": "tversky"})
    assert "loss.alpha" in message and "search point" in message and "-0.5" in message


def test_asha_with_step_evaluations_needs_max_t_and_gpu_needs_a_gpu_device():
    assert "search.scheduler.max_t" in config_error(
        {"scheduler": {"name": "asha"}}, train={"eval_every_steps": 10}
    )
    assert "search.resources.gpu" in config_error({"resources": {"gpu": 0.25}}, train={"device": "cpu"})
    plan = plan_of({"resources": {"gpu": 0.25}, "space": {"train.batch_size": {"grid": [8]}}})
    assert plan.search.resources.gpu == 0.25  # fractional GPUs pack several trials on one device


# -- one metric, one direction -------------------------------------------------------------------------


def test_the_trials_select_on_the_metric_the_sweep_ranks_by():
    plan = plan_of({"metric": "precision", "space": {"train.seed": {"grid": [1, 2]}}})
    assert plan.metric == "precision"
    assert {plan.trial_config(point).train.metric for point in plan.points()} == {"precision"}
    # train.metric alone is the sweep's metric too
    assert plan_of({"space": {"train.seed": {"grid": [1]}}}, train={"metric": "recall"}).metric == "recall"
    assert plan_of({"space": {"train.seed": {"grid": [1]}}}).metric is None  # the task's primary metric


def test_two_different_metrics_or_an_unknown_direction_are_config_errors():
    message = config_error({"metric": "precision"}, train={"metric": "f1"})
    assert "'search.metric'" in message and "train.metric" in message
    assert "search.mode" in config_error({"mode": "lowest"})


def test_each_trial_config_is_validated_once(monkeypatch):
    # plan_sweep validates every point; what the driver, the inputs build and the trials resolve later is
    # served from the plan (it used to be validated three times)
    import dicelab.sweeps.space as space

    calls = []
    validate = space.experiment_from_dict
    monkeypatch.setattr(space, "experiment_from_dict", lambda *a, **k: calls.append(1) or validate(*a, **k))
    plan = plan_of({"space": {"loss.name": {"grid": ["ce", "dsc"]}}, "seeds": [1, 2]})
    assert len(calls) == 4
    for _ in range(3):
        configs = [plan.trial_config(point) for point in plan.points()]
    assert len(calls) == 4
    configs[0].train.num_threads = 3  # a caller's change stays its own
    assert plan.trial_config(plan.points()[0]).train.num_threads is None


# -- the outline the driver has before Ray starts --------------------------------------------------------


def test_the_outline_checks_the_search_section_but_validates_no_trial(monkeypatch):
    import dicelab.sweeps.space as space
    from dicelab.sweeps.space import check_trials, outline_sweep

    config = experiment_from_dict(
        sweep({"space": {"loss.alpha": {"grid": [0.3, -0.5]}}}, loss={"name": "tversky"}), "sweep.yaml"
    )
    calls = []
    validate = space.experiment_from_dict
    monkeypatch.setattr(space, "experiment_from_dict", lambda *a, **k: calls.append(1) or validate(*a, **k))
    outline = outline_sweep(config, "sweep.yaml")  # the bad alpha is a trial config's error: not seen yet
    assert calls == [] and outline.num_trials == 2
    with pytest.raises(ConfigError, match="search point"):
        check_trials(outline)
    # a search section's own errors are the outline's, with the same one-line message as plan_sweep's
    bad = experiment_from_dict(sweep({"algorithm": "random"}), "sweep.yaml")
    with pytest.raises(ConfigError, match=r"^sweep.yaml: config key 'search.num_samples'"):
        outline_sweep(bad, "sweep.yaml")


RACE = {"min_seeds": 2, "budget": 5}


@pytest.mark.parametrize(
    ("search", "at_start", "most"),
    [
        ({"space": {"train.learning_rate": {"grid": [1e-3, 2e-3, 3e-3]}}, "seeds": [1, 2]}, 6, 6),
        ({**RANDOM, "algorithm": "optuna", "num_samples": 3}, 6, 6),  # samples x seeds, proposed as they run
        (  # a race starts every configuration on its first min_seeds; more seeds only where undecided
            {"space": {"train.learning_rate": {"grid": [1e-3, 2e-3, 3e-3]}}, "racing": {"min_seeds": 3}},
            9,
            30,
        ),
        (
            {"space": {"loss.name": {"grid": ["ce", "dice"]}}, "racing": RACE},
            4,
            5,
        ),
    ],
)
def test_trials_at_start_counts_what_can_run_before_any_result(search, at_start, most):
    plan = plan_of(search)
    assert (plan.trials_at_start, plan.num_trials) == (at_start, most)


@pytest.mark.parametrize(
    ("search", "override", "where"),
    [
        ({"space": {"loss.name": {"grid": ["ce", "dice"]}}}, "loss.name=dsc", "search.space.loss.name"),
        ({"conditional": {"dsc": {}, "ce": {}}}, "loss.name=focal", "search.conditional"),
        ({"space": {"train.learning_rate": {"grid": [1e-4]}}}, "train.learning_rate=3e-5", "search.space"),
        ({"space": {"loss.name": {"grid": ["ce"]}}, "seeds": [1, 2]}, "train.seed=7", "search.seeds"),
        (
            {"space": {"loss.name": {"grid": ["ce", "dice"]}}, "racing": {"min_seeds": 2, "max_seeds": 4}},
            "train.seed=7",
            "search.racing",
        ),
        (  # in every branch: the tied beta of each loss
            {"conditional": {"tversky": {"tied": {"loss.beta": "1 - loss.alpha"}}}},
            "loss.beta=0.2",
            "search.conditional.tversky.tied.loss.beta",
        ),
    ],
)
def test_a_set_of_a_key_the_search_sets_in_every_trial_is_refused_naming_where(search, override, where):
    plan = plan_of(search, loss={"name": "tversky", "alpha": 0.3, "beta": 0.7})
    with pytest.raises(ConfigError, match=r"^--set [\w.]+: the search sets it in every trial") as caught:
        check_overrides(plan, [override])
    assert where in str(caught.value) and "\n" not in str(caught.value)


def test_a_set_of_a_key_some_trials_keep_or_none_sweeps_is_used():
    plan = plan_of(
        {"conditional": {"dsc": {"space": {"loss.alpha": {"grid": [0.1, 0.5]}}}, "ce": {}}},
        loss={"name": "dsc"},
    )
    # loss.alpha is swept for dsc only; epochs and the seed (no search.seeds) are not swept at all
    check_overrides(plan, ["loss.alpha=0.3", "train.epochs=1", "train.seed=3", "search.seeds=[1]"])


# -- the metric and its direction ----------------------------------------------------------------------------


def test_search_mode_min_is_every_trials_train_mode():
    plan = plan_of({"space": {"loss.name": {"grid": ["ce", "dice"]}}, "metric": "log_loss", "mode": "min"})
    assert (plan.mode, plan.metric) == ("min", "log_loss")
    assert {config.train.mode for config in (plan.trial_config(p) for p in plan.points())} == {"min"}
    assert plan_of({"space": {"loss.name": {"grid": ["ce", "dice"]}}}).mode == "max"


def test_a_metric_the_task_does_not_log_is_one_line_naming_the_key():
    message = config_error({"space": {"loss.name": {"grid": ["ce", "dice"]}}, "metric": "los_loss"})
    assert "'search.metric'" in message and "'los_loss'" in message and "log_loss" in message
    message = config_error({"space": {"loss.name": {"grid": ["ce", "dice"]}}}, train={"metric": "em"})
    assert "'train.metric'" in message and "pair_classification logs no dev metric 'em'" in message


def test_a_search_mode_that_contradicts_train_mode_is_refused():
    message = config_error({"space": {"loss.name": {"grid": ["ce"]}}, "mode": "min"}, train={"mode": "max"})
    assert "'search.mode'" in message and "differs from train.mode" in message


def test_a_time_budget_must_be_positive():
    assert "time_budget_s" in config_error({"space": {"loss.name": {"grid": ["ce"]}}, "time_budget_s": 0})


def test_validate_refuses_a_metric_no_trial_logs_in_one_line_exit_2(tmp_path, capsys):
    from dicelab.cli import dispatch

    config = tmp_path / "sweep.yaml"
    config.write_text(
        "name: m\ndata: {source: synthetic_pairs}\nsearch: {space: {loss.name: {grid: [ce, dice]}}, "
        "metric: dev_loss, mode: min}\n"
    )
    assert dispatch.main(["validate", str(config)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "'search.metric'" in line and "'dev_loss'" in line
