"""The seed race as a Ray Tune searcher: Tune asks it for the next trial and tells it every result.

It runs in the driver, like any Tune searcher, so a race uses whatever Tune gives a sweep (a cluster,
`dicelab submit`, resources, ASHA inside a seed) and its state is saved with the experiment: `--resume`
continues the same race without rerunning or duplicating trials. It keeps the race's state as JSON beside the
sweep's directory (the live view and the parent run's records read it) and prints each elimination as one
line.

The JSON file holds the whole race, so writing it at every hand-out and result would cost O(N²) bytes over a
sweep of N trials. It is written (compact) when the race is decided, whenever Tune saves the experiment
(the searcher's `save`: the file is never older than Tune's own state, and the last save of an interrupted
sweep leaves it current), and between saves once the hand-outs and results since the last write reach
1/WRITE_SHARE of the configurations and trials it holds: every event in a small race, every 25th to 75th
in a race of 500 configurations x 2 seeds. Between saves that is O(N) bytes over a sweep. Resume does not
read the file: the race comes back from the searcher's checkpoint in Tune's state.
"""

from __future__ import annotations

import json
import math
import os
import pickle
from pathlib import Path
from typing import Any

from ray.tune.search import Searcher
from rich.console import Console

from dicelab.sweeps.algorithms import POINT_KEY
from dicelab.sweeps.race_records import race_file
from dicelab.sweeps.racing import FINISHED, Race
from dicelab.sweeps.space import Point
from dicelab.sweeps.trainable import DEGENERATE_RESULT
from dicelab.tracking import conventions as names

WRITE_SHARE = 20  # between Tune's saves, rewritten after (configurations + trials) / WRITE_SHARE events


class RaceSearcher(Searcher):
    def __init__(self, race: Race, points: list[Point], metric: str, mode: str, directory: Path):
        # metric: the dev metric without prefix ("f1"); Tune's metric is dev_<metric>.
        super().__init__(metric=names.dev_metric(metric), mode=mode)
        self.race, self.points, self.directory = race, points, directory
        self.best_key = names.best_metric(metric)
        self.best: dict[str, float] = {}  # trial id -> best value reported so far
        self._announced = race.decision is not None
        self._unwritten = 0  # hand-outs and results since the file was last written
        self._write()

    # -- Tune ------------------------------------------------------------------------------------------

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        chosen = self.race.next_trial(trial_id)
        if chosen is None:
            return None
        if chosen == FINISHED:
            self._write()
            return Searcher.FINISHED
        index, seed = chosen  # type: ignore[misc]
        self._changed()
        return {POINT_KEY: {**self.points[index], "train.seed": seed}}

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self._note(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        if result:
            self._note(trial_id, result)
        # A degenerate trial (one class predicted at its best evaluation) is no observation of its
        # configuration, as in the analysis: it counts like a failed seed.
        degenerate = bool(result and result.get(DEGENERATE_RESULT))
        value = None if error or degenerate else self.best.get(trial_id)
        dropped = self.race.record(trial_id, value)
        console = Console(width=max(Console().width, 160))
        for event in dropped:
            console.print(elimination_line(event), highlight=False, markup=False)
        if self.race.decision is not None and not self._announced:
            self._announced = True
            console.print(f"race decided: {self.race.decision['summary']}", highlight=False, markup=False)
            self._write()
        else:
            self._changed()

    def save(self, checkpoint_path: str) -> None:
        state = self.race.state()
        with open(checkpoint_path, "wb") as handle:
            pickle.dump({"race": state, "best": self.best}, handle)
        if self._unwritten:
            self._write(state)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as handle:
            saved = pickle.load(handle)
        self.race = Race.from_state(saved["race"])
        self.best = saved["best"]
        self._announced = self.race.decision is not None
        self._write()

    # -- helpers ---------------------------------------------------------------------------------------

    def _note(self, trial_id: str, result: dict[str, Any]) -> None:
        """The trial's best so far: its own best_dev_* when reported, else the best dev_* seen."""
        value = result.get(self.best_key, result.get(self.metric))
        if not isinstance(value, int | float) or not math.isfinite(value):
            return
        previous = self.best.get(trial_id)
        if previous is None or (value > previous if self.mode == "max" else value < previous):
            self.best[trial_id] = float(value)

    def _changed(self) -> None:
        """One more hand-out or result: the file is rewritten once they are a share of the trials so far."""
        self._unwritten += 1
        if self._unwritten * WRITE_SHARE >= len(self.race.labels) + len(self.race.trials):
            self._write()

    def _write(self, state: dict[str, Any] | None = None) -> None:
        path = race_file(self.directory)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.tmp")
        text = json.dumps(self.race.state() if state is None else state, separators=(",", ":"))
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
        self._unwritten = 0


def elimination_line(event: dict[str, Any]) -> str:
    """One printed line per dropped configuration, with its evidence."""
    if not math.isfinite(event["difference"]):
        return f"race: dropped {event['configuration']} ({event['why']}, {event['n']} seeds)"
    # Holm's family: the configurations compared with the leader at this look (the analysis keeps the drop)
    family = f" over {event['family']}" if event.get("family") else ""
    return (
        f"race: dropped {event['configuration']} ({event['why']}: {_signed(event['difference'])} vs "
        f"{event['leader']}, [{_signed(event['low'])}, {_signed(event['high'])}], "
        f"p(Holm{family}) {event['p_holm']:.3g}, n={event['n']}, {event['test']})"
    )


def _signed(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:+.4g}"
