"""Seed racing at scale: the cached tests, kept means and queue of waiting configurations give exactly the
decisions of the plain computation (every configuration tested against the leader at every result, every
configuration scanned at every hand-out) on random races, with one test per result instead of one per
configuration."""

from __future__ import annotations

import gc
import json
import math
import time
from typing import Any

import numpy as np
import pytest

import dicelab.stats
from dicelab.sweeps.racing import ALIVE, DROPPED, FINISHED, Race, RaceSettings

RACES = 16  # random races (scipy's tests dominate their time)


@pytest.fixture(autouse=True, scope="module")
def unfrozen_heap():
    """The plain race runs Holm at every result. Under the suite's frozen heap (tests/conftest.py) each
    dicelab.stats.holm call walks the frozen objects (gc.get_freeze_count, about 0.05-0.1 CPU-s a call in
    CPython 3.11); unfrozen it takes microseconds. The heap is frozen again afterwards."""
    frozen = gc.get_freeze_count() > 0
    if frozen:
        gc.unfreeze()
    yield
    if frozen:
        gc.collect()
        gc.freeze()


class PlainRace(Race):
    """The race as computed without any cache: what the cached one must reproduce decision for decision."""

    def mean(self, index: int) -> float:
        values = [value for value in self.results[index].values() if math.isfinite(value)]
        return float(np.mean(values)) if values else math.nan

    def _cached(self, kind: str, index: int, leader: int, test: Any) -> Any:
        return test()

    def _recorded(self, index: int) -> None:
        pass  # nothing kept between results

    # racing.Race.leader and _maybe_end as they were: every configuration scanned at every result
    def leader(self) -> int | None:
        """The alive configuration with the best mean among those with min_seeds results."""
        ready = [i for i in self.alive() if self._ready(i) and math.isfinite(self.mean(i))]
        if not ready:
            return None
        sign = 1.0 if self.settings.higher_is_better else -1.0
        return max(ready, key=lambda i: (sign * self.mean(i), -i))

    def _maybe_end(self) -> None:
        alive = self.alive()
        if len(alive) == 1 and self._ready(alive[0]):
            self._decide("separated")
            return
        margin = self.settings.margin
        leader = self.leader()
        if margin and leader is not None:
            from dicelab.stats import equivalent

            others = [i for i in alive if i != leader]
            if all(self._ready(i) for i in others) and all(
                equivalent(self.results[i], self.results[leader], margin, alpha=self.settings.alpha)[0]
                for i in others
            ):
                self._decide("equivalent")

    # racing.Race._eliminate as it was: every ready configuration tested, Holm over all, at every result
    def _eliminate(self) -> list[dict[str, Any]]:
        leader = self.leader()
        if leader is None:
            return []
        # the statistics (scipy, statsmodels) where a race compares: a sweep that does not race goes without
        from dicelab.stats import WORSE, compare, holm, verdict

        rivals = [i for i in self.alive() if i != leader and self._ready(i)]
        settings = self.settings
        comparisons = [
            compare(self.results[i], self.results[leader], confidence=settings.confidence, test=settings.test)
            for i in rivals
        ]
        adjusted = holm([comparison.p_value for comparison in comparisons])
        dropped = []
        for index, comparison, p_holm in zip(rivals, comparisons, adjusted, strict=True):
            # A configuration with no usable seed at all (every seed failed or degenerate) cannot win.
            failed_out = self.finished_seeds(index) == 0 and len(self.results[index]) >= settings.min_seeds
            worse = verdict(
                comparison, p_holm, alpha=settings.alpha, higher_is_better=settings.higher_is_better
            )
            if worse != WORSE and not failed_out:
                continue
            self.status[index] = DROPPED
            event = {
                "time": time.strftime("%Y-%m-%d %H:%M:%S"),
                "trials_finished": len(self.trials) - len(self.pending),
                "configuration": self.labels[index],
                "leader": self.labels[leader],
                "paired": comparison.paired,
                "n": comparison.n,
                "difference": comparison.difference,
                "low": comparison.low,
                "high": comparison.high,
                "p": comparison.p_value,
                "p_holm": p_holm,
                "family": sum(math.isfinite(c.p_value) for c in comparisons),
                "test": comparison.test,
                "why": "no usable seed (failed or degenerate)"
                if failed_out
                else "decided worse than the leader",
            }
            self.events.append(event)
            dropped.append(event)
        return dropped

    def next_trial(self, trial_id: str) -> tuple[int, int] | str | None:
        if self.decision is not None:
            return FINISHED
        wanting = self._wanting()
        if wanting:
            index = min(wanting, key=lambda i: (len(self.launched[i]), i))
            seed = self.settings.seeds[len(self.launched[index])]
            self.launched[index].append(seed)
            self.trials[trial_id] = (index, seed)
            self.pending.append(trial_id)
            return index, seed
        if self.pending:
            return None
        self._decide("budget")
        return FINISHED

    def _next_wanting(self) -> int | None:
        wanting = self._wanting()
        return min(wanting, key=lambda i: (len(self.launched[i]), i)) if wanting else None


