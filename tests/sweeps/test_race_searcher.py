"""The race searcher's state file at scale: written in O(N) bytes over a sweep (not the whole race at every
hand-out and result), yet current whenever Tune saves the experiment, when the race is decided, and after a
restore."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from dicelab.sweeps.algorithms import POINT_KEY
from dicelab.sweeps.race_records import race_file, read_race
from dicelab.sweeps.race_searcher import RaceSearcher
from dicelab.sweeps.racing import Race, RaceSettings


def as_json(value: Any) -> str:
    return json.dumps(value)  # NaN-safe equality (a configuration without results has a NaN mean)


def searcher_of(count: int, directory: Path) -> RaceSearcher:
    race = Race(RaceSettings(min_seeds=2, max_seeds=2), [f"gamma={i}" for i in range(count)])
    return RaceSearcher(race, [{"loss.gamma": float(i)} for i in range(count)], "f1", "max", directory)


def measured(monkeypatch) -> dict[str, int]:
    """Counts the searcher's writes of the file and the bytes they wrote."""
    written = {"writes": 0, "bytes": 0}
    original = RaceSearcher._write

    def counting(self: RaceSearcher, *args: Any) -> None:
        original(self, *args)
        written["writes"] += 1
        written["bytes"] += race_file(self.directory).stat().st_size

    monkeypatch.setattr(RaceSearcher, "_write", counting)
    return written


def run(searcher: RaceSearcher, concurrent: int = 2) -> None:
    """As Tune drives it: hand out while it gives trials, complete the oldest."""
    rng = np.random.default_rng(0)
    running: list[tuple[str, dict[str, Any]]] = []
    counter = 0
    while True:
        while len(running) < concurrent:
            config = searcher.suggest(f"t{counter}")
            if not isinstance(config, dict):
                break
            running.append((f"t{counter}", config[POINT_KEY]))
            counter += 1
        if not running:
            return
        trial_id, point = running.pop(0)
        value = (0.9 if point["loss.gamma"] == 0 else 0.8) + rng.normal(0, 0.01)
        searcher.on_trial_result(trial_id, {"dev_f1": value})
        searcher.on_trial_complete(trial_id, {"dev_f1": value})


def test_the_race_file_costs_linear_bytes(tmp_path, monkeypatch):
    written = measured(monkeypatch)
    totals = {}
    for count in (40, 160):
        written.update(writes=0, bytes=0)
        searcher = searcher_of(count, tmp_path / f"sweep-{count}")
        run(searcher)
        assert searcher.race.decision is not None and len(searcher.race.trials) == 2 * count
        # the file is compact JSON and holds the decided race
        text = race_file(searcher.directory).read_text()
        assert "\n" not in text and as_json(json.loads(text)) == as_json(searcher.race.state())
        totals[count] = dict(written)
    # 4x the trials: about 4x the bytes (the file rewritten at every event would be 16x); the writes grow
    # with the logarithm of the trials, far fewer than the 640 hand-outs and results
    assert totals[160]["bytes"] < 6 * totals[40]["bytes"]
    assert totals[160]["writes"] < 2 * totals[40]["writes"] and totals[160]["writes"] < 640 / 3


def test_the_file_is_current_at_every_save_and_restore(tmp_path):
    searcher = searcher_of(60, tmp_path / "sweep")
    saves = tmp_path / "searcher.pkl"
    for _ in range(40):  # part way: some events since the last write
        config = searcher.suggest(f"t{len(searcher.race.trials)}")
        assert isinstance(config, dict)
    for trial_id in list(searcher.race.pending)[:3]:  # fewer than (60 + 40) / 20 events
        searcher.on_trial_complete(trial_id, {"dev_f1": 0.8})
    assert as_json(read_race(searcher.directory)) != as_json(searcher.race.state())  # lagging
    searcher.save(str(saves))  # Tune saves the experiment: the file is as current as Tune's state
    assert as_json(read_race(searcher.directory)) == as_json(searcher.race.state())

    again = searcher_of(60, tmp_path / "resumed")
    again.restore(str(saves))  # a resumed sweep: the race comes from Tune's checkpoint, the file follows
    assert as_json(again.race.state()) == as_json(searcher.race.state())
    assert as_json(read_race(again.directory)) == as_json(read_race(searcher.directory))


def test_the_decided_race_is_written_at_once(tmp_path):
    searcher = searcher_of(60, tmp_path / "sweep")
    run(searcher)  # no save: the last result decides the race, and the file says so
    state = read_race(searcher.directory)
    assert searcher.race.decision is not None
    assert state is not None and as_json(state) == as_json(searcher.race.state())
