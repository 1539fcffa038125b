"""A trial in a second thread, as Tune runs it, against the same trial in the process's main thread, with
glibc's malloc at its defaults and with one arena (`MALLOC_ARENA_MAX=1`, what dicelab gives its trials'
workers: `dicelab.sweeps.trial_env`).

    .venv/bin/python benchmarks/trial_thread.py                  # 3 repeats of 4-epoch trials
    .venv/bin/python benchmarks/trial_thread.py --epochs 12 --repeats 2

The trial is `sweep_overhead`'s workload (tiny-bert, 1,500 synthetic pairs, learning rate 3e-3, one torch
thread), `run_trial` with no reporter. glibc reads the variable when a process starts, so each repeat runs
two fresh processes, one per malloc setting, and each of them runs the trial in its main thread, then in a
second thread. Per trial: wall seconds, CPU seconds and minor page faults of the thread that trained
(`getrusage(RUSAGE_THREAD)`). The ratios are against the main thread at glibc's defaults, which is how a
plain process (`sweep_overhead`'s baseline, `dicelab trial`) runs a trial.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SETTINGS = {"glibc defaults": {}, "one arena": {"MALLOC_ARENA_MAX": "1"}}


def trial(epochs: int) -> dict[str, float]:
    """One run_trial in the calling thread: its wall and CPU seconds and minor page faults."""
    import torch

    from dicelab.experiment import experiment_from_dict
    from dicelab.training import prepare_inputs, run_trial

    sys.path.insert(0, str(Path(__file__).parent))
    from sweep_overhead import overhead_config

    torch.set_num_threads(1)
    data = overhead_config(epochs)
    data.pop("search")
    config = experiment_from_dict(data, "trial_thread")
    inputs = prepare_inputs(config)
    before, started = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter()
    run_trial(config, inputs=inputs)
    after, seconds = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter() - started
    return {
        "wall_s": seconds,
        "cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
        "minor_faults": after.ru_minflt - before.ru_minflt,
    }


def worker(epochs: int) -> None:
    """In a fresh process: the trial in the main thread, then in a second thread; one JSON line."""
    results = {"main thread": trial(epochs)}
    box: dict[str, dict[str, float]] = {}
    second = threading.Thread(target=lambda: box.update(result=trial(epochs)))
    second.start()
    second.join()
    results["second thread"] = box["result"]
    print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4, help="epochs per trial (4: about 4 s)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.epochs)

    found: dict[tuple[str, str], list[dict[str, float]]] = {}
    for repeat in range(args.repeats):
        for setting, env in SETTINGS.items():
            clean = {key: value for key, value in os.environ.items() if key not in SETTINGS["one arena"]}
            done = subprocess.run(
                [sys.executable, __file__, "--worker", "--epochs", str(args.epochs)],
                env={**clean, "OMP_NUM_THREADS": "1", **env},
                capture_output=True,
                text=True,
                check=True,
            )
            for way, result in json.loads(done.stdout.strip().splitlines()[-1]).items():
                found.setdefault((setting, way), []).append(result)
                print(f"{repeat + 1} {setting}, {way}: {json.dumps(result)}", flush=True)

    def median(key: tuple[str, str], measure: str) -> float:
        return statistics.median(result[measure] for result in found[key])

    baseline = ("glibc defaults", "main thread")
    report: dict[str, Any] = {"epochs": args.epochs, "repeats": args.repeats, "medians": {}}
    for key in found:
        report["medians"][f"{key[0]}, {key[1]}"] = {
            "wall_s": round(median(key, "wall_s"), 3),
            "cpu_s": round(median(key, "cpu_s"), 3),
            "minor_faults": round(median(key, "minor_faults")),
            "wall_over_baseline": round(median(key, "wall_s") / median(baseline, "wall_s"), 3),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
