"""The lifecycle of every run dicelab writes (trial, sweep parent, analysis): every (kind, state, event)
triple against the specification below, runs created through START, the one status vocabulary, and what
each state writes on a real SQLite MLflow store (outcome tag, status, trial state, run-name suffix). No
Ray."""

from __future__ import annotations

import itertools

import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric

from dicelab.tracking import conventions as names
from dicelab.tracking import lifecycle
from dicelab.tracking.lifecycle import (
    RESTORED_FROM_STEP,
    TRIAL_STATE,
    AnalysisRun,
    Event,
    Kind,
    LifecycleError,
    ParentRun,
    State,
    TrialRun,
    state_of,
    transition,
)
from dicelab.tracking.store import check_tracking, ensure_experiment

S, E = State, Event
# The specification, written out pair by pair (the module builds its table from smaller pieces).
ENDINGS = {
    E.COMPLETE: S.COMPLETED,
    E.STOP_EARLY: S.EARLY_STOPPED,
    E.SCHEDULER_STOP: S.SCHEDULER_STOPPED,
    E.NON_FINITE: S.NON_FINITE,
    E.FAIL: S.FAILED,
    E.INTERRUPT: S.INTERRUPTED,
}
ALLOWED = {
    (S.PENDING, E.START): S.RUNNING,
    (S.PENDING, E.FAIL): S.FAILED,
    **{(S.RUNNING, event): state for event, state in ENDINGS.items()},
    (S.RUNNING, E.RESUME): S.RUNNING,
    (S.RUNNING, E.RESTART): S.RUNNING,
    (S.FAILED, E.FAIL): S.FAILED,
    (S.FAILED, E.RESUME): S.RUNNING,
    (S.FAILED, E.RESTART): S.RUNNING,
    (S.INTERRUPTED, E.FAIL): S.FAILED,
    (S.INTERRUPTED, E.RESUME): S.RUNNING,
    (S.INTERRUPTED, E.RESTART): S.RUNNING,
    (S.EARLY_STOPPED, E.RESUME): S.RUNNING,  # continued by whoever paused it, never by a resumed sweep
}
PARENT_ALLOWED = {
    (S.PENDING, E.START): S.RUNNING,
    (S.RUNNING, E.COMPLETE): S.COMPLETED,
    (S.RUNNING, E.FAIL): S.FAILED,
    (S.RUNNING, E.INTERRUPT): S.INTERRUPTED,
    **{(state, E.RESUME): S.RUNNING for state in (S.RUNNING, S.COMPLETED, S.FAILED, S.INTERRUPTED)},
}
ANALYSIS_ALLOWED = {(S.PENDING, E.START): S.RUNNING, (S.RUNNING, E.COMPLETE): S.COMPLETED}
SPECIFICATION = {Kind.TRIAL: ALLOWED, Kind.PARENT: PARENT_ALLOWED, Kind.ANALYSIS: ANALYSIS_ALLOWED}
# (outcome tag, MLflow status) of each state a run can be in
RECORDED = {
    S.RUNNING: (None, "RUNNING"),
    S.COMPLETED: ("completed", "FINISHED"),
    S.EARLY_STOPPED: ("early_stopped", "FINISHED"),
    S.SCHEDULER_STOPPED: ("early_stopped", "FINISHED"),  # never through FAILED
    S.NON_FINITE: ("non_finite", "FAILED"),
    S.FAILED: ("failed", "FAILED"),
    S.INTERRUPTED: (None, "KILLED"),
}


@pytest.mark.parametrize(("kind", "state", "event"), list(itertools.product(Kind, State, Event)))
def test_every_kind_state_and_event_follows_the_specification(kind, state, event):
    allowed = SPECIFICATION[kind]
    if (state, event) in allowed:
        assert transition(state, event, kind) == allowed[state, event]
        assert lifecycle.allows(state, event, kind)
    else:
        assert not lifecycle.allows(state, event, kind)
        refused = f"{kind.value} run: event '{event.value}' .* state '{state.value}'"
        with pytest.raises(LifecycleError, match=refused):
            transition(state, event, kind)


def test_the_final_states_are_the_ended_ones_a_retry_or_a_resumed_sweep_never_reopens():
    final = {S.COMPLETED, S.EARLY_STOPPED, S.SCHEDULER_STOPPED, S.NON_FINITE}
    assert {state for state in State if lifecycle.is_final(state)} == final
    for state in final:
        assert not any((state, event) in ALLOWED for event in (E.RESTART, E.FAIL, *ENDINGS))


