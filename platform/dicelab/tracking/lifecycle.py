"""Every run dicelab writes, and its lifecycle: a trial's run, a sweep's parent run, an analysis run. Their
states, the events that move them, what each state is on the MLflow run (the `dicelab.outcome` tag, the run's
status, the run-name suffix), and the one vocabulary that reads a run's status back (`outcome_of_status`).

This module alone creates those runs (`start_run`, the START event) and writes their states. The trial loop's
MLflow reporter, the sweep's trainable, its Tune callbacks, its driver and `--resume` send events
(`LifecycleRun.send`); an event the run's kind does not take in its state raises `LifecycleError` (a bug, not
a user error).

A trial's run:

    pending --start--> running --complete--------> completed
               |         |     --stop_early------> early_stopped      (patience, or a reporter's should_stop)
               |         |     --scheduler_stop--> scheduler_stopped  (ASHA stopped it; the driver records it)
               |         |     --non_finite------> non_finite
               |         |     --fail------------> failed
               |         |     --interrupt-------> interrupted        (its sweep's driver stopped)
               +--fail-----------------------------> failed            (it died before its run existed)
    running | failed | interrupted --resume (from a checkpoint) | restart (from scratch)--> running
    failed | interrupted --fail--> failed                 (a retry failed before it reopened its run)
    early_stopped --resume--> running                       (continued from its state by whoever paused it)

completed, early_stopped, scheduler_stopped and non_finite are final: a resumed sweep never runs such a trial
again (an early-stopped trial is continued only by a caller holding its state, as a pausing scheduler
would). A failed trial may be retried (Tune's max_failures, `--retry-failed`), an interrupted one is resumed.

A sweep's parent run (one per sweep invocation):

    pending --start--> running --complete--> completed      (some trial completed or stopped early)
                               --fail------> failed         (none did, or the driver raised)
                               --interrupt-> interrupted    (Ctrl-C, or trials left unrun)
    running | completed | failed | interrupted --resume--> running    (`dicelab sweep --resume`)

An analysis run (holds a report when an experiment has no parent run):

    pending --start--> running --complete--> completed
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from dicelab.tracking import conventions as names

if TYPE_CHECKING:  # MLflow is imported where a run is written: the trial loop's states import no MLflow
    from mlflow import MlflowClient
    from mlflow.entities import Run

TRIAL_STATE = "dicelab.trial_state"  # tag: the lifecycle state a trial's run ended in (absent while running)
RESTORED_FROM_STEP = "dicelab.restored_from_step"  # tag: the trial continued from a checkpoint at this step
RESULT_SEPARATOR = " · "  # "dsc alpha=0.5 seed=1 · f1 0.6235": the run name, then its result


class Kind(StrEnum):
    """Which run: its `dicelab.role` tag."""

    TRIAL = names.ROLE_TRIAL
    PARENT = names.ROLE_PARENT
    ANALYSIS = names.ROLE_ANALYSIS


class State(StrEnum):
    """Where a run is. The values of the trial loop's outcomes equal their `dicelab.outcome` tags."""

    PENDING = "pending"  # no run yet
    RUNNING = "running"
    COMPLETED = "completed"
    EARLY_STOPPED = "early_stopped"
    SCHEDULER_STOPPED = "scheduler_stopped"
    NON_FINITE = "non_finite"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class Event(StrEnum):
    START = "start"
    COMPLETE = "complete"
    STOP_EARLY = "stop_early"
    SCHEDULER_STOP = "scheduler_stop"
    NON_FINITE = "non_finite"
    FAIL = "fail"
    INTERRUPT = "interrupt"
    RESUME = "resume"  # continue from a checkpoint (its step is recorded)
    RESTART = "restart"  # run again from the start, in the same run


_TERMINAL = {
    Event.COMPLETE: State.COMPLETED,
    Event.STOP_EARLY: State.EARLY_STOPPED,
    Event.SCHEDULER_STOP: State.SCHEDULER_STOPPED,
    Event.NON_FINITE: State.NON_FINITE,
    Event.FAIL: State.FAILED,
    Event.INTERRUPT: State.INTERRUPTED,
}
_REOPEN = {Event.RESUME: State.RUNNING, Event.RESTART: State.RUNNING}

