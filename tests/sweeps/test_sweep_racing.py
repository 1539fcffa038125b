"""Seed racing: decisions on synthetic score streams (drop, continue, stop, budget, resume), the Tune searcher
driven as Tune drives it, and config errors before Ray starts."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from scipy import stats
from tests.sweeps.test_sweep_space import config_error, plan_of

from dicelab.sweeps.racing import (
    BUDGET,
    DROPPED,
    EQUIVALENT,
    FINISHED,
    SEPARATED,
    TIME,
    Race,
    RaceSettings,
)

CONFIGS = {"space": {"loss.name": {"grid": ["ce", "dice", "dsc"]}}}


def run_race(race: Race, score, concurrent: int = 1, prefix: str = "t") -> list[tuple[int, int]]:
    """Drive a race to its end as Tune would: start trials while it gives some, record the oldest."""
    started: list[tuple[str, int, int]] = []
    order = []
    counter = 0
    while True:
        while len([t for t in started if t[0] in race.pending]) < concurrent:
            nxt = race.next_trial(f"{prefix}{counter}")
            if nxt is None or nxt == FINISHED:
                break
            started.append((f"{prefix}{counter}", *nxt))
            counter += 1
        running = [t for t in started if t[0] in race.pending]
        if not running:
            return order
        trial_id, index, seed = running[0]
        order.append((index, seed))
        race.record(trial_id, score(index, seed))


def settings(**changes) -> RaceSettings:
    return RaceSettings(**{"min_seeds": 3, "max_seeds": 8, "confidence": 0.95, "test": "t", **changes})


def test_every_configuration_starts_on_the_same_min_seeds():
    race = Race(settings(), ["a", "b", "c"])
    first = [race.next_trial(f"t{i}") for i in range(9)]
    assert sorted(first) == sorted((i, s) for i in range(3) for s in (1, 2, 3))
    assert first[:3] == [(0, 1), (1, 1), (2, 1)]  # pairs complete early: seed by seed
    assert race.next_trial("t9") is None  # nothing to launch until results arrive


def test_a_clearly_worse_configuration_is_dropped_with_its_evidence():
    means = [80.0, 60.0, 79.5]
    noise = {seed: np.random.default_rng(seed).normal(0, 1.0) for seed in range(1, 9)}
    race = Race(settings(), ["a", "b", "c"])
    run_race(race, lambda i, s: means[i] + noise[s] + 0.1 * s * i)
    assert race.status[1] == DROPPED
    event = next(e for e in race.events if e["configuration"] == "b")
    assert event["leader"] in ("a", "c") and event["paired"] and event["difference"] < -15
    assert event["p_holm"] < 0.05 and event["n"] >= 3
    # the drop used scipy's paired t test on the seeds both had at that point
    assert event["test"] == "paired t test"


def test_undecided_configurations_get_more_seeds_up_to_max_then_the_budget_ends_it():
    base = np.random.default_rng(0).normal(80, 1.0, size=8)
    # two equal configurations: their paired differences alternate in sign, nothing to decide
    table = np.stack([base, base + 0.5 * (-1.0) ** np.arange(8)])
    race = Race(settings(), ["a", "b"])
    order = run_race(race, lambda i, s: table[i, s - 1])
    assert race.decision["reason"] == BUDGET
    assert sorted(order) == sorted((i, s) for i in range(2) for s in range(1, 9))  # max_seeds each
    assert "budget spent" in race.decision["summary"]


def test_a_race_without_a_usable_seed_says_so_and_names_no_leader():
    race = Race(settings(), ["a", "b"])
    run_race(race, lambda i, s: math.nan)  # every trial failed or was degenerate
    assert race.decision is not None and race.decision["winner"] is None
    assert race.decision["summary"].startswith("budget spent: no configuration has a usable seed")
    assert "None" not in race.decision["summary"]


def test_separated_winner_ends_the_race_early():
    race = Race(settings(), ["a", "b", "c"])
    offsets = {seed: float(seed % 3) for seed in range(1, 9)}
    run_race(race, lambda i, s: [90.0, 70.0, 60.0][i] + offsets[s] + 0.01 * s * (i + 1), concurrent=2)
    assert race.decision["reason"] == SEPARATED and race.decision["winner"] == "a"
    assert len(race.trials) < 3 * 8


def test_equivalence_margin_ends_a_race_of_ties():
    race = Race(settings(margin=2.0, max_seeds=10), ["a", "b"])
    wobble = [0.1, -0.1, 0.05, 0.0, -0.05, 0.1, -0.1, 0.0, 0.05, -0.05]
    run_race(race, lambda i, s: 80.0 + (wobble[s - 1] if i else 0.0) + s)
    assert race.decision["reason"] == EQUIVALENT
    assert len(race.trials) < 20


def test_failed_seeds_are_missing_and_a_configuration_that_always_fails_is_dropped():
    race = Race(settings(), ["ok", "broken", "ok2"])
    run_race(race, lambda i, s: math.nan if i == 1 else 80.0 + s + 0.5 * i * (s % 2))
    assert race.status[1] == DROPPED
    assert (
        next(e for e in race.events if e["configuration"] == "broken")["why"]
        == "no usable seed (failed or degenerate)"
    )
    assert all(math.isnan(v) for v in race.results[1].values())


def test_total_budget_caps_the_trials():
    race = Race(settings(budget=10), ["a", "b", "c"])  # 3 x min_seeds = 9 first, then one more
    run_race(race, lambda i, s: 80.0 + np.sin(i * 7 + s))
    assert len(race.trials) == 10 and race.decision["reason"] == BUDGET


def test_the_state_round_trips_through_json_and_the_race_continues_identically():
    rng = np.random.default_rng(3)
    table = rng.normal([[80.0], [78.0], [70.0]], 1.0, size=(3, 8))
    whole = Race(settings(), ["a", "b", "c"])
    run_race(whole, lambda i, s: table[i, s - 1])

    first = Race(settings(), ["a", "b", "c"])
    for i in range(9):
        first.next_trial(f"t{i}")
    for i in range(5):  # some results in, some trials still pending when the driver dies
        index, seed = first.trials[f"t{i}"]
        first.record(f"t{i}", table[index, seed - 1])
    resumed = Race.from_state(json.loads(json.dumps(first.state())))
    assert resumed.pending == first.pending and resumed.trials == first.trials
    for trial_id in list(resumed.pending):  # Tune resumes the pending trials under their ids
        index, seed = resumed.trials[trial_id]
        resumed.record(trial_id, table[index, seed - 1])
    run_race(resumed, lambda i, s: table[i, s - 1], prefix="r")  # new trials get new ids
    assert resumed.decision == whole.decision and resumed.status == whole.status
    # a result reported again after a resume is not counted twice
    assert resumed.record("t0", 0.0) == [] and resumed.results == whole.results


def test_the_drop_decision_matches_scipy_on_the_common_seeds():
    race = Race(settings(min_seeds=3), ["a", "b"])
    values = {0: [80.0, 81.0, 82.0], 1: [70.0, 72.5, 71.0]}
    for i in range(6):
        race.next_trial(f"t{i}")
    for trial_id, (index, seed) in list(race.trials.items()):
        race.record(trial_id, values[index][seed - 1])
    expected = stats.ttest_rel(values[1], values[0]).pvalue
    assert race.events[0]["p"] == pytest.approx(expected) and race.status[1] == DROPPED


# -- the Tune searcher ---------------------------------------------------------------------------------------


def test_searcher_gives_points_with_seeds_and_saves_its_state(tmp_path):
    from ray.tune.search import Searcher

    from dicelab.sweeps.race_records import read_race
    from dicelab.sweeps.tuning import search_algorithm

    plan = plan_of({**CONFIGS, "racing": {"min_seeds": 2, "max_seeds": 3}})
    searcher = search_algorithm(plan, "f1", tmp_path / "sweep")
    configs = [searcher.suggest(f"t{i}") for i in range(6)]
    assert {c["point"]["train.seed"] for c in configs} == {1, 2}
    assert sorted(c["point"]["loss.name"] for c in configs) == ["ce", "ce", "dice", "dice", "dsc", "dsc"]
    assert searcher.suggest("t6") is None
    scores = {"ce": 0.8, "dice": 0.2, "dsc": 0.1}
    for i, config in enumerate(configs):
        value = scores[config["point"]["loss.name"]] + 0.01 * config["point"]["train.seed"]
        searcher.on_trial_result(f"t{i}", {"dev_f1": value - 0.1})
        searcher.on_trial_result(f"t{i}", {"dev_f1": value})  # the best evaluation counts
        searcher.on_trial_complete(f"t{i}", {"dev_f1": value - 0.05})
    state = read_race(tmp_path / "sweep")
    assert state["results"][0] == {"1": pytest.approx(0.81), "2": pytest.approx(0.82)}
    path = tmp_path / "searcher.pkl"
    searcher.save(str(path))
    again = search_algorithm(plan, "f1", tmp_path / "other")
    again.restore(str(path))
    restored, kept = again.race.state(), searcher.race.state()
    # the time it ran goes on from the saved time (the clock runs between the two reads)
    assert restored.pop("elapsed_s") == pytest.approx(kept.pop("elapsed_s"), abs=5.0)
    assert restored == kept
    assert pickle.loads(path.read_bytes())["race"]["trials"]
    nxt = again.suggest("t7")
    assert nxt["point"]["train.seed"] == 3  # equal differences on every seed: t undefined, undecided
    again.on_trial_complete("t7", {"dev_f1": 0.99, "degenerate": True})  # one class: no observation
    index = again.race.trials["t7"][0]
    assert math.isnan(again.race.results[index][3])
    assert again.suggest("t8") != Searcher.FINISHED or again.race.decision is not None


# -- config errors before Ray starts -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("racing", "extra", "expected"),
    [
        ({"min_seeds": 5, "max_seeds": 3}, {}, "search.racing.min_seeds"),
        ({"confidence": 1.5}, {}, "confidence"),
        ({"confidence": 0.0}, {}, "confidence"),
        ({}, {"seeds": [1, 2]}, "remove search.seeds"),
        ({"budget": 4}, {}, "search.racing.budget"),
        ({"min_seeds": 1}, {}, "min_seeds"),
        ({"unknown": 1}, {}, "unknown"),
    ],
)
def test_invalid_racing_is_a_config_error(racing, extra, expected):
    assert expected in config_error({**CONFIGS, **extra, "racing": racing})


def test_racing_with_optuna_or_one_configuration_is_refused():
    optuna = {"algorithm": "optuna", "num_samples": 3, "space": {"loss.gamma": {"uniform": [0.0, 2.0]}}}
    assert "not supported with algorithm optuna" in config_error(
        {**optuna, "racing": {}}, loss={"name": "focal"}
    )
    assert "at least two configurations" in config_error({"racing": {}})


def test_any_named_space_races(tmp_path):
    from dicelab.sweeps.space import named_spaces

    for name in named_spaces():
        plan = plan_of({"spaces": [name], "racing": {"min_seeds": 2, "max_seeds": 4}})
        assert plan.num_trials == len(plan.points()) * 4
        assert all("train.seed" not in point for point in plan.points())


def test_elimination_lines_say_the_evidence_or_why_there_is_none():
    from dicelab.sweeps.race_searcher import elimination_line

    race = Race(settings(), ["ok", "broken"])
    run_race(race, lambda i, s: math.nan if i else 80.0 + s)
    assert (
        elimination_line(race.events[0])
        == "race: dropped broken (no usable seed (failed or degenerate), 3 seeds)"
    )
    event = {
        "configuration": "ce", "why": "decided worse than the leader", "difference": -0.0038, "low": -0.0075,
        "high": -0.0001, "leader": "dsc", "p_holm": 0.0456, "n": 5, "test": "paired t test",
    }  # fmt: skip
    assert "[-0.0075, -0.0001], p(Holm) 0.0456, n=5, paired t test" in elimination_line(event)
    assert "p(Holm over 2) 0.0456, n=5" in elimination_line({**event, "family": 2})


# -- the time budget, on recorded timelines (an injected clock) --------------------------------------------


class Timeline:
    """A machine's recorded timeline: every trial takes `seconds`, `concurrent` run at once."""

    def __init__(self, seconds: float, concurrent: int = 2):
        self.now, self.seconds, self.concurrent = 0.0, seconds, concurrent

    def clock(self) -> float:
        return self.now

    def run(self, race: Race, score) -> list[tuple[float, float]]:
        """Drive the race to its end as Tune would; the (start, end) of every trial."""
        running: dict[str, tuple[float, int, int]] = {}  # trial id -> (end, configuration, seed)
        spans, counter = [], 0
        while True:
            while len(running) < self.concurrent:
                chosen = race.next_trial(f"t{counter}")
                if chosen is None or chosen == FINISHED:
                    break
                running[f"t{counter}"] = (self.now + self.seconds, *chosen)
                spans.append((self.now, self.now + self.seconds))
                counter += 1
            if not running:
                return spans
            trial_id = min(running, key=lambda t: running[t][0])
            end, index, seed = running.pop(trial_id)
            self.now = end
            race.record(trial_id, score(index, seed))


