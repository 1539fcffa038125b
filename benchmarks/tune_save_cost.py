"""What one of Tune's experiment-state saves costs the sweep driver at N trials, in its two parts.

    .venv/bin/python benchmarks/tune_save_cost.py --trials 100 1000 [--repeats 5]

A save (`TuneController.save_to_dir`, then `_ExperimentCheckpointManager.sync_up_experiment_state`) has two
parts, both timed here as Ray 2.60 runs them, on files shaped like a dicelab sweep's:
- the dump: every trial's cached JSON state written into one experiment_state-*.json (json.dump of the
  list of strings, as `save_to_dir` does);
- the upload: the driver's whole staging directory (`driver_artifacts`) copied to the sweep's storage
  directory with `pyarrow.fs.copy_files` (what `ray.train._internal.storage._upload_to_fs_path` runs for a
  local storage path, in the syncer's thread). That directory holds the state file and, for every trial,
  the files Tune's JsonLoggerCallback writes there (params.json, params.pkl, result.json), copied again at
  every save whether they changed or not.
Each is timed with and without the trials' logger files. Tune forces a save at every trial checkpoint when
`CheckpointConfig(num_to_keep=1)` is set (see sweep_scale.md), so N trials of c checkpoints make about c x N
saves of O(N) each. Figures go to benchmarks/results/tune_save_cost.json (--out).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.fs

RESULTS = Path(__file__).resolve().parent / "results" / "tune_save_cost.json"
# Sizes from a dicelab sweep of three evaluations per trial (its Ray session's driver_artifacts):
TRIAL_STATE_BYTES = 16_000  # one trial's JSON state in experiment_state-*.json (sweep_scale.md)
RAY_CHUNK = 64 * 1024 * 1024  # the chunk size Ray passes to copy_files
LOGGER_FILES = {"params.json": 74, "params.pkl": 73, "result.json": 1_450}  # JsonLoggerCallback's, per trial


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # the syncer's thread included, as in the driver
    return usage.ru_utime + usage.ru_stime


def trial_state(index: int) -> list[str]:
    """A trial's entry in the state file: Tune's two JSON strings (the trial's state, its runtime metadata),
    here made of metric-like keys and float values up to TRIAL_STATE_BYTES."""
    values: dict[str, float] = {}
    while len(json.dumps(values)) < TRIAL_STATE_BYTES // 2:
        values[f"dev/metric_{len(values)}"] = index + len(values) / 7.0
    text = json.dumps(values)
    return [text, text]


def stage(directory: Path, trials: int, logger_files: bool) -> None:
    directory.mkdir(parents=True)
    if not logger_files:
        return
    for index in range(trials):
        trial = directory / f"{index:05d}"
        trial.mkdir()
        for name, size in LOGGER_FILES.items():
            (trial / name).write_bytes(b"x" * size)


def measure(trials: int, repeats: int, logger_files: bool) -> dict[str, Any]:
    data = [trial_state(index) for index in range(trials)]
    with tempfile.TemporaryDirectory(prefix="dl-tune-save-") as root:
        staging, storage = Path(root, "driver_artifacts"), Path(root, "storage")
        stage(staging, trials, logger_files)
        storage.mkdir()
        state = staging / "experiment_state-bench.json"
        local = pyarrow.fs.LocalFileSystem()
        dump_wall = dump_cpu = upload_wall = upload_cpu = 0.0
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), cpu_s()
            with open(state, "w") as file:
                json.dump({"trial_data": data, "runner_data": {}, "stats": {}}, file)
            dump_wall, dump_cpu = dump_wall + time.perf_counter() - wall, dump_cpu + cpu_s() - cpu
            wall, cpu = time.perf_counter(), cpu_s()
            pyarrow.fs.copy_files(
                str(staging), str(storage), destination_filesystem=local, chunk_size=RAY_CHUNK
            )
            upload_wall, upload_cpu = upload_wall + time.perf_counter() - wall, upload_cpu + cpu_s() - cpu
        files = sum(len(names) for _, _, names in os.walk(staging))
        return {
            "trials": trials,
            "logger_files": logger_files,
            "files_uploaded": files,
            "state_mb": round(state.stat().st_size / 1e6, 2),
            "dump_ms": round(1000 * dump_wall / repeats, 1),
            "dump_cpu_ms": round(1000 * dump_cpu / repeats, 1),
            "upload_ms": round(1000 * upload_wall / repeats, 1),
            "upload_cpu_ms": round(1000 * upload_cpu / repeats, 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = []
    for logger_files in (True, False):
        for trials in args.trials:
            row = measure(trials, args.repeats, logger_files)
            rows.append(row)
            print(
                f"{trials:5d} trials, logger files {'in' if logger_files else 'out':3s}: "
                f"dump {row['dump_cpu_ms']:7.1f} ms CPU, upload {row['upload_cpu_ms']:7.1f} ms CPU "
                f"({row['files_uploaded']} files, state {row['state_mb']} MB)",
                flush=True,
            )
    figures = {
        "date": datetime.date.today().isoformat(),
        "command": "benchmarks/tune_save_cost.py --trials " + " ".join(str(n) for n in args.trials),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_average_before": os.getloadavg(),
        "repeats": args.repeats,
        "rows": rows,
    }
    args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