TRANSITIONS: dict[State, dict[Event, State]] = {
    State.PENDING: {Event.START: State.RUNNING, Event.FAIL: State.FAILED},
    State.RUNNING: {**_TERMINAL, **_REOPEN},  # reopened: a retry of a crashed attempt that left it running
    State.FAILED: {Event.FAIL: State.FAILED, **_REOPEN},
    State.INTERRUPTED: {Event.FAIL: State.FAILED, **_REOPEN},
    State.COMPLETED: {},
    State.EARLY_STOPPED: {Event.RESUME: State.RUNNING},
    State.SCHEDULER_STOPPED: {},
    State.NON_FINITE: {},
}
# --resume reopens the sweep's newest parent run, however it ended
_ENDED_SWEEP = {Event.RESUME: State.RUNNING}
PARENT_TRANSITIONS: dict[State, dict[Event, State]] = {
    State.PENDING: {Event.START: State.RUNNING},
    State.RUNNING: {
        Event.COMPLETE: State.COMPLETED,
        Event.FAIL: State.FAILED,
        Event.INTERRUPT: State.INTERRUPTED,
        **_ENDED_SWEEP,  # a driver killed outright left it running
    },
    State.COMPLETED: _ENDED_SWEEP,
    State.FAILED: _ENDED_SWEEP,
    State.INTERRUPTED: _ENDED_SWEEP,
}
ANALYSIS_TRANSITIONS: dict[State, dict[Event, State]] = {
    State.PENDING: {Event.START: State.RUNNING},
    State.RUNNING: {Event.COMPLETE: State.COMPLETED},
    State.COMPLETED: {},
}
KIND_TRANSITIONS = {
    Kind.TRIAL: TRANSITIONS,
    Kind.PARENT: PARENT_TRANSITIONS,
    Kind.ANALYSIS: ANALYSIS_TRANSITIONS,
}
FINAL_STATES = frozenset((State.COMPLETED, State.EARLY_STOPPED, State.SCHEDULER_STOPPED, State.NON_FINITE))


@dataclass(frozen=True)
class Record:
    """What a state is on its MLflow run."""

    outcome: str | None  # the dicelab.outcome tag (the analysis reads it); None: no tag
    status: str | None  # the MLflow run status; None: no run
    suffix: str  # after the metric in the run's name ("" for none), or the whole result when it has no metric


# MLflow's RunStatus names (a test checks them against mlflow.entities.RunStatus): the only place dicelab
# spells them.
RUNNING, SCHEDULED, FINISHED, FAILED, KILLED = "RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED"
RECORDS: dict[State, Record] = {
    State.PENDING: Record(None, None, ""),
    State.RUNNING: Record(None, RUNNING, "running"),
    State.COMPLETED: Record(names.COMPLETED, FINISHED, ""),
    State.EARLY_STOPPED: Record(names.EARLY_STOPPED, FINISHED, "early stopped"),
    # Counted with early-stopped trials by the analysis (a budget cut, not a failure); TRIAL_STATE says which.
    State.SCHEDULER_STOPPED: Record(names.EARLY_STOPPED, FINISHED, "stopped by scheduler"),
    State.NON_FINITE: Record(names.NON_FINITE, FAILED, "non finite"),
    State.FAILED: Record(names.FAILED, FAILED, "failed"),
    State.INTERRUPTED: Record(None, KILLED, "interrupted"),
}
# The trial loop's outcomes (TrialResult.outcome) and the event that records each.
ENDING_EVENT: dict[State, Event] = {state: event for event, state in _TERMINAL.items()}
# The outcome tags, each with the status of its runs (a sweep's view counts these runs as finished).
STATUS_OF_OUTCOME = {record.outcome: record.status for record in RECORDS.values() if record.outcome}
# A run's state from its MLflow status alone (a run without dicelab's tags: a parent or analysis run, a
# trial's run from before the tags, a foreign run). A run MLflow has only scheduled counts as running.
STATE_OF_STATUS = {
    RUNNING: State.RUNNING,
    SCHEDULED: State.RUNNING,
    FINISHED: State.COMPLETED,
    FAILED: State.FAILED,
    KILLED: State.INTERRUPTED,
}