def close_scores(index: int, seed: int) -> float:
    """Three configurations no handful of seeds separates."""
    return 80.0 + 0.05 * index + np.random.default_rng(100 * index + seed).normal(0, 2.0)


@pytest.mark.parametrize("seconds", [10.0, 40.0])
def test_a_time_budget_stops_the_race_on_a_fast_and_a_slow_machine(seconds):
    timeline = Timeline(seconds)
    race = Race(settings(max_seeds=50, time_budget_s=180.0), ["a", "b", "c"], clock=timeline.clock)
    spans = timeline.run(race, close_scores)
    assert race.decision["reason"] == TIME and "time budget spent" in race.decision["summary"]
    # no seed past the first three was started that could not end in time
    assert all(end <= 180.0 for start, end in spans[9:])
    # it kept adding seeds while the budget allowed: the next one would not have ended in time
    assert max(end for _, end in spans) + seconds > 180.0 - seconds
    assert len(race.trials) == len(spans) < 150


def test_every_configuration_gets_its_min_seeds_whatever_the_time():
    timeline = Timeline(100.0)  # a machine too slow for the budget
    race = Race(settings(max_seeds=50, time_budget_s=120.0), ["a", "b", "c"], clock=timeline.clock)
    timeline.run(race, close_scores)
    assert sorted(race.trials.values()) == [(i, s) for i in range(3) for s in (1, 2, 3)]
    assert race.decision["reason"] == TIME


