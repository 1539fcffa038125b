"""Seed racing: spend seeds only on the configurations still in contention.

Every configuration starts on `min_seeds` seeds (the same seeds for all, so results pair by seed). Whenever
results arrive, each configuration is compared with the current leader (best mean) on their common seeds
(dicelab.stats, Holm-corrected across the configurations compared at that look); one decided worse is dropped.
A configuration still undecided gets its next seed, up to `max_seeds`. The race ends when one configuration
is left (separated from all others), when every remaining one is equivalent to the leader within `margin`
(two one-sided tests), or when the budget is spent (every remaining configuration at max_seeds, or
`budget` trials launched), or when its time is (`time_budget_s`: no seed past `min_seeds` is handed out that
would not end within it, judged by the median duration of the race's trials so far; the running ones end
as usual; every configuration's first `min_seeds` run whatever the time, the least a comparison needs).

The race and the analysis's Decision decide with one test and one correction: the paired test of
`settings.test` and Holm's over the configurations compared with the leader at that look (`family` in each
elimination). The Decision of a raced sweep keeps each drop as the race made it
(`dicelab.analysis.comparisons`).

`Race` is the bookkeeping alone (no Ray): the Tune searcher in `race_searcher.py` drives it, the benchmark and
the tests drive it with synthetic score streams. Its state is plain data (`state()` / `from_state`), so a
resumed sweep continues the same race.

Its cost stays linear in the sweep's length: each comparison (and equivalence test) is kept with the two
configurations' results it was made on, so a result costs one new test (all of them only when the leader
changed or got a result), each configuration's mean is kept until its results change, and the
configurations that may start a seed wait in a heap (`next_trial` does not scan them). Holm's correction still
runs over every compared configuration at each look (vectorised, a few microseconds).
"""

from __future__ import annotations

import heapq
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FINISHED = "FINISHED"  # next_trial(): the race is decided, launch nothing more
ALIVE, DROPPED = "alive", "dropped"
SEPARATED, EQUIVALENT, BUDGET, TIME = "separated", "equivalent", "budget", "time"


@dataclass
class RaceSettings:
    min_seeds: int
    max_seeds: int
    confidence: float = 0.95
    test: str = "t"
    margin: float | None = None  # equivalence margin, in the metric's logged unit (F1 0.005 = half a point)
    budget: int | None = None  # at most this many trials in all
    first_seed: int = 1
    higher_is_better: bool = True
    time_budget_s: float | None = None  # seconds from the sweep's start: no seed starts that would end later

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    @property
    def seeds(self) -> list[int]:
        return [self.first_seed + index for index in range(self.max_seeds)]


