"""The sweep's own costs at scale: a sweep of N trials that train nothing, on local Ray, against the embedded
SQLite store and against the PostgreSQL team server, at several N (default 100 and 1,000).

    .venv/bin/python benchmarks/sweep_scale.py --trials 100 1000 [--backends sqlite server]
    .venv/bin/python benchmarks/sweep_scale.py --quick        # 4 trials against SQLite: a smoke run
    .venv/bin/python benchmarks/sweep_scale.py --race-only --trials 100 1000 4000   # the race alone, no Ray
    .venv/bin/python benchmarks/sweep_scale.py --trials 100 400 --backends sqlite --base HEAD~1   # A/B

With --base REF, every sweep runs twice in the same run, first on dicelab's package as of the git ref REF
(its platform/ exported with `git archive`, first on the sweep process's PYTHONPATH, which Ray's local
workers inherit), then on this checkout's; the rows say which ("variant"), and "ab" holds this checkout's
costs over the base's at each N (1.0 = the same; below 1: cheaper).

Each sweep is the real `dicelab sweep` driver (`dicelab.sweeps.driver.execute_sweep`, in its own process):
the config checks, the parent run, the shared inputs, Tune with its callbacks (TrialRecords, SweepView,
StateKeeper), a seed race over N/2 configurations (`loss.gamma`) x 2 seeds, and each trial's real path
(`tune_trial`: its MLflow child run found or created, params and tags, TrialReporter -> MlflowReporter +
TuneReporter, the run's lifecycle). Only the training is replaced: the trial's `run_trial` waits
--trial-seconds (the trial's own work, default 1 s), reports three evaluations of made-up metrics on the
way, and ends. What is measured, in the driver's process:
- driver CPU per trial: the process's CPU time from launch to the end of the sweep, over N;
- wall per trial beyond the trials' own work: (sweep wall - N x trial seconds / trials at once) / N;
- driver memory: the process's peak resident set (and its resident set in each progress snapshot);
- MLflow requests per trial: calls of the tracking store (SQLAlchemy store or REST store: one HTTP request
  each), the outermost only, counted in the driver and in every trial worker, by method; against a server
  also the HTTP requests sent (retries included);
- trial end -> result recorded: from the trial's last evaluation (its wall time, carried in its last Tune
  result) to the end of the driver's TrialRecords.on_trial_complete (the outcome read back from MLflow);
  p50 / p95 over the trials;
- searcher / racing: the RaceSearcher's suggest + on_trial_result + on_trial_complete + save, per trial;
- Tune experiment-state saves (TuneController.save_to_dir): how many, and their seconds;
- callbacks: TrialRecords and SweepView, seconds per trial.
While a sweep runs, its process writes these figures so far every PROGRESS_EVERY_S seconds to progress.json
beside its config (a list of snapshots, by trials recorded): how each cost grows along one sweep, and what a
sweep stopped before its end had measured.
The figures go to benchmarks/results/sweep_scale.json (--out), rewritten after each sweep.
The growth of each cost from one N to the next is printed as (cost_large / cost_small) / (N_large / N_small)
for totals (1.0 = linear) and cost_large / cost_small for per-trial costs (1.0 = constant per trial).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import itertools
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from dicelab.tracking import conventions as names
from dicelab.training.reporter import Evaluation, TrialResult

EVALUATIONS = 3
PROGRESS_EVERY_S = 30.0
END_KEY = "bench_end_s"  # the trial's last evaluation's wall time, in its Tune results
RESULTS = Path(__file__).resolve().parent / "results" / "sweep_scale.json"
COUNTER_MODULE = "_sweep_scale_requests"  # where a process keeps its request counter across trials
# Set in the sweep's process before Tune pickles the trial function (by value, with these globals):
TRIAL_SECONDS = 1.0  # each trial's own work
REQUESTS_DIR = ""  # where each trial worker writes its request counts, one file per process


class RequestCounter:
    """MLflow tracking-store calls in this process, by method: the outermost call only (a store method that
    calls another is one request), which against a tracking server is one HTTP request; and the HTTP
    requests themselves (`mlflow.utils.rest_utils.http_request`, retries included)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.http = 0
        self.local = threading.local()

    def install(self) -> None:
        import mlflow.utils.rest_utils as rest_utils
        from mlflow.store.tracking.rest_store import RestStore
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        for store in (RestStore, SqlAlchemyStore):
            for name in {name for klass in store.__mro__ for name in vars(klass) if not name.startswith("_")}:
                # the async-logging hooks are local calls, not requests
                if "async_logging" in name:
                    continue
                if isinstance(inspect.getattr_static(store, name), types.FunctionType):
                    setattr(store, name, self.counted(name, getattr(store, name)))
        http_request = rest_utils.http_request

        def counted_http(*args: Any, **kwargs: Any) -> Any:
            self.http += 1
            return http_request(*args, **kwargs)

        rest_utils.http_request = counted_http

    def counted(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(self.local, "depth", 0)
            if depth == 0:
                self.calls[name] += 1
            self.local.depth = depth + 1
            try:
                return method(*args, **kwargs)
            finally:
                self.local.depth = depth

        return call

    def counts(self) -> dict[str, Any]:
        return {"calls": dict(self.calls), "http": self.http}


def process_counter() -> RequestCounter:
    """This process's counter, installed on first use (a trial worker runs many trials)."""
    holder = sys.modules.get(COUNTER_MODULE)
    if holder is None:
        holder = types.ModuleType(COUNTER_MODULE)
        holder.counter = RequestCounter()  # type: ignore[attr-defined]
        holder.counter.install()  # type: ignore[attr-defined]
        sys.modules[COUNTER_MODULE] = holder
    return holder.counter  # type: ignore[attr-defined]


def null_run_trial(config: Any, reporter: Any, **_: Any) -> TrialResult:
    """In place of `run_trial` in the trial's worker: start, three evaluations, end; no model, no data."""
    metric = config.train.metric
    reporter.on_start(
        config,
        {"steps_total": EVALUATIONS, "metric": metric, "data_fingerprint": "null", "train_examples": 0},
    )
    # made-up scores, the same for every configuration up to a per-seed offset: the race stays undecided
    score = 0.6 + 0.01 * (int(config.train.seed) % 5)
    best: dict[str, float] = {}
    for step in range(1, EVALUATIONS + 1):
        time.sleep(TRIAL_SECONDS / EVALUATIONS)  # the trial's own work
        metrics = {metric: score + 0.01 * step, "precision": 0.5, "recall": 0.5}
        best = dict(metrics)
        train = {"train_loss": 1.0 / step, END_KEY: time.time()}
        evaluation = Evaluation(
            step=step, epoch=float(step), metrics=metrics, is_best=True, state=dict, train_metrics=train
        )
        reporter.on_evaluation(evaluation)
    result = TrialResult(
        "completed", metric, final_metrics=best, best_metrics=best, best_step=EVALUATIONS, steps=EVALUATIONS
    )
    reporter.on_end(result)
    return result


def null_tune_trial(tune_config: dict[str, Any], **bound: Any) -> None:
    """What Tune runs (pickled by value with this script): dicelab's trial function, its training replaced."""
    import dicelab.sweeps.trainable as trainable

    counter = process_counter()
    trainable.run_trial = null_run_trial
    try:
        trainable.tune_trial(tune_config, **bound)
    finally:  # this worker's counts so far, over its earlier trials' file
        (Path(REQUESTS_DIR) / f"{os.getpid()}.json").write_text(json.dumps(counter.counts()))


# -- in the sweep's process ---------------------------------------------------------------------------------


class Meter:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}  # wall
        self.cpu: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.recorded: list[float] = []  # trial end -> recorded, seconds

    @contextlib.contextmanager
    def wrap(
        self, owner: Any, attribute: str, name: str, after: Callable[..., None] | None = None
    ) -> Iterator:
        original = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            begin, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - begin
                self.cpu[name] = self.cpu.get(name, 0.0) + time.thread_time() - cpu  # this thread's own
                self.calls[name] = self.calls.get(name, 0) + 1
                if after is not None:
                    after(*args, **kwargs)

        setattr(owner, attribute, timed)
        try:
            yield
        finally:
            setattr(owner, attribute, original)