def random_race(seed: int) -> tuple[RaceSettings, list[str], np.ndarray, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    count = int(rng.integers(2, 9))
    min_seeds = int(rng.integers(2, 4))
    settings = RaceSettings(
        min_seeds=min_seeds,
        max_seeds=min_seeds + int(rng.integers(0, 4)),
        test=str(rng.choice(["t", "permutation"])),
        margin=float(rng.choice([0.0, 1.0, 4.0])) or None,
        budget=int(rng.integers(count * min_seeds, count * (min_seeds + 4))) if rng.random() < 0.3 else None,
        higher_is_better=bool(rng.random() < 0.7),
    )
    # a few clearly different configurations among near-ties, seed noise, some failed seeds
    means = rng.choice([70.0, 79.0, 80.0, 80.0, 80.2], size=count)
    table = rng.normal(means[:, None], rng.uniform(0.1, 1.5), size=(count, settings.max_seeds))
    failed = rng.random(table.shape) < 0.08
    if rng.random() < 0.2:
        failed[int(rng.integers(count))] = True  # a configuration that always fails
    table[failed] = math.nan
    order = rng.random(count * settings.max_seeds * 4)  # which running trial reports next
    return settings, [f"c{i}" for i in range(count)], table, order, int(rng.integers(1, 5))


def drive(race: Race, table: np.ndarray, order: np.ndarray, concurrent: int, resume_at: int | None = None):
    """Tune's way, in random order of completion; at `resume_at` results, the race goes through its state
    and continues from there (the caches are rebuilt). Returns what it handed out and the final race."""
    handed: list[Any] = []
    counter = results = 0
    while True:
        while len(race.pending) < concurrent:
            chosen = race.next_trial(f"t{counter}")
            handed.append(chosen)
            counter += 1
            if chosen is None or chosen == FINISHED:
                break
        if not race.pending:
            return handed, race
        trial_id = race.pending[int(order[results % len(order)] * len(race.pending))]
        index, seed = race.trials[trial_id]
        race.record(trial_id, table[index, seed - 1])
        results += 1
        if results == resume_at:
            race = type(race).from_state(json.loads(json.dumps(race.state())))


def decisions(race: Race) -> dict[str, Any]:
    events = [{key: value for key, value in event.items() if key != "time"} for event in race.events]
    return {
        "events": json.dumps(events),  # NaN-safe equality
        "status": race.status,
        "decision": race.decision,
        "trials": race.trials,
        "results": json.dumps(race.results),
    }


def test_cached_race_decides_exactly_as_the_plain_computation():
    reasons, drops = set(), 0
    for seed in range(RACES):
        settings, labels, table, order, concurrent = random_race(seed)
        resume_at = int(seed % 7) + 3 if seed % 2 else None
        handed, cached = drive(Race(settings, labels), table, order, concurrent, resume_at)
        plain_handed, plain = drive(PlainRace(settings, labels), table, order, concurrent, resume_at)
        assert handed == plain_handed, f"race {seed}"
        assert decisions(cached) == decisions(plain), f"race {seed}"
        reasons.add(cached.decision["reason"])
        drops += cached.status.count(DROPPED)
    # the equality is worth something: these races drop configurations and end in every way
    assert reasons == {"separated", "equivalent", "budget"} and drops > RACES / 2


def counted_tests(monkeypatch) -> dict[str, int]:
    calls = {"compare": 0}
    original = dicelab.stats.compare

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls["compare"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(dicelab.stats, "compare", counting)  # racing imports it at each look
    return calls


def wide_race(kind: type[Race], count: int) -> Race:
    """count configurations x 2 seeds, a fixed leader, the others undecided (no drop at 2 seeds)."""
    race = kind(RaceSettings(min_seeds=2, max_seeds=2), [f"c{i}" for i in range(count)])
    rng = np.random.default_rng(0)
    table = np.stack([np.full(2, 90.0)] + [80.0 + rng.normal(0, 1, size=2) for _ in range(count - 1)])
    drive(race, table, np.zeros(4 * count), concurrent=2)
    return race


@pytest.mark.parametrize("count", [40, 120])
def test_one_test_per_result_not_one_per_configuration(monkeypatch, count):
    calls = counted_tests(monkeypatch)
    race = wide_race(Race, count)
    assert race.decision is not None and len(race.trials) == 2 * count
    assert calls["compare"] <= len(race.trials)  # at most one new test per result
    calls["compare"] = 0
    wide_race(PlainRace, 30)  # the plain computation: every ready configuration at every result
    assert calls["compare"] > 3 * 2 * 30


def test_the_queue_hands_out_in_the_plain_order_and_skips_dropped_and_busy():
    race = Race(RaceSettings(min_seeds=2, max_seeds=4), ["a", "b", "c"])
    first = [race.next_trial(f"t{i}") for i in range(6)]
    assert first == [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]
    assert race.next_trial("t6") is None  # all three busy past min_seeds
    for trial_id, value in [("t0", 80.0), ("t3", 81.0), ("t1", math.nan), ("t4", math.nan), ("t2", 80.0)]:
        race.record(trial_id, value)
    assert race.status[1] == DROPPED  # no usable seed
    assert race.status[0] == ALIVE and race.next_trial("t7") == (0, 3)
    assert race.next_trial("t8") is None  # c still busy with its second seed; b dropped


def test_a_late_result_of_a_dropped_configuration_changes_nothing():
    """b is dropped (c takes the lead) while b's third seed runs; that seed then reports the race's best."""
    table = {0: [80.0, 83.0, 80.5], 1: [79.45, 80.5, 200.0], 2: [81.5, 82.5]}
    races = []
    for kind in (Race, PlainRace):
        race = kind(RaceSettings(min_seeds=2, max_seeds=4), ["a", "b", "c"])
        for trial in range(6):
            race.next_trial(f"t{trial}")
        for trial in ("t0", "t1", "t3", "t4"):  # a and b have their first two seeds: undecided
            index, seed = race.trials[trial]
            race.record(trial, table[index][seed - 1])
        assert race.status == [ALIVE] * 3
        assert {race.next_trial("t6"), race.next_trial("t7")} == {(0, 3), (1, 3)}
        for trial in ("t2", "t5"):  # c's results: c leads, b is decided worse
            index, seed = race.trials[trial]
            race.record(trial, table[index][seed - 1])
        assert race.status == [ALIVE, DROPPED, ALIVE] and race.leader() == 2, kind
        late = next(trial for trial, where in race.trials.items() if where == (1, 3))
        race.record(late, 200.0)
        assert race.leader() == 2
        races.append(race)
    assert decisions(races[0]) == decisions(races[1])