class LifecycleError(RuntimeError):
    """An event a run's state does not take: a bug in whoever sent it."""


def transition(state: State, event: Event, kind: Kind = Kind.TRIAL) -> State:
    """The state `event` moves a `kind` run in `state` to (see the module's tables)."""
    try:
        return KIND_TRANSITIONS[kind][state][event]
    except KeyError:
        refused = f"{kind.value} run: event {event.value!r} is not allowed in state {state.value!r}"
        raise LifecycleError(refused) from None


def allows(state: State, event: Event, kind: Kind = Kind.TRIAL) -> bool:
    return event in KIND_TRANSITIONS[kind].get(state, {})


def outcome_of_status(status: str) -> str:
    """The outcome a run without a `dicelab.outcome` tag counts as, from its MLflow status ("interrupted"
    for KILLED: one word for it everywhere); an unknown status in lower case."""
    state = STATE_OF_STATUS.get(status)
    if state is None:
        return status.lower()
    return RECORDS[state].outcome or state.value


def is_final(state: State) -> bool:
    """A trial in a final state never runs again (a resumed sweep reports its stored result)."""
    return state in FINAL_STATES


def state_of(run: Run | None) -> State:
    """The lifecycle state of a trial's run as stored (runs from before TRIAL_STATE by outcome and status)."""
    if run is None:
        return State.PENDING
    status, tags = run.info.status, run.data.tags
    if status == RECORDS[State.RUNNING].status:
        return State.RUNNING
    if TRIAL_STATE in tags:
        return State(tags[TRIAL_STATE])
    if status == KILLED:
        return State.INTERRUPTED
    outcome = tags.get(names.OUTCOME)
    if outcome is not None:
        return State(outcome)
    return State.FAILED if status == FAILED else State.COMPLETED


def outcome_of(run: Run) -> str:
    """The run's outcome as the sweep counts it: its dicelab.outcome tag, else its state ("interrupted",
    "running")."""
    state = state_of(run)
    return RECORDS[state].outcome or state.value


def _clip(text: str) -> str:
    from dicelab.tracking.mlflow_adapter import MAX_TAG_VALUE_LENGTH

    return text if len(text) <= MAX_TAG_VALUE_LENGTH else text[: MAX_TAG_VALUE_LENGTH - 3] + "..."