def resident_mb() -> float:
    """This process's resident set now, in MiB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_one(config_path: str, tracking_uri: str, trial_seconds: float) -> dict[str, Any]:
    """One sweep in this process, with the driver's costs metered."""
    global TRIAL_SECONDS, REQUESTS_DIR
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    TRIAL_SECONDS = trial_seconds
    requests_dir = Path(config_path).parent / "requests"
    requests_dir.mkdir()
    REQUESTS_DIR = str(requests_dir)
    driver_requests = process_counter()
    from ray.tune.execution.tune_controller import TuneController

    import dicelab.sweeps.tuning as tuning
    from dicelab.sweeps.callbacks import SweepView, TrialRecords
    from dicelab.sweeps.driver import SweepOptions, execute_sweep
    from dicelab.sweeps.race_searcher import RaceSearcher
    from dicelab.sweeps.tune_storage import StateKeeper

    meter = Meter()

    def recorded(self: Any, iteration: int, trials: Any, trial: Any, **info: Any) -> None:
        ended = (trial.last_result or {}).get(END_KEY)
        if ended is not None:
            meter.recorded.append(time.time() - ended)

    snapshots: list[dict[str, Any]] = []
    progress = Path(config_path).parent / "progress.json"
    stopped = threading.Event()

    def snapshot() -> None:
        while not stopped.wait(PROGRESS_EVERY_S):
            snapshots.append(
                {
                    "wall_s": round(time.perf_counter() - wall_start, 1),
                    "driver_cpu_s": round(time.process_time() - cpu_start, 1),
                    "trials_recorded": len(meter.recorded),
                    "driver_rss_mb": round(resident_mb()),
                    "load_average": os.getloadavg()[0],
                    **{f"{key}_s": round(value, 2) for key, value in meter.seconds.items()},
                    **{f"{key}_cpu_s": round(value, 2) for key, value in meter.cpu.items()},
                    **{f"{key}_calls": value for key, value in meter.calls.items()},
                }
            )
            partial = progress.with_suffix(".tmp")
            partial.write_text(json.dumps(snapshots, indent=1))
            os.replace(partial, progress)

    threading.Thread(target=snapshot, daemon=True, name="sweep-scale-progress").start()
    with contextlib.ExitStack() as stack:
        stack.callback(stopped.set)
        stack.callback(setattr, tuning, "tune_trial", tuning.tune_trial)
        tuning.tune_trial = null_tune_trial  # the trainable Tune gets (tuning.trainable reads this name)
        stack.enter_context(meter.wrap(TuneController, "save_to_dir", "state_saves"))
        for method in ("suggest", "on_trial_result", "on_trial_complete", "save"):
            stack.enter_context(meter.wrap(RaceSearcher, method, "searcher"))
        stack.enter_context(meter.wrap(TrialRecords, "on_trial_complete", "records", after=recorded))
        for method in ("on_trial_start", "on_trial_result", "on_trial_complete", "on_step_end"):
            stack.enter_context(meter.wrap(SweepView, method, "view"))
        for method in ("on_step_begin", "on_step_end"):
            stack.enter_context(meter.wrap(StateKeeper, method, "state_keeper"))
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            outcome = execute_sweep(SweepOptions(config=config_path, tracking_uri=tracking_uri))
    cpu, wall = time.process_time() - cpu_start, time.perf_counter() - wall_start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    driver_counts = driver_requests.counts()  # before the reads below
    worker_counts = [json.loads(path.read_text()) for path in requests_dir.glob("*.json")]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    runs = client.search_runs([outcome.experiment_id], max_results=50_000)
    trials = [
        run
        for run in runs
        if run.data.tags.get(names.ROLE) == names.ROLE_TRIAL
        and run.data.tags.get(names.SWEEP_ID) == outcome.sweep_id
    ]
    finished = sum(run.info.status == "FINISHED" for run in trials)
    n = max(len(trials), 1)
    recorded_ms = sorted(1000 * value for value in meter.recorded)
    search = yaml.safe_load(Path(config_path).read_text())["search"]
    own_work = n * trial_seconds / search["max_concurrent"]  # the sweep's wall if trials cost nothing else
    trial_calls: Counter[str] = Counter()
    for counts in worker_counts:
        trial_calls.update(counts["calls"])
    driver_calls = Counter(driver_counts["calls"])
    import dicelab

    row = {
        "dicelab": str(Path(dicelab.__file__).parent),  # which package ran: this checkout's, or --base's
        "exit_code": outcome.exit_code,
        "trials": len(trials),
        "trials_finished": finished,
        "trial_seconds": trial_seconds,
        "max_concurrent": search["max_concurrent"],
        "wall_s": round(wall, 1),
        "overhead_wall_s_per_trial": round((wall - own_work) / n, 3),
        "driver_cpu_s": round(cpu, 1),
        "driver_cpu_ms_per_trial": round(1000 * cpu / n, 1),
        "driver_peak_rss_mb": round(peak_mb),
        "requests_per_trial": round((driver_calls.total() + trial_calls.total()) / n, 2),
        "driver_requests_per_trial": round(driver_calls.total() / n, 2),
        "trial_requests_per_trial": round(trial_calls.total() / n, 2),
        "http_requests_per_trial": round(
            (driver_counts["http"] + sum(counts["http"] for counts in worker_counts)) / n, 2
        ),
        "trial_workers": len(worker_counts),
        "driver_requests": dict(driver_calls.most_common()),
        "trial_requests": dict(trial_calls.most_common()),
        "recorded_p50_ms": round(statistics.median(recorded_ms), 1) if recorded_ms else None,
        "recorded_p95_ms": round(recorded_ms[int(0.95 * (len(recorded_ms) - 1))], 1) if recorded_ms else None,
        "searcher_ms_per_trial": round(1000 * meter.seconds.get("searcher", 0.0) / n, 2),
        "searcher_cpu_ms_per_trial": round(1000 * meter.cpu.get("searcher", 0.0) / n, 2),
        "searcher_calls": meter.calls.get("searcher", 0),
        "records_ms_per_trial": round(1000 * meter.seconds.get("records", 0.0) / n, 2),
        "view_ms_per_trial": round(1000 * meter.seconds.get("view", 0.0) / n, 2),
        "state_keeper_ms_per_trial": round(1000 * meter.seconds.get("state_keeper", 0.0) / n, 2),
        "state_saves": meter.calls.get("state_saves", 0),
        "state_saves_s": round(meter.seconds.get("state_saves", 0.0), 2),
        "state_saves_cpu_s": round(meter.cpu.get("state_saves", 0.0), 2),
        "records_cpu_ms_per_trial": round(1000 * meter.cpu.get("records", 0.0) / n, 2),
        "state_save_ms_each": round(
            1000 * meter.seconds.get("state_saves", 0.0) / max(meter.calls.get("state_saves", 0), 1), 1
        ),
        "snapshots": snapshots,
    }
    row["halves"] = halves(row)
    return row


