"""A local sweep's tuning on (dicelab's default) against off (`DICELAB_RAY_TUNING=0`), alternated ABBA on
the user-facing commands, each in a fresh process. The tuning: a private local Ray without worker prestart
at the raylet's start and without metrics, its prestarted workers preloading the trial modules with the
idle-worker killer off, Tune's `PL_DISABLE_FORK` dropped from the trial actors, and the trial workers'
raised garbage-collector threshold and frozen imports (`warm_workers`, `dicelab.garbage`).

    .venv/bin/python benchmarks/ray_speedups_ab.py --sweep-pairs 2 --pairs 4 [--short] [--big DB]

The sweep is `dicelab sweep experiments/quickstart.yaml`, each in a new directory (its own SQLite store);
`--short` shrinks its trials (1 epoch of 800 pairs: the same 9-12 trials, whose fixed start-up costs the
tuning cuts then weigh more); `--big DB` adds `dicelab analyze` of the 1,000-run experiment "big" that
tests/analysis/large_experiment.py wrote into DB; `dicelab analyze --no-log` and `dicelab validate` run
against the first sweep's store. Writes benchmarks/results/ray_speedups_ab.json (ratios: off / on; above
1: the tuning helps). The figures in benchmarks/results/ray_speedups_ab.md were measured at commit
28e65aa, whose switch (DICELAB_AB_PLAIN=1) also turned off the commands' own collector retuning and their
exit without Python's teardown, both since removed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DICELAB = str(Path(sys.executable).with_name("dicelab"))
QUICKSTART = str(ROOT / "experiments" / "quickstart.yaml")
WAYS = {"on": {"DICELAB_RAY_TUNING": "1"}, "off": {"DICELAB_RAY_TUNING": "0"}}
SHORT = [
    "--set",
    "train.epochs=1",
    "--set",
    "data.synthetic.n_train=800",
    "--set",
    "data.synthetic.n_dev=200",
]


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def abba(pairs: int, run: Any) -> dict[str, Any]:
    """Per way: wall and CPU seconds of each run (CPU: the command's and its children's that it waited
    for; Ray's own processes are not all its children), and the ratio of the medians."""
    times: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for index in range(pairs):
        order = ["on", "off"] if index % 2 == 0 else ["off", "on"]
        for way in order:
            times[way].append(run(way, len(times[way])))
            print(f"  {way}: {times[way][-1][0]:.1f} s wall", flush=True)
    wall = {way: statistics.median(t[0] for t in runs) for way, runs in times.items()}
    return {
        "runs": {
            way: [{"wall_s": round(w, 2), "cpu_s": round(c, 2)} for w, c in r] for way, r in times.items()
        },
        "median_wall_s": {way: round(value, 2) for way, value in wall.items()},
        "ratio_off_to_on": round(wall["off"] / wall["on"], 3),
        "saving_pct": round(100 * (1 - wall["on"] / wall["off"]), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sweep-pairs", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=4, help="pairs for analyze and validate")
    parser.add_argument("--short", action="store_true", help="1 epoch of 800 training pairs per trial")
    parser.add_argument("--big", type=Path, help="SQLite store of large_experiment.py's 1,000 runs")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="speedups_ab_") as tmp:
        base = Path(tmp)
        dirs: list[Path] = []

        def sweep(way: str, index: int) -> tuple[float, float]:
            where = base / f"sweep_{way}_{index}"
            where.mkdir()
            dirs.append(where)
            return timed(
                [DICELAB, "sweep", QUICKSTART, *SHORT] if args.short else [DICELAB, "sweep", QUICKSTART],
                where,
                WAYS[way],
            )

        if args.big is not None:
            big = f"sqlite:///{args.big}"

            def analyze_big(way: str, index: int) -> tuple[float, float]:
                out = base / f"big_{way}_{index}"
                command = [
                    "analyze",
                    "--experiment",
                    "big",
                    "--tracking-uri",
                    big,
                    "--no-log",
                    "--out",
                    str(out),
                ]
                return timed([DICELAB, *command], base, WAYS[way])

            print("dicelab analyze --experiment big (1,000 runs) --no-log", flush=True)
            results["analyze 1,000 runs"] = abba(args.pairs, analyze_big)
        print("dicelab sweep experiments/quickstart.yaml" + (" (short)" if args.short else ""), flush=True)
        results["sweep quickstart" + (" (short)" if args.short else "")] = abba(args.sweep_pairs, sweep)
        store = dirs[0]

        def analyze(way: str, index: int) -> tuple[float, float]:
            out = store / f"report_{way}_{index}"
            return timed(
                [DICELAB, "analyze", "--experiment", "quickstart", "--no-log", "--out", str(out)],
                store,
                WAYS[way],
            )

        print("dicelab analyze --experiment quickstart --no-log", flush=True)
        results["analyze quickstart"] = abba(args.pairs, analyze)
        print("dicelab validate experiments/quickstart.yaml", flush=True)
        results["validate quickstart"] = abba(
            args.pairs, lambda way, _: timed([DICELAB, "validate", QUICKSTART], store, WAYS[way])
        )
    record = {
        "benchmark": "ray_speedups_ab.py",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared, loaded)",
        "command": " ".join(["benchmarks/ray_speedups_ab.py", *sys.argv[1:]]),
        "results": results,
    }
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ray_speedups_ab.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