@dataclass
class Race:
    settings: RaceSettings
    labels: list[str]  # one per configuration, for people ("tversky alpha=0.3 beta=0.7")
    results: list[dict[int, float]] = field(
        default_factory=list
    )  # per configuration: seed -> value (NaN: failed)
    launched: list[list[int]] = field(default_factory=list)  # per configuration: seeds started, in order
    status: list[str] = field(default_factory=list)
    trials: dict[str, tuple[int, int]] = field(default_factory=dict)  # trial id -> (configuration, seed)
    pending: list[str] = field(default_factory=list)  # trial ids started and not yet recorded
    events: list[dict[str, Any]] = field(default_factory=list)  # eliminations, in order
    decision: dict[str, Any] | None = None
    durations: list[float] = field(default_factory=list)  # seconds each recorded trial took, in order
    elapsed_s: float = 0.0  # seconds the race ran before this process took it over (a resumed sweep)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)
    started_at: float | None = field(default=None, repr=False, compare=False)  # clock() at its start

    def __post_init__(self) -> None:
        self._started_at = self.clock() if self.started_at is None else self.started_at
        # the time it had run at its last hand-out or result: what its state records, so that the state is
        # a function of what happened (not of when it is read)
        self._elapsed_at_event = self.elapsed_s
        self._trial_started: dict[str, float] = {}  # trial id -> clock() at its hand-out (this process)
        count = len(self.labels)
        self.results = self.results or [{} for _ in range(count)]
        self.launched = self.launched or [[] for _ in range(count)]
        self.status = self.status or [ALIVE] * count
        # Caches, rebuilt from the plain data above (not part of the state): means by configuration, the
        # last test of each configuration with the leader and the two result snapshots it was made on, and the
        # (seeds launched, configuration) of the configurations that may want a seed (stale entries skipped).
        self._means: dict[int, float] = {}
        self._tests: dict[tuple[str, int], tuple[int, tuple, tuple, Any]] = {}
        self._queue: list[tuple[int, int]] = [(len(self.launched[i]), i) for i in range(count)]
        heapq.heapify(self._queue)
        # What can decide at a look, kept between results (`_sync` builds it): the leader, each ready
        # rival's p against it, the finite ones in a heap (stale entries skipped), the rivals without a
        # usable seed.
        self._synced = False
        self._leader: int | None = None
        self._alive_count = 0
        self._rival_p: dict[int, float] = {}
        self._finite = 0  # finite p-values in _rival_p
        self._p_heap: list[tuple[float, int]] = []
        self._failing: set[int] = set()

    # -- scheduling ------------------------------------------------------------------------------------

    @property
    def max_trials(self) -> int:
        most = len(self.labels) * self.settings.max_seeds
        return min(most, self.settings.budget) if self.settings.budget else most

    def alive(self) -> list[int]:
        return [index for index, status in enumerate(self.status) if status == ALIVE]

    def next_trial(self, trial_id: str) -> tuple[int, int] | str | None:
        """(configuration, seed) to start as `trial_id`; None: wait for results; FINISHED: decided."""
        if self.decision is not None:
            return FINISHED
        self._elapsed_at_event = self.elapsed()
        index = self._next_wanting()
        if index is not None and self._out_of_time(index):
            if self.pending:
                return None  # their results may still decide the race; then it ends, out of time
            self._decide(TIME)
            return FINISHED
        if index is not None:
            # The configuration with fewest seeds first: pairs complete early and the race stays balanced.
            heapq.heappop(self._queue)
            seed = self.settings.seeds[len(self.launched[index])]
            self.launched[index].append(seed)
            self.trials[trial_id] = (index, seed)
            self.pending.append(trial_id)
            self._trial_started[trial_id] = self.clock()
            self._enqueue(index)  # still wanting while under min_seeds
            return index, seed
        if self.pending:
            return None
        self._decide(BUDGET)
        return FINISHED

    def _wants(self, index: int, busy: set[int]) -> bool:
        """May start its next seed now (each configuration waits for its own results past min_seeds)."""
        launched = len(self.launched[index])
        return (
            self.status[index] == ALIVE
            and launched < self.settings.max_seeds
            and (launched < self.settings.min_seeds or index not in busy)
        )

    def _busy(self) -> set[int]:
        return {self.trials[pending][0] for pending in self.pending}  # pending: at most the concurrency

    def _enqueue(self, index: int) -> None:
        if self._wants(index, self._busy()):
            heapq.heappush(self._queue, (len(self.launched[index]), index))

    def _next_wanting(self) -> int | None:
        """The wanting configuration with the fewest seeds launched (then the lowest index), left at the head
        of the queue; None when none may start now. Entries made stale by a launch, a drop or a busy
        configuration are discarded: a configuration re-enters when its result comes (`record`)."""
        if len(self.trials) >= self.max_trials:
            return None
        busy = self._busy()
        while self._queue:
            launched, index = self._queue[0]
            if launched == len(self.launched[index]) and self._wants(index, busy):
                return index
            heapq.heappop(self._queue)
        return None

    def _wanting(self) -> list[int]:
        """Alive configurations that may start their next seed now (a scan: for checks, not the hot path)."""
        if len(self.trials) >= self.max_trials:
            return []
        busy = self._busy()
        return [index for index in range(len(self.labels)) if self._wants(index, busy)]

    def record(self, trial_id: str, value: float | None) -> list[dict[str, Any]]:
        """A trial's result (its best dev metric; None / NaN when it failed or was degenerate). Returns the
        new eliminations."""
        if trial_id not in self.trials or trial_id not in self.pending:
            return []  # not a trial of this race, or recorded already (a resumed sweep reports it again)
        self.pending.remove(trial_id)
        self._elapsed_at_event = self.elapsed()
        started = self._trial_started.pop(trial_id, None)
        if started is not None:
            self.durations.append(self.clock() - started)
        index, seed = self.trials[trial_id]
        number = math.nan if value is None else float(value)
        self.results[index][seed] = number if math.isfinite(number) else math.nan
        self._means.pop(index, None)
        self._enqueue(index)  # no longer busy: it may want its next seed
        if self.decision is not None:
            return []
        self._recorded(index)
        dropped = self._eliminate()
        self._maybe_end()
        if self.decision is None and not self.pending:
            # the last result: Tune may not ask for another trial to hear "finished"
            index = self._next_wanting()
            if index is None:
                self._decide(BUDGET)
            elif self._out_of_time(index):
                self._decide(TIME)
        return dropped

    # -- time ------------------------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds the race has run (in this process and, resumed, before it)."""
        return self.elapsed_s + self.clock() - self._started_at

    def expected_duration(self) -> float:
        """What a trial is expected to take: the median of the race's recorded trials (0 before any)."""
        return statistics.median(self.durations) if self.durations else 0.0

    def _out_of_time(self, index: int) -> bool:
        """Whether configuration `index`'s next seed is one more than its min_seeds (the least any
        comparison needs, run whatever the time) and is not expected to end within the time budget."""
        budget = self.settings.time_budget_s
        if budget is None or len(self.launched[index]) < self.settings.min_seeds:
            return False
        return self.elapsed() + self.expected_duration() > budget

    # -- decisions -------------------------------------------------------------------------------------

    def finished_seeds(self, index: int) -> int:
        return sum(1 for value in self.results[index].values() if math.isfinite(value))

    def mean(self, index: int) -> float:
        cached = self._means.get(index)
        if cached is None:
            values = [value for value in self.results[index].values() if math.isfinite(value)]
            cached = self._means[index] = float(np.mean(values)) if values else math.nan
        return cached

    def _cached(self, kind: str, index: int, leader: int, test: Any) -> Any:
        """test() of configuration `index` against `leader`, made again only when either's results changed."""
        mine, theirs = tuple(self.results[index].items()), tuple(self.results[leader].items())
        kept = self._tests.get((kind, index))
        if kept is not None and kept[0] == leader and kept[1] == mine and kept[2] == theirs:
            return kept[3]
        outcome = test()
        self._tests[(kind, index)] = (leader, mine, theirs, outcome)
        return outcome

    def leader(self) -> int | None:
        """The alive configuration with the best mean among those with min_seeds results."""
        self._sync()
        return self._leader

    def _find_leader(self) -> int | None:
        ready = [i for i in self.alive() if self._ready(i) and math.isfinite(self.mean(i))]
        return max(ready, key=self._rank) if ready else None

    def _rank(self, index: int) -> tuple[float, int]:
        return (1.0 if self.settings.higher_is_better else -1.0) * self.mean(index), -index

    # -- what can decide, kept between results -----------------------------------------------------------
    # A result changes one configuration: its mean, whether it is ready, whether it has a usable seed, its
    # test against the leader. Only when it was the leader's, or it takes the lead, are all rivals tested
    # again (as the plain computation does at every result).

    def _sync(self) -> None:
        if self._synced:
            return
        self._synced = True
        self._alive_count = self.status.count(ALIVE)
        self._failing = {i for i in self.alive() if self._failed_out(i)}
        self._new_leader(self._find_leader())

    def _new_leader(self, leader: int | None) -> None:
        self._leader, self._rival_p, self._p_heap, self._finite = leader, {}, [], 0
        if leader is not None:
            for index in self.alive():
                self._rival(index)

    def _rival(self, index: int) -> None:
        """(Re)test a configuration against the leader if it is a ready rival."""
        leader = self._leader
        if leader is None or index == leader or self.status[index] != ALIVE or not self._ready(index):
            return
        p_value = self._compare(index, leader).p_value
        self._unrival(index)
        self._rival_p[index] = p_value
        if math.isfinite(p_value):
            self._finite += 1
            heapq.heappush(self._p_heap, (p_value, index))

    def _unrival(self, index: int) -> None:
        if math.isfinite(self._rival_p.pop(index, math.nan)):
            self._finite -= 1

    def _recorded(self, index: int) -> None:
        if not self._synced:
            self._sync()
            return
        if self.status[index] != ALIVE:
            return  # a dropped configuration's late result: no rival, never the leader
        if self._failed_out(index):
            self._failing.add(index)
        else:
            self._failing.discard(index)
        leader = self._leader
        if leader == index:
            self._new_leader(self._find_leader())  # its mean moved: the lead may have passed to another
        elif (
            self._ready(index)
            and math.isfinite(self.mean(index))
            and (leader is None or self._rank(index) > self._rank(leader))
        ):
            self._new_leader(index)
        else:
            self._rival(index)

    def _dropped(self, index: int) -> None:
        self.status[index] = DROPPED
        self._alive_count -= 1
        self._unrival(index)
        self._failing.discard(index)
        self._forget(index)

    def _failed_out(self, index: int) -> bool:
        """No usable seed at all (every seed failed or degenerate): it cannot win."""
        return self.finished_seeds(index) == 0 and len(self.results[index]) >= self.settings.min_seeds

    def _may_drop(self) -> bool:
        """Whether a look can drop anything: a rival without a usable seed, or Holm able to put a p below
        alpha (`could_separate`, on the smallest finite p and their count)."""
        if self._failing:
            return True
        while self._p_heap and self._rival_p.get(self._p_heap[0][1]) != self._p_heap[0][0]:
            heapq.heappop(self._p_heap)  # a rival retested, dropped, or of a former leader
        if not self._p_heap:
            return False
        return self._finite * self._p_heap[0][0] < self.settings.alpha  # as could_separate

    def _compare(self, index: int, leader: int) -> Any:
        from dicelab.stats import compare

        settings = self.settings
        return self._cached(
            "compare",
            index,
            leader,
            lambda: compare(
                self.results[index], self.results[leader], confidence=settings.confidence, test=settings.test
            ),
        )

    def _can_grow(self, index: int) -> bool:
        return len(self.launched[index]) < self.settings.max_seeds

    def _ready(self, index: int) -> bool:
        """Has min_seeds recorded results (failed ones included), or all it can have."""
        recorded = len(self.results[index])
        return recorded >= self.settings.min_seeds or (
            not self._can_grow(index) and recorded == len(self.launched[index])
        )

    def _eliminate(self) -> list[dict[str, Any]]:
        leader = self.leader()
        if leader is None or not self._may_drop():
            return []  # the look below would drop nothing: it runs only when it may
        # the statistics (scipy, statsmodels) where a race compares: a sweep that does not race goes without
        from dicelab.stats import WORSE, holm, verdict

        rivals = [i for i in self.alive() if i != leader and self._ready(i)]
        settings = self.settings
        comparisons = [self._compare(i, leader) for i in rivals]
        p_values = [comparison.p_value for comparison in comparisons]
        adjusted = holm(p_values) if could_separate(p_values, settings.alpha) else None
        dropped = []
        for rank, (index, comparison) in enumerate(zip(rivals, comparisons, strict=True)):
            failed_out = self._failed_out(index)
            if adjusted is None and not failed_out:
                continue  # no adjusted p below alpha: nothing is decided worse
            if adjusted is None:
                adjusted = holm(p_values)  # the dropped configuration's event carries its p(Holm)
            p_holm = adjusted[rank]
            worse = verdict(
                comparison, p_holm, alpha=settings.alpha, higher_is_better=settings.higher_is_better
            )
            if worse != WORSE and not failed_out:
                continue
            self._dropped(index)
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
                "family": sum(math.isfinite(p) for p in p_values),  # Holm's family at this look
                "test": comparison.test,
                "why": "no usable seed (failed or degenerate)"
                if failed_out
                else "decided worse than the leader",
            }
            self.events.append(event)
            dropped.append(event)
        return dropped

    def _forget(self, index: int) -> None:
        """A dropped configuration is tested no more."""
        self._tests.pop(("compare", index), None)
        self._tests.pop(("equivalent", index), None)

    def _maybe_end(self) -> None:
        self._sync()
        if self._alive_count == 1 and self._ready(self.alive()[0]):
            self._decide(SEPARATED)
            return
        margin = self.settings.margin
        leader = self._leader
        # every other alive configuration ready: each is then a rival with its p kept
        if margin and leader is not None and len(self._rival_p) == self._alive_count - 1:
            from dicelab.stats import equivalent

            others = [i for i in self.alive() if i != leader]
            if all(
                self._cached(
                    "equivalent",
                    i,
                    leader,
                    lambda i=i: equivalent(
                        self.results[i], self.results[leader], margin, alpha=self.settings.alpha
                    ),
                )[0]
                for i in others
            ):
                self._decide(EQUIVALENT)

    def _decide(self, reason: str) -> None:
        leader = self.leader()
        alive = self.alive()
        winner = self.labels[leader] if leader is not None else None
        trials = len(self.trials)
        if reason == SEPARATED:
            summary = f"{winner} is separated from all {len(self.labels) - 1} other configurations"
        elif reason == EQUIVALENT:
            summary = (
                f"{len(alive)} configurations remain, all within ±{self.settings.margin:g} of {winner} "
                "(equivalent)"
            )
        else:
            spent = (
                f"time budget spent ({self.elapsed():.0f} s of {self.settings.time_budget_s:g} s; a next "
                f"seed takes about {self.expected_duration():.0f} s)"
                if reason == TIME
                else "budget spent"
            )
            undecided = [self.labels[i] for i in alive if i != leader]
            if leader is None:  # every seed of every configuration still in the race failed or was degenerate
                summary = f"{spent}: no configuration has a usable seed (every one failed or was degenerate)"
            elif undecided:
                summary = f"{spent}: {winner} leads, not separated from {len(undecided)} other configurations"
            else:
                summary = f"{spent}: {winner} is the only configuration left"
        self.decision = {
            "reason": reason,
            "winner": winner,
            "alive": [self.labels[i] for i in alive],
            "dropped": [self.labels[i] for i, status in enumerate(self.status) if status == DROPPED],
            "trials": trials,
            "max_trials": len(self.labels) * self.settings.max_seeds,
            "summary": f"{summary}; {trials} trials of at most {len(self.labels) * self.settings.max_seeds}",
        }

    # -- persistence -----------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Plain data (JSON-able: seeds as strings)."""
        return {
            "settings": vars(self.settings),
            "labels": self.labels,
            "results": [{str(seed): value for seed, value in row.items()} for row in self.results],
            "launched": self.launched,
            "status": self.status,
            "trials": {trial: list(where) for trial, where in self.trials.items()},
            "pending": self.pending,
            "events": self.events,
            "decision": self.decision,
            "durations": self.durations,
            "elapsed_s": self._elapsed_at_event,
            "configurations": [
                {"label": label, "status": status, "seeds": len(self.results[i]), "mean": self.mean(i)}
                for i, (label, status) in enumerate(zip(self.labels, self.status, strict=True))
            ],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], clock: Callable[[], float] = time.monotonic) -> Race:
        return cls(
            clock=clock,
            settings=RaceSettings(**state["settings"]),
            labels=list(state["labels"]),
            results=[{int(seed): float(value) for seed, value in row.items()} for row in state["results"]],
            launched=[list(seeds) for seeds in state["launched"]],
            status=list(state["status"]),
            trials={trial: (int(where[0]), int(where[1])) for trial, where in state["trials"].items()},
            pending=list(state["pending"]),
            events=list(state["events"]),
            decision=state["decision"],
            durations=[float(seconds) for seconds in state.get("durations", [])],
            elapsed_s=float(state.get("elapsed_s", 0.0)),
        )


def could_separate(p_values: list[float], alpha: float) -> bool:
    """Whether Holm's correction of these p-values can put any below alpha. Its smallest adjusted p is
    min(1, m x the smallest p) over the m finite ones and the others are no smaller, so when that is at or
    above alpha no configuration is decided and the correction need not run (statsmodels' Holm ends in a
    full garbage collection: the race would pay it at every result)."""
    finite = [value for value in p_values if math.isfinite(value)]
    return bool(finite) and len(finite) * min(finite) < alpha