def race_only(trials: int, saves: bool) -> dict[str, Any]:
    """The race searcher alone, driven as Tune drives it (2 trials at a time), on the benchmark's race: its
    CPU per trial, the tests it ran and the bytes of its state file, without Ray or MLflow in the way.
    saves: Tune saves the experiment (the searcher's `save`) after every trial, as it does in the sweeps
    above (one forced save per trial checkpoint); else never."""
    import dicelab.stats
    from dicelab.sweeps.algorithms import POINT_KEY
    from dicelab.sweeps.race_records import race_file
    from dicelab.sweeps.race_searcher import RaceSearcher
    from dicelab.sweeps.racing import Race, RaceSettings

    counts = {"tests": 0, "writes": 0, "bytes": 0}
    compare, write = dicelab.stats.compare, RaceSearcher._write

    def counted_compare(*args: Any, **kwargs: Any) -> Any:
        counts["tests"] += 1
        return compare(*args, **kwargs)

    def counted_write(self: RaceSearcher, *args: Any) -> None:
        write(self, *args)
        counts["writes"] += 1
        counts["bytes"] += race_file(self.directory).stat().st_size

    configurations = max(2, trials // 2)
    values = [0.6 + 0.01 * (i % 5) for i in range(configurations)]  # near-ties: the race stays undecided
    with tempfile.TemporaryDirectory(prefix="dl-race-only-") as scratch, contextlib.ExitStack() as stack:
        stack.callback(setattr, dicelab.stats, "compare", compare)
        stack.callback(setattr, RaceSearcher, "_write", write)
        dicelab.stats.compare, RaceSearcher._write = counted_compare, counted_write
        dicelab.stats.holm([0.5])  # scipy and statsmodels imported before the clock starts
        cpu = time.thread_time()
        race = Race(RaceSettings(min_seeds=2, max_seeds=2), [f"gamma={i}" for i in range(configurations)])
        points = [{"loss.gamma": 0.01 * i} for i in range(configurations)]
        searcher = RaceSearcher(race, points, "f1", "max", Path(scratch) / "sweep")
        running: list[tuple[str, dict[str, Any]]] = []
        counter = 0
        while True:
            while len(running) < 2:
                config = searcher.suggest(f"t{counter}")
                if not isinstance(config, dict):
                    break
                running.append((f"t{counter}", config[POINT_KEY]))
                counter += 1
            if not running:
                break
            trial_id, point = running.pop(0)
            index = round(point["loss.gamma"] * 100)
            value = values[index] + 0.001 * point["train.seed"] * (1 + index % 3)
            with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                searcher.on_trial_result(trial_id, {"dev_f1": value})
                searcher.on_trial_complete(trial_id, {"dev_f1": value})
            if saves:
                searcher.save(str(Path(scratch) / "searcher.pkl"))
        cpu = time.thread_time() - cpu
        final_bytes = race_file(searcher.directory).stat().st_size
    n = len(searcher.race.trials)
    return {
        "n": n,
        "saves": "after every trial" if saves else "none",
        "race_cpu_ms_per_trial": round(1000 * cpu / n, 3),
        "tests_per_trial": round(counts["tests"] / n, 3),
        "file_writes": counts["writes"],
        "file_bytes_per_trial": round(counts["bytes"] / n),
        "final_file_bytes": final_bytes,
    }


# -- the benchmark ------------------------------------------------------------------------------------------


def sweep_config(trials: int, storage: Path, max_concurrent: int = 2) -> dict[str, Any]:
    """A race of trials/2 configurations x 2 seeds (min = max: every configuration runs both seeds), at most
    `max_concurrent` trials at once."""
    configurations = max(1, trials // 2)
    return {
        "name": f"sweep-scale-{trials}",
        "data": {"source": "synthetic_pairs", "synthetic": {"n_train": 64, "n_dev": 32}, "max_length": 32},
        "model": {"backbone": "tiny-bert"},
        "loss": {"name": "focal"},
        "train": {"epochs": 1, "batch_size": 16, "metric": "f1"},
        "tracking": {"log_predictions": False},
        "search": {
            "algorithm": "grid",
            "space": {"loss.gamma": {"grid": [round(0.01 * i, 2) for i in range(configurations)]}},
            "racing": {"min_seeds": 2, "max_seeds": 2, "test": "t"},
            "resources": {"cpu": 1},
            "max_concurrent": max_concurrent,
            "storage": str(storage),
        },
    }


RAY_START_FAILED = "timed out during startup"  # Ray's own line when its processes came up too slowly
ATTEMPTS = 3  # a sweep whose local Ray could not start on the loaded machine is run again (counted)


def measure(
    trials: int,
    backend: str,
    tracking_uri: str,
    scratch: Path,
    environment: dict[str, str],
    max_concurrent: int = 2,
    trial_seconds: float = 1.0,
    variant: str = "change",
) -> dict:
    for attempt in range(1, ATTEMPTS + 1):
        directory = Path(tempfile.mkdtemp(prefix=f"sweep-{trials}-{backend}-{variant}-", dir=scratch))
        print(f"{trials} trials against {backend} ({variant}): {directory}", file=sys.stderr, flush=True)
        config = directory / "sweep.yaml"
        config.write_text(yaml.safe_dump(sweep_config(trials, directory / "results", max_concurrent)))
        command = [sys.executable, __file__, "--worker", str(config), tracking_uri, str(trial_seconds)]
        done = subprocess.run(
            command, capture_output=True, text=True, env=environment, cwd=directory, check=False
        )
        if done.returncode == 0:
            row = json.loads(done.stdout.strip().splitlines()[-1])
            return {"backend": backend, "variant": variant, "n": trials, "attempts": attempt, **row}
        if RAY_START_FAILED not in done.stderr or attempt == ATTEMPTS:
            raise SystemExit(f"the {trials}-trial sweep against {backend} failed:\n{done.stderr[-4000:]}")
        print(f"local Ray did not start ({trials} trials, {backend}): once more", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


def halves(row: dict[str, Any]) -> dict[str, dict[str, float]]:
    """From a sweep's progress snapshots: the driver's CPU and the wall beyond the trials' own work per trial
    in its first and second half of trials recorded (start-up left out: from the first snapshot with a
    trial recorded), and the second half's over the first's (1.0: constant per trial along the sweep)."""
    marks = [snap for snap in row["snapshots"] if snap["trials_recorded"] > 0]
    if len(marks) < 3:
        return {}
    middle = min(marks, key=lambda snap: abs(snap["trials_recorded"] - row["trials"] / 2))
    out: dict[str, dict[str, float]] = {}
    for name, (start, end) in {"first": (marks[0], middle), "second": (middle, marks[-1])}.items():
        trials = max(end["trials_recorded"] - start["trials_recorded"], 1)
        own_work = trials * row["trial_seconds"] / row["max_concurrent"]
        out[name] = {
            "trials": trials,
            "driver_cpu_ms_per_trial": round(
                1000 * (end["driver_cpu_s"] - start["driver_cpu_s"]) / trials, 1
            ),
            "overhead_wall_s_per_trial": round((end["wall_s"] - start["wall_s"] - own_work) / trials, 3),
            "state_saves_ms_per_trial": round(
                1000 * (end.get("state_saves_s", 0) - start.get("state_saves_s", 0)) / trials, 1
            ),
        }
    out["second/first"] = {
        key: round(out["second"][key] / out["first"][key], 2) if out["first"][key] else float("nan")
        for key in ("driver_cpu_ms_per_trial", "overhead_wall_s_per_trial", "state_saves_ms_per_trial")
    }
    return out


def growth(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per backend, from each N to the next: totals over N's ratio (1.0 linear), per-trial costs' ratio."""
    totals = ("wall_s", "driver_cpu_s", "state_saves", "state_saves_s", "state_saves_cpu_s")
    totals += ("driver_peak_rss_mb",)
    per_trial = (
        "driver_cpu_ms_per_trial",
        "overhead_wall_s_per_trial",
        "requests_per_trial",
        "driver_requests_per_trial",
        "trial_requests_per_trial",
        "recorded_p50_ms",
        "recorded_p95_ms",
        "searcher_ms_per_trial",
        "searcher_cpu_ms_per_trial",
        "records_ms_per_trial",
        "records_cpu_ms_per_trial",
        "view_ms_per_trial",
        "state_save_ms_each",
    )
    out: dict[str, dict[str, float]] = {}
    for backend, variant in sorted({(row["backend"], row.get("variant", "change")) for row in rows}):
        own = [row for row in rows if (row["backend"], row.get("variant", "change")) == (backend, variant)]
        own.sort(key=lambda row: row["n"])
        backend = backend if variant == "change" else f"{backend} {variant}"
        for small, large in itertools.pairwise(own):
            scale = large["n"] / small["n"]
            ratio = {
                key: (large.get(key) or 0) / max(small.get(key) or 0, 1e-9) for key in totals + per_trial
            }
            ratios = {key: ratio[key] / scale for key in totals} | {key: ratio[key] for key in per_trial}
            out[f"{backend} {small['n']}->{large['n']}"] = {key: round(v, 2) for key, v in ratios.items()}
    return out


AB_KEYS = (
    "wall_s",
    "driver_cpu_ms_per_trial",
    "overhead_wall_s_per_trial",
    "driver_peak_rss_mb",
    "driver_requests_per_trial",
    "records_cpu_ms_per_trial",
    "state_saves",
    "state_save_ms_each",
    "state_saves_cpu_s",
)


def ab(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per backend and N run both ways: this checkout's cost over the base's (1.0 the same, below 1
    cheaper), and the driver CPU per trial's growth from the smallest N to each (per trial: 1.0 constant)."""
    out: dict[str, dict[str, float]] = {}
    by = {(row["backend"], row.get("variant", "change"), row["n"]): row for row in rows}
    for (backend, variant, n), change in sorted(by.items()):
        base = by.get((backend, "base", n))
        if variant != "change" or base is None:
            continue
        out[f"{backend} {n}"] = {
            key: round((change.get(key) or 0) / max(base.get(key) or 0, 1e-9), 2) for key in AB_KEYS
        }
    return out


def base_tree(ref: str, scratch: Path) -> Path:
    """dicelab's package as of git ref `ref`, exported under scratch: the folder to put on PYTHONPATH."""
    root = Path(__file__).resolve().parent.parent
    target = scratch / "base"
    target.mkdir()
    archive = subprocess.run(
        ["git", "archive", ref, "platform"], cwd=root, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "platform"


@contextlib.contextmanager
def backends(names: list[str], scratch: Path) -> Iterator[dict[str, tuple[str, dict[str, str]]]]:
    """name -> (tracking URI, the sweep process's environment); the team server runs for the block."""
    base = {key: value for key, value in os.environ.items() if not key.startswith(("MLFLOW_", "RAY_"))}
    base |= {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    chosen: dict[str, tuple[str, dict[str, str]]] = {}
    if "sqlite" in names:
        chosen["sqlite"] = (f"sqlite:///{scratch / 'mlflow.db'}", base)
    if "server" not in names:
        yield chosen
        return
    from dicelab.tracking import team_server

    password = secrets.token_urlsafe(18)
    server_dir = Path(tempfile.mkdtemp(prefix="dl-sweep-scale-db-", dir="/tmp"))  # the postgres user's reach
    with team_server.running(server_dir, ("admin", password)) as server:
        login = {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": password}
        chosen["server"] = (server.tracking_uri, {**base, **server.client_environment(), **login})
        yield chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--backends", nargs="+", choices=["sqlite", "server"], default=["sqlite", "server"])
    parser.add_argument(
        "--out", type=Path, help=f"write the figures here as JSON (default: {RESULTS}, but for --quick)"
    )
    parser.add_argument(
        "--trial-seconds", type=float, default=1.0, help="each trial's own work (it waits this long)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="4 trials against SQLite, one at a time: a smoke run"
    )
    parser.add_argument(
        "--race-only", action="store_true", help="the race searcher alone at each --trials (no Ray or MLflow)"
    )
    parser.add_argument(
        "--base", metavar="REF", help="also run each sweep on dicelab as of this git ref, first (an A/B)"
    )
    parser.add_argument("--worker", nargs=3, metavar=("CONFIG", "URI", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        config, uri, seconds = args.worker
        print(json.dumps(run_one(config, uri, float(seconds))), flush=True)
        return 0
    if args.race_only:
        race_rows = [race_only(trials, saves) for saves in (False, True) for trials in args.trials]
        for row in race_rows:
            print(json.dumps(row), flush=True)
        if args.out:
            args.out.write_text(json.dumps({"race_only": race_rows}, indent=2))
        return 0
    max_concurrent = 2
    if args.quick:  # every path of the full run once, on one trial worker (a process importing torch)
        args.trials, args.backends, max_concurrent = [4], ["sqlite"], 1
    out = args.out or (None if args.quick else RESULTS)
    figures: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "cpus": os.cpu_count(),
        "load_average_before": os.getloadavg(),
    }
    rows: list[dict[str, Any]] = []
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="dl-sweep-scale-") as scratch,
        backends(args.backends, Path(scratch)) as uris,
    ):
        variants: dict[str, dict[str, str]] = {"change": {}}
        if args.base:
            figures["base"] = subprocess.run(
                ["git", "rev-parse", "--short", args.base], capture_output=True, text=True, check=True
            ).stdout.strip()
            variants = {"base": {"PYTHONPATH": str(base_tree(args.base, Path(scratch)))}, **variants}
        for trials in args.trials:
            for backend, (uri, environment) in uris.items():
                for variant, extra in variants.items():
                    row = measure(
                        trials,
                        backend,
                        uri,
                        Path(scratch),
                        environment | extra,
                        max_concurrent,
                        args.trial_seconds,
                        variant,
                    )
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    # after each sweep: what a run stopped before its end had measured
                    figures |= {"rows": rows, "growth": growth(rows), "ab": ab(rows)}
                    figures["load_average_after"] = os.getloadavg()
                if out is not None:
                    out.write_text(json.dumps(figures, indent=2))
    print(json.dumps({"growth": figures["growth"], "ab": figures["ab"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