class LifecycleRun:
    """A run dicelab writes, of `kind`, and its lifecycle state; `send` moves it and writes what the new state
    records. A trial's run records its state in tags too; a parent or analysis run in its status alone."""

    kind = Kind.TRIAL

    def __init__(self, client: MlflowClient, run_id: str, state: State = State.RUNNING):
        self.client, self.run_id, self.state = client, run_id, state

    @classmethod
    def of(cls, client: MlflowClient, run: Run) -> LifecycleRun:
        state = state_of(run) if cls.kind == Kind.TRIAL else STATE_OF_STATUS[run.info.status]
        return cls(client, run.info.run_id, state)

    def send(
        self,
        event: Event,
        *,
        reason: str | None = None,
        tags: dict[str, str] | None = None,
        run: Run | None = None,
        restored_from_step: int | None = None,
    ) -> State:
        """Apply `event`. On a trial's run, a terminal event writes the outcome, TRIAL_STATE, `reason` and the
        caller's `tags` in one batch, then the status; RESUME / RESTART remove the last attempt's record
        (`run`: the run as read, to know which tags it holds), record the step resumed from, and set the
        status to running. On a parent or analysis run, only the status changes (START is `start_run`)."""
        new = transition(self.state, event, self.kind)
        if self.kind != Kind.TRIAL:
            if event in _TERMINAL:
                self.client.set_terminated(self.run_id, status=RECORDS[new].status)
            elif event in _REOPEN:
                self.client.update_run(self.run_id, status=RUNNING)
        elif event in _TERMINAL:
            self._end(new, reason, tags or {})
        elif event in _REOPEN:
            self._reopen(run or self.client.get_run(self.run_id), restored_from_step, tags or {})
        self.state = new
        return new

    def _end(self, state: State, reason: str | None, extra: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        record = RECORDS[state]
        tags = {**extra, TRIAL_STATE: state.value}
        if record.outcome is not None:
            tags[names.OUTCOME] = record.outcome
        if reason:
            tags[names.REASON] = reason
        batch = [RunTag(key, _clip(str(value))) for key, value in tags.items()]
        self.client.log_batch(self.run_id, tags=batch)
        self.client.set_terminated(self.run_id, status=record.status)

    def _reopen(self, run: Run, restored_from_step: int | None, extra: dict[str, str]) -> None:
        from mlflow.entities import RunTag

        # an earlier attempt's record; this one records its own (a restart has no restored step)
        for stale in (names.OUTCOME, names.REASON, TRIAL_STATE, RESTORED_FROM_STEP):
            if stale in run.data.tags:
                self.client.delete_tag(self.run_id, stale)
        tags = dict(extra)
        if restored_from_step is not None:
            tags[RESTORED_FROM_STEP] = str(restored_from_step)
        if tags:
            self.client.log_batch(self.run_id, tags=[RunTag(key, value) for key, value in tags.items()])
        if run.info.status != RUNNING:
            self.client.update_run(self.run_id, status=RUNNING)


class TrialRun(LifecycleRun):
    kind = Kind.TRIAL


class ParentRun(LifecycleRun):
    kind = Kind.PARENT


class AnalysisRun(LifecycleRun):
    kind = Kind.ANALYSIS


_RUN_CLASSES: dict[Kind, type[LifecycleRun]] = {
    Kind.TRIAL: TrialRun,
    Kind.PARENT: ParentRun,
    Kind.ANALYSIS: AnalysisRun,
}


def start_run(
    client: MlflowClient,
    experiment_id: str,
    kind: Kind,
    *,
    run_name: str | None,
    tags: dict[str, str] | None = None,
) -> LifecycleRun:
    """The START event: a new RUNNING run of `kind`, its `dicelab.role` tag set (no name: MLflow picks)."""
    state = transition(State.PENDING, Event.START, kind)
    run = client.create_run(experiment_id, run_name=run_name, tags={**(tags or {}), names.ROLE: kind.value})
    return _RUN_CLASSES[kind](client, run.info.run_id, state)


def reopening_event(restored_from_step: int | None) -> Event:
    return Event.RESUME if restored_from_step else Event.RESTART


def result_label(run: Run, metric: str) -> str:
    """E.g. "f1 0.6235", "f1 0.6235 early stopped degenerate", "failed", "interrupted": what a trial's run
    name says after RESULT_SEPARATOR (MLflow's runs table shows names, no metric until one is chosen)."""
    state, key = state_of(run), names.best_metric(metric)
    record = RECORDS[state]
    if record.status == FINISHED and key in run.data.metrics:
        parts = [f"{metric} {run.data.metrics[key]:.4f}", record.suffix]
        parts += ["degenerate"] if names.DEGENERATE in run.data.tags else []
        return " ".join(part for part in parts if part)
    return record.suffix or state.value.replace("_", " ")


def base_name(run: Run) -> str:
    """The run's name without the result `label` gave it: "dsc alpha=0.5 seed=1" ("" for no name)."""
    return (run.info.run_name or "").split(RESULT_SEPARATOR)[0]


def label(client: MlflowClient, run: Run, metric: str) -> None:
    """Give the run's name its result (idempotent: an earlier label is replaced)."""
    from dicelab.tracking.mlflow_adapter import RUN_NAME_TAG

    base = base_name(run) or "trial"
    name = f"{base}{RESULT_SEPARATOR}{result_label(run, metric)}"
    if name != run.info.run_name:
        client.set_tag(run.info.run_id, RUN_NAME_TAG, name)
