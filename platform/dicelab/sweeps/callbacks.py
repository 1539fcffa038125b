"""Driver-side Tune callbacks: MLflow records that match what Tune did, and the live view of the trials.

Both are pickled by Tune with the experiment (that is how `--resume` gets them back), so clients and consoles
are created lazily and never pickled.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from ray.tune import Callback
from ray.tune.experiment import Trial
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from dicelab.config import config_to_yaml, flatten_config
from dicelab.sweeps import records
from dicelab.sweeps.race_records import read_race
from dicelab.sweeps.racing import DROPPED
from dicelab.sweeps.trainable import (
    RUN_ID_RESULT,
    SweepContext,
    evaluations,
    point_of,
    run_name,
    trial_config,
)
from dicelab.tracking import conventions as names
from dicelab.tracking.lifecycle import RECORDS, Event, State, TrialRun, state_of

_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def trial_error_line(trial: Trial) -> str:
    """The last "SomeError: message" line of the trial's traceback (one line, for the run's reason tag)."""
    path = Path(trial.error_file) if trial.error_file else None
    text = path.read_text(errors="replace") if path is not None and path.is_file() else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if _ERROR_LINE.match(line)]
    return (errors or lines or ["the trial failed without an error message"])[-1]


class _Lazy(Callback):
    """State created in the driver process when the sweep runs, dropped when Tune pickles the callback."""

    _transient: tuple[str, ...] = ()

    def __getstate__(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key not in self._transient}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for key in self._transient:
            self.__dict__.setdefault(key, None)


class TrialRecords(_Lazy):
    """Keeps each trial's MLflow child run true to what Tune did, and remembers every trial's outcome. It
    sends the trial's lifecycle (`dicelab.tracking.lifecycle`) the events only the driver sees:

    - stopped by the scheduler (ASHA): the trial's thread ended at once without ending its run; the run
      becomes scheduler_stopped (outcome early_stopped, FINISHED), with best_dev_* from its metric history;
    - errored after its retries, or lost with its worker: failed with the error's last line (a run is
      created if the trial died before creating its own, so every trial has one).
    """

    _transient = ("_client",)

    def __init__(self, context: SweepContext, scheduler: str):
        self.context, self.scheduler = context, scheduler
        self.outcomes: dict[str, tuple[str, str | None]] = {}  # trial id -> (outcome, reason)
        self.degenerate: dict[str, str] = {}  # trial id -> its run's dicelab.degenerate tag
        self.best: dict[str, float] = {}  # trial id -> its run's best_dev_<metric>, when it ended before
        self._client: MlflowClient | None = None

    @property
    def client(self) -> MlflowClient:
        if self._client is None:
            self._client = MlflowClient(self.context.tracking_uri)
        return self._client

    def setup(self, **info: Any) -> None:
        """Outcomes and best values of trials that ended before a --resume (the view shows them too: the
        view's own best values are gone with the driver that saw the trials' results)."""
        context = self.context
        self.best = {}  # (set here too: a sweep pickled by an older dicelab has none)
        best_key = names.best_metric(context.metric)
        for run in records.trial_runs(self.client, context.experiment_id, context.sweep_id):
            trial_id = run.data.tags[names.TRIAL_ID]
            outcome = run.data.tags.get(names.OUTCOME)
            if outcome is not None:
                self.outcomes[trial_id] = (outcome, run.data.tags.get(names.REASON))
            if names.DEGENERATE in run.data.tags:
                self.degenerate[trial_id] = run.data.tags[names.DEGENERATE]
            best = run.data.metrics.get(best_key)
            if outcome is not None and _is_value(best):
                self.best[trial_id] = float(best)

    def _find(self, trial: Trial):
        """The trial's run: by the id in its last result (one read), else by its tags (a trial that ended
        before reporting, or one reported by an older dicelab)."""
        run_id = (trial.last_result or {}).get(RUN_ID_RESULT)
        if run_id:
            return self.client.get_run(run_id)
        context = self.context
        return records.find_trial_run(self.client, context.experiment_id, context.sweep_id, trial.trial_id)

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        run = self._find(trial)
        if run is None:  # ended before it started (pending trials when a sweep stops)
            return
        outcome = records.outcome_of(run)
        reason = run.data.tags.get(names.REASON)
        if state_of(run) == State.RUNNING:  # Tune ended it from outside: only a scheduler does that
            count = evaluations(trial.last_result) or 0
            reason = f"stopped by the {self.scheduler} scheduler after {count} evaluations"
            records.log_best_from_history(self.client, run, self.context.metric)
            config, _ = trial_config(self.context, point_of(trial.config, self.context.plan))
            self.client.log_text(run.info.run_id, config_to_yaml(config), names.CONFIG_ARTIFACT)
            stopped = TrialRun.of(self.client, run).send(Event.SCHEDULER_STOP, reason=reason)
            outcome = RECORDS[stopped].outcome or stopped.value
        self.outcomes[trial.trial_id] = (outcome, reason)
        if names.DEGENERATE in run.data.tags:
            self.degenerate[trial.trial_id] = run.data.tags[names.DEGENERATE]

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        reason = trial_error_line(trial)
        run = self._find(trial)
        if run is None:  # it died before its run existed: one is created, so that every trial has one
            config, overrides = trial_config(self.context, point_of(trial.config, self.context.plan))
            run_id = records.create_trial_run(
                self.client,
                self.context.experiment_id,
                run_name=run_name(overrides),
                parent_run_id=self.context.parent_run_id,
                tags=self.context.trial_tags(trial.trial_id),
                params=flatten_config(config),
            )
            TrialRun(self.client, run_id, State.RUNNING).send(Event.FAIL, reason=reason)
        elif state_of(run) == State.RUNNING:
            TrialRun.of(self.client, run).send(Event.FAIL, reason=reason)
        else:  # the trial recorded its own failure (a better reason than the traceback's last line)
            reason = run.data.tags.get(names.REASON, reason)
        self.outcomes[trial.trial_id] = (names.FAILED, reason)


_STYLE = {
    "RUNNING": "cyan",
    "PENDING": "dim",
    "PAUSED": "dim",
    names.COMPLETED: "green",
    names.EARLY_STOPPED: "yellow",
    names.FAILED: "red",
    names.NON_FINITE: "red",
    records.INTERRUPTED: "yellow",
}
_DEGENERATE_STYLE = "bold yellow"
_LIVE_FINISHED_ROWS = 12  # while the sweep runs: the running trials and the best finished ones
_FINAL_ROWS = 60  # the table printed at the end


_output: list[Console] = []  # where SweepView prints when the caller says so (`printing_to`); else stdout


@contextlib.contextmanager
def printing_to(console: Console) -> Iterator[None]:
    """The sweep view prints to `console` meanwhile (`dicelab.sweep`: its progress callback, or nowhere)."""
    _output.append(console)
    try:
        yield
    finally:
        _output.remove(console)


class SweepView(_Lazy):
    """A live table of the trials (status, swept values, evaluations, latest and best metric).

    On a terminal it redraws in place; elsewhere (CI, job logs) it prints one line per trial event.
    """

    _transient = ("_console", "_live", "_last_draw")

    def __init__(
        self, context: SweepContext, trial_records: TrialRecords, where: str, race_dir: Path | None = None
    ):
        self.context, self.records, self.where = context, trial_records, where
        self.race_dir = race_dir  # a seed race's sweep directory: its live state is shown above the table
        self.best: dict[str, float] = {}  # trial id -> best value of the metric so far (see `_best`)
        self._console: Console | None = None
        self._live: Live | None = None
        self._last_draw = 0.0

    @property
    def _sign(self) -> float:
        """1 when the best value is the highest (search.mode max), -1 when it is the lowest."""
        return -1.0 if self.context.plan.mode == "min" else 1.0

    def _rank(self, trial: Trial) -> float:
        """Higher for a better trial; a trial without a value last."""
        best = self._best(trial)
        return -math.inf if best is None else self._sign * best

    # -- Tune hooks ------------------------------------------------------------------------------------

    def setup(self, **info: Any) -> None:
        if _output:
            self._console = _output[-1]
        else:
            self._console = Console()
            if not self._console.is_terminal:  # logs: no terminal width to fit, keep ids and values whole
                self._console = Console(width=max(self._console.width, 160))
        if self._console.is_terminal:
            self._live = Live(console=self._console, refresh_per_second=2, transient=False)
            self._live.start()

    def on_trial_start(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._log(trial, "started")

    def on_trial_result(
        self, iteration: int, trials: list[Trial], trial: Trial, result: dict, **info: Any
    ) -> None:
        value = result.get(self.context.tune_metric)
        if _is_value(value):  # NaN: the closing result of a failed trial, no value to rank it by
            previous = self.best.get(trial.trial_id)
            if previous is None or self._sign * value > self._sign * previous:  # search.mode
                self.best[trial.trial_id] = float(value)

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._log(trial, self._status(trial))

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._log(trial, self._status(trial))

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        now = time.monotonic()
        if self._live is not None and now - self._last_draw > 0.5:
            self._last_draw = now
            self._live.update(self.render(trials, _LIVE_FINISHED_ROWS))

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        # the final table without the MLflow location: the sweep's closing lines say where to look
        if self._live is not None:
            self._live.update(self.render(trials, _FINAL_ROWS, footer=False))
            self._live.stop()
        elif self._console is not None:
            self._console.print(self.render(trials, _FINAL_ROWS, footer=False))

    # -- rendering -------------------------------------------------------------------------------------

    def _status(self, trial: Trial) -> str:
        if trial.trial_id in self.records.outcomes:
            return self.records.outcomes[trial.trial_id][0]
        if trial.status == Trial.TERMINATED:  # ended by Tune without an outcome: the sweep was stopped
            return records.INTERRUPTED
        return names.FAILED if trial.status == Trial.ERROR else trial.status

    def _best(self, trial: Trial) -> float | None:
        """The best value this driver saw reported, else (a trial that ended before a --resume) its run's."""
        if trial.trial_id in self.best:
            return self.best[trial.trial_id]
        return self.records.best.get(trial.trial_id)

    def _overrides(self, trial: Trial) -> dict[str, Any]:
        return self.context.plan.trial_data(point_of(trial.config, self.context.plan))[1]

    def _log(self, trial: Trial, event: str) -> None:
        if self._live is not None or self._console is None:
            return
        best = self._best(trial)
        metric = f"  best {self.context.tune_metric} {best:.4f}" if best is not None else ""
        reason = self.records.outcomes.get(trial.trial_id, (None, None))[1]
        because = f"  ({reason})" if reason and event != "started" else ""
        line = Text(trial.trial_id, style=_STYLE.get(event, ""))
        line.append(f" {event}: {run_name(self._overrides(trial))}{metric}{because}")
        if trial.trial_id in self.records.degenerate:
            line.append(f"  DEGENERATE: {self.records.degenerate[trial.trial_id]}", style=_DEGENERATE_STYLE)
        self._console.print(line, highlight=False)

    def render(self, trials: list[Trial], finished_rows: int, footer: bool = True) -> Group:
        metric = self.context.tune_metric
        statuses = {trial.trial_id: self._status(trial) for trial in trials}
        counts: dict[str, int] = {}
        for status in statuses.values():
            counts[status] = counts.get(status, 0) + 1
        summary = " · ".join(f"{count} {status.lower()}" for status, count in sorted(counts.items()))

        running = [t for t in trials if statuses[t.trial_id] == "RUNNING"]
        finished = [t for t in trials if statuses[t.trial_id] in records.STATUS_OF_OUTCOME]
        finished.sort(key=self._rank, reverse=True)
        shown = running + finished[:finished_rows]

        keys: list[str] = []
        rows = []
        for trial in shown:
            overrides = self._overrides(trial)
            keys += [key for key in overrides if key not in keys]
            rows.append((trial, overrides))
        race = self._race()
        title = f"sweep {self.context.sweep_name}: {summary}"
        if race is not None:
            title += f"\n{race_line(race)}"
        table = Table(title=title, title_justify="left", expand=False)
        table.add_column("trial", no_wrap=True)
        table.add_column("status", no_wrap=True)
        for key in keys:
            table.add_column(_header(key), overflow="fold")
        table.add_column("evals", justify="right")
        table.add_column(metric, justify="right")
        table.add_column(f"best {metric}", justify="right")
        for trial, overrides in rows:
            status = statuses[trial.trial_id]
            count = evaluations(trial.last_result)
            latest = trial.last_result.get(metric)
            best = self._best(trial)
            status_cell = Text(status.lower(), style=_STYLE.get(status, ""))
            if trial.trial_id in self.records.degenerate:  # flagged: its metric is no result
                status_cell.append(" degenerate", style=_DEGENERATE_STYLE)
            if race is not None and trial.trial_id in race["trials"]:
                index = race["trials"][trial.trial_id][0]
                if race["status"][index] == DROPPED:
                    status_cell.append(" dropped", style="dim")
            table.add_row(
                trial.trial_id,
                status_cell,
                *[_short(overrides.get(key, "")) for key in keys],
                "" if count is None else str(count),
                f"{latest:.4f}" if _is_value(latest) else "",
                f"{best:.4f}" if best is not None else "",
            )
        hidden = len(trials) - len(shown)
        below = Text(f"{hidden} more trials (pending or below the best {finished_rows})" if hidden else "")
        if footer:  # while the sweep runs: where its runs can be watched
            below.append(f"{' · ' if hidden else ''}{self.where}", style="dim")
        return Group(table, below) if below.plain else Group(table)

    def _race(self) -> dict[str, Any] | None:
        return read_race(self.race_dir) if self.race_dir is not None else None


def race_line(race: dict[str, Any]) -> str:
    """E.g. "race: 3 alive · 5 dropped · leader dsc alpha=0.1 (84.1 over 4 seeds)"."""
    if race.get("decision"):
        return f"race decided: {race['decision']['summary']}"
    rows = race["configurations"]
    alive = [row for row in rows if row["status"] != DROPPED]
    scored = [row for row in alive if row["seeds"] and row["mean"] == row["mean"]]  # NaN: no result yet
    text = f"race: {len(alive)} alive · {len(rows) - len(alive)} dropped"
    if scored:
        lead = max(scored, key=lambda row: row["mean"])
        text += f" · leader {lead['label']} ({lead['mean']:.4f} over {lead['seeds']} seeds)"
    return text


def _is_value(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _header(key: str) -> str:
    """train.seed -> seed, loss.alpha -> alpha, loss.name -> loss."""
    section, _, last = key.rpartition(".")
    return section.rpartition(".")[2] if last == "name" else last


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