def test_every_outcome_of_the_trial_loop_has_its_ending_event():
    assert {state: event for event, state in ENDINGS.items()} == lifecycle.ENDING_EVENT


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> MlflowClient:
    """One store for the module (a new SQLite store's schema takes seconds); each test makes its own runs."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('lifecycle') / 'mlflow.db'}"
    check_tracking(uri)
    return MlflowClient(uri)


@pytest.fixture
def new_run(client):
    experiment = ensure_experiment(client, "lifecycle")

    def make(name: str = "ce seed=1") -> TrialRun:
        trial_run = lifecycle.start_run(client, experiment, Kind.TRIAL, run_name=name)
        assert isinstance(trial_run, TrialRun)
        return trial_run

    return make


@pytest.mark.parametrize("event", list(ENDINGS))
def test_each_ending_writes_its_outcome_status_and_state_and_reads_back(client, new_run, event):
    trial_run = new_run()
    trial_run.send(event, reason="why, in one line", tags={names.DEGENERATE: "predicts no positive"})
    run = client.get_run(trial_run.run_id)
    outcome, status = RECORDED[ENDINGS[event]]
    assert run.info.status == status
    assert run.data.tags.get(names.OUTCOME) == outcome
    assert run.data.tags[TRIAL_STATE] == ENDINGS[event].value
    assert run.data.tags[names.REASON] == "why, in one line"
    assert run.data.tags[names.DEGENERATE] == "predicts no positive"
    assert state_of(run) == ENDINGS[event] == trial_run.state


def test_a_refused_event_writes_nothing(client, new_run):
    trial_run = new_run()
    trial_run.send(Event.COMPLETE)
    with pytest.raises(LifecycleError, match="'resume' is not allowed in state 'completed'"):
        trial_run.send(Event.RESUME)
    run = client.get_run(trial_run.run_id)
    assert (run.info.status, run.data.tags[names.OUTCOME]) == ("FINISHED", "completed")


@pytest.mark.parametrize("ended", [Event.FAIL, Event.INTERRUPT])
@pytest.mark.parametrize("step", [None, 12])
def test_reopening_clears_the_last_attempt_and_records_the_step_resumed_from(client, new_run, ended, step):
    trial_run = new_run()
    trial_run.send(ended, reason="the worker died")
    if step is None:  # a stale step of an older attempt is removed by a restart
        client.set_tag(trial_run.run_id, RESTORED_FROM_STEP, "4")
    run = client.get_run(trial_run.run_id)
    reopened = TrialRun.of(client, run)
    assert reopened.send(lifecycle.reopening_event(step), run=run, restored_from_step=step) == State.RUNNING
    run = client.get_run(trial_run.run_id)
    assert run.info.status == "RUNNING" and state_of(run) == State.RUNNING
    for stale in (names.OUTCOME, names.REASON, TRIAL_STATE):
        assert stale not in run.data.tags
    assert run.data.tags.get(RESTORED_FROM_STEP) == (str(step) if step else None)
    reopened.send(Event.COMPLETE)
    assert state_of(client.get_run(trial_run.run_id)) == State.COMPLETED


def test_runs_recorded_before_the_state_tag_read_by_outcome_and_status(client, new_run):
    cases = {"completed": S.COMPLETED, "early_stopped": S.EARLY_STOPPED, "non_finite": S.NON_FINITE}
    for outcome, state in cases.items():
        run_id = new_run().run_id
        client.set_tag(run_id, names.OUTCOME, outcome)
        client.set_terminated(run_id, status=RECORDED[state][1])
        assert state_of(client.get_run(run_id)) == state
    killed = new_run().run_id
    client.set_terminated(killed, status="KILLED")
    assert state_of(client.get_run(killed)) == S.INTERRUPTED
    assert lifecycle.outcome_of(client.get_run(killed)) == "interrupted"
    assert state_of(None) == S.PENDING


@pytest.mark.parametrize(
    ("event", "degenerate", "suffix"),
    [
        (Event.COMPLETE, False, "f1 0.6235"),
        (Event.COMPLETE, True, "f1 0.6235 degenerate"),
        (Event.STOP_EARLY, False, "f1 0.6235 early stopped"),
        (Event.SCHEDULER_STOP, False, "f1 0.6235 stopped by scheduler"),
        (Event.NON_FINITE, False, "non finite"),
        (Event.FAIL, False, "failed"),
        (Event.INTERRUPT, False, "interrupted"),
    ],
)
def test_the_run_name_says_the_result_once(client, new_run, event, degenerate, suffix):
    trial_run = new_run("ce seed=1")
    client.log_batch(trial_run.run_id, metrics=[Metric(names.best_metric("f1"), 0.62351, 0, 0)])
    trial_run.send(event, tags={names.DEGENERATE: "one class"} if degenerate else None)
    for _ in range(2):  # labelling again (a resumed sweep's end) keeps one suffix
        lifecycle.label(client, client.get_run(trial_run.run_id), "f1")
    assert client.get_run(trial_run.run_id).info.run_name == f"ce seed=1 · {suffix}"


@pytest.mark.parametrize("kind", list(Kind))
def test_start_creates_a_running_run_with_its_role(client, kind):
    experiment = ensure_experiment(client, "lifecycle")
    started = lifecycle.start_run(client, experiment, kind, run_name="x", tags={names.SWEEP_ID: "s1"})
    assert started.state == State.RUNNING and started.kind == kind
    run = client.get_run(started.run_id)
    assert run.info.status == "RUNNING" and run.info.run_name == "x"
    assert (run.data.tags[names.ROLE], run.data.tags[names.SWEEP_ID]) == (kind.value, "s1")


@pytest.mark.parametrize(
    ("ending", "status", "outcome"),
    [
        (E.COMPLETE, "FINISHED", "completed"),
        (E.FAIL, "FAILED", "failed"),
        (E.INTERRUPT, "KILLED", "interrupted"),
    ],
)
def test_a_parent_run_ends_and_resumes_through_its_status_alone(client, ending, status, outcome):
    experiment = ensure_experiment(client, "lifecycle")
    parent = lifecycle.start_run(client, experiment, Kind.PARENT, run_name="sweep")
    assert isinstance(parent, ParentRun)
    parent.send(ending)
    run = client.get_run(parent.run_id)
    assert run.info.status == status and lifecycle.outcome_of_status(status) == outcome
    assert not {names.OUTCOME, TRIAL_STATE} & set(run.data.tags)  # trial tags only on trials
    reread = ParentRun.of(client, run)
    assert reread.state == ENDINGS[ending]
    reread.send(Event.RESUME)
    assert client.get_run(parent.run_id).info.status == "RUNNING"
    with pytest.raises(LifecycleError, match="parent run: event 'stop_early'"):
        reread.send(Event.STOP_EARLY)


def test_an_analysis_run_starts_then_completes_once(client):
    experiment = ensure_experiment(client, "lifecycle")
    analysis = lifecycle.start_run(client, experiment, Kind.ANALYSIS, run_name="analysis")
    assert isinstance(analysis, AnalysisRun)
    analysis.send(Event.COMPLETE)
    assert client.get_run(analysis.run_id).info.status == "FINISHED"
    with pytest.raises(
        LifecycleError, match="analysis run: event 'complete' is not allowed in state 'completed'"
    ):
        analysis.send(Event.COMPLETE)


def test_one_status_vocabulary_reads_every_status_back():
    """A run without an outcome tag: KILLED is "interrupted" (not "killed"), as trials, the sweep's counts
    and the analysis say it."""
    from mlflow.entities import RunStatus

    assert {lifecycle.outcome_of_status(RunStatus.to_string(s)) for s in RunStatus.all_status()} == {
        "running",
        "completed",
        "failed",
        "interrupted",
    }
    assert (
        lifecycle.outcome_of_status("KILLED")
        == State.INTERRUPTED.value
        == lifecycle.RECORDS[State.INTERRUPTED].suffix
    )
    assert lifecycle.outcome_of_status("SOMETHING_NEW") == "something_new"
    assert lifecycle.STATUS_OF_OUTCOME == {
        "completed": "FINISHED",
        "early_stopped": "FINISHED",
        "non_finite": "FAILED",
        "failed": "FAILED",
    }


def test_the_status_names_are_mlflows():
    from mlflow.entities import RunStatus

    statuses = {record.status for record in lifecycle.RECORDS.values()} - {None}
    assert statuses == {
        RunStatus.to_string(s)
        for s in (RunStatus.RUNNING, RunStatus.FINISHED, RunStatus.FAILED, RunStatus.KILLED)
    }
    assert set(lifecycle.STATE_OF_STATUS) == {RunStatus.to_string(s) for s in RunStatus.all_status()}


def test_the_states_import_no_mlflow():
    # the trial loop imports the states; benchmarks/gpu_check.py carries the loop to machines without MLflow
    import subprocess
    import sys

    code = "import sys, dicelab.tracking.lifecycle, dicelab.training.loop; print('mlflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