def test_a_faster_machine_gets_more_paired_seeds_in_the_same_budget():
    counts = []
    for seconds in (10.0, 40.0):
        timeline = Timeline(seconds)
        race = Race(settings(max_seeds=50, time_budget_s=180.0), ["a", "b", "c"], clock=timeline.clock)
        timeline.run(race, close_scores)
        counts.append(len(race.trials))
    assert counts[0] > 2 * counts[1]


def test_a_race_decided_within_its_time_budget_ends_at_once():
    timeline = Timeline(10.0)
    means = [80.0, 70.0, 60.0]
    race = Race(settings(max_seeds=50, time_budget_s=600.0), ["a", "b", "c"], clock=timeline.clock)
    timeline.run(race, lambda i, s: means[i] + np.random.default_rng(10 * i + s).normal(0, 0.5))
    assert race.decision["reason"] == SEPARATED and timeline.now < 100.0


def test_a_resumed_race_counts_the_time_it_ran_before():
    timeline = Timeline(10.0)
    race = Race(settings(min_seeds=2, max_seeds=50, time_budget_s=100.0), ["a", "b"], clock=timeline.clock)
    for i in range(4):
        race.next_trial(f"t{i}")
    timeline.now = 95.0
    for i in (0, 2, 3):
        race.record(f"t{i}", 80.0 - i * np.random.default_rng(i).random())
    resumed = Race.from_state(json.loads(json.dumps(race.state())), clock=lambda: 0.0)
    assert resumed.elapsed() == pytest.approx(95.0) and resumed.durations == [95.0] * 3
    assert resumed.next_trial("r0") is None  # t1 is still running: wait for it, start nothing
    resumed.record("t1", 79.0)
    assert resumed.decision["reason"] == TIME
