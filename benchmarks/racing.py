"""Seed racing against a fixed grid of seeds.

    .venv/bin/python benchmarks/racing.py --part simulated     # (a) seconds: the racing logic alone
    .venv/bin/python benchmarks/racing.py --part quickstart    # (b) minutes: the quickstart on local Ray

(a) Simulated races, no training: each configuration's score on seed s is its true mean plus a per-seed
    effect shared by every configuration (same data order and initialisation) plus its own noise. Scenarios
    differ in how far apart the true means are; every race is driven through `Race` exactly as the Tune
    searcher drives it (results arrive `concurrent` at a time). Reported per scenario: the share of races
    that decide which pick the true best, the share that decide at all, and trials used against a fixed grid
    of every configuration at max_seeds.
(b) The quickstart sweep (experiments/quickstart.yaml) run twice as fresh processes on local Ray: the fixed
    grid at the race's max_seeds seeds, and the race as configured: trials, wall time, and the winner of each
    (the configuration with the best mean over its seeds; degenerate trials, tagged by the trial, left out).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from dicelab.sweeps.racing import FINISHED, Race, RaceSettings

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Scenario:
    name: str
    means: tuple[float, ...]  # true means (F1 points); the first is the best
    seed_sd: float = 1.5  # the per-seed effect all configurations share (what pairing cancels)
    noise_sd: float = 0.6  # each trial's own noise


SCENARIOS = (
    # Table-8-like: one loss clearly ahead, a cluster of close ones, two collapsed ones.
    Scenario("one clear best of 8", (84.0, 82.0, 81.5, 81.5, 81.0, 80.0, 60.0, 40.0)),
    # A paper-sized effect: +0.9 F1 over the runner-up, others further behind.
    Scenario("paper-sized gap (+0.9) of 6", (85.9, 85.0, 84.6, 84.0, 83.0, 70.0)),
    # Nothing to find: all equal (no race should claim a winner often).
    Scenario("all equal, 5", (84.0, 84.0, 84.0, 84.0, 84.0)),
)


def simulate(
    scenario: Scenario, settings: RaceSettings, rng: np.random.Generator, concurrent: int
) -> tuple[dict, int]:
    labels = [f"c{i}" for i in range(len(scenario.means))]
    race = Race(settings, labels)
    seed_effect = {seed: rng.normal(0.0, scenario.seed_sd) for seed in settings.seeds}
    running: deque[tuple[str, int, int]] = deque()
    counter = 0
    while True:
        while len(running) < concurrent:
            trial_id = f"t{counter}"
            nxt = race.next_trial(trial_id)
            if nxt is None or nxt == FINISHED:
                break
            counter += 1
            running.append((trial_id, *nxt))  # type: ignore[misc]
        if not running:
            break
        trial_id, index, seed = running.popleft()
        value = scenario.means[index] + seed_effect[seed] + rng.normal(0.0, scenario.noise_sd)
        race.record(trial_id, value)
    assert race.decision is not None
    return race.decision, len(race.trials)


def part_simulated(
    races: int, concurrent: int, min_seeds: int, max_seeds: int, test: str, margin: float | None, only: str
) -> dict:
    rng = np.random.default_rng(2020)
    report = {}
    for scenario in SCENARIOS:
        if only and only not in scenario.name:
            continue
        settings = RaceSettings(
            min_seeds=min_seeds, max_seeds=max_seeds, confidence=0.95, test=test, margin=margin
        )
        decided = correct = trials = 0
        reasons: dict[str, int] = {}
        for _ in range(races):
            decision, used = simulate(scenario, settings, rng, concurrent)
            trials += used
            reasons[decision["reason"]] = reasons.get(decision["reason"], 0) + 1
            if decision["reason"] == "separated":
                decided += 1
                correct += decision["winner"] == "c0"
        grid = len(scenario.means) * max_seeds
        report[scenario.name] = {
            "races": races,
            "decided": decided,
            "true_best_when_decided": correct / decided if decided else math.nan,
            "trials_per_race": trials / races,
            "fixed_grid_trials": grid,
            "trials_vs_grid": trials / races / grid,
            "endings": reasons,
        }
    return report


def _run_sweep(config: dict, workdir: Path) -> tuple[float, str]:
    path = workdir / f"{config['name']}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    start = time.perf_counter()
    done = subprocess.run(
        [str(BIN / "dicelab"), "sweep", str(path)], cwd=workdir, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"sweep {config['name']} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return elapsed, done.stdout


def _winner(workdir: Path, name: str) -> tuple[str, int]:
    return winner_in(workdir / ".dicelab" / "mlflow.db", name)


def winner_in(store: Path, name: str) -> tuple[str, int]:
    """The configuration with the best mean over its seeds, and the number of trials, from a sweep's store."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id], "tags.`dicelab.role` = 'trial'", max_results=5000)
    means: dict[str, list[float]] = {}
    for run in runs:
        if "dicelab.degenerate" in run.data.tags:
            continue
        # the run name without its seed and without the result the driver appends ("... · f1 0.6778")
        configuration = run.info.run_name.split(" · ")[0]
        label = " ".join(part for part in configuration.split() if not part.startswith("seed="))
        value = run.data.metrics.get("best_dev_f1")
        if value is not None:
            means.setdefault(label, []).append(value)
    best = max(means, key=lambda label: np.mean(means[label]))
    return best, len(runs)


def part_quickstart() -> dict:
    """The quickstart's own race against the same configurations on every seed up to its max_seeds."""
    base = yaml.safe_load((ROOT / "experiments" / "quickstart.yaml").read_text(encoding="utf-8"))
    racing = base["search"].pop("racing")
    max_seeds = racing["max_seeds"]
    report = {}
    with tempfile.TemporaryDirectory(prefix="dicelab-racing-bench-") as tmp:
        for mode in ("grid", "racing"):
            workdir = Path(tmp) / mode
            workdir.mkdir()
            config = json.loads(json.dumps(base))
            config["name"] = f"bench-{mode}"
            config.get("tracking", {}).pop("experiment", None)
            if mode == "grid":
                config["search"]["seeds"] = list(range(1, max_seeds + 1))
            else:
                config["search"]["racing"] = racing
            elapsed, _ = _run_sweep(config, workdir)
            winner, trials = _winner(workdir, config["name"])
            report[mode] = {"wall_s": round(elapsed, 1), "trials": trials, "winner": winner}
            print(f"  {mode}: {report[mode]}", flush=True)
    report["racing_vs_grid"] = {
        "trials": report["racing"]["trials"] / report["grid"]["trials"],
        "wall": report["racing"]["wall_s"] / report["grid"]["wall_s"],
        "same_winner": report["racing"]["winner"] == report["grid"]["winner"],
    }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["simulated", "quickstart", "all"], default="simulated")
    parser.add_argument("--races", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument("--min-seeds", type=int, default=3)
    parser.add_argument("--max-seeds", type=int, default=10)
    parser.add_argument("--test", choices=["t", "permutation"], default="t")
    parser.add_argument("--margin", type=float, help="equivalence margin (F1 points here); default: none")
    parser.add_argument("--scenario", default="", help="only scenarios whose name contains this")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    if args.part in ("simulated", "all"):
        print(f"(a) simulated races: {args.races} per scenario, seeds {args.min_seeds}..{args.max_seeds}, "
              f"test {args.test}, margin {args.margin}, {args.concurrent} at a time")  # fmt: skip
        for name, row in part_simulated(
            args.races, args.concurrent, args.min_seeds, args.max_seeds, args.test, args.margin, args.scenario
        ).items():
            print(
                f"  {name:32s} decided {row['decided']:3d}/{row['races']}  true best when decided "
                f"{row['true_best_when_decided']:.1%}  trials {row['trials_per_race']:.1f} of "
                f"{row['fixed_grid_trials']} ({row['trials_vs_grid']:.0%} of the fixed grid)  "
                f"{row['endings']}"
            )
    if args.part in ("quickstart", "all"):
        print(
            "(b) quickstart on local Ray: its seed race against the fixed grid at its max_seeds", flush=True
        )
        print(json.dumps(part_quickstart(), indent=2))


if __name__ == "__main__":
    main()
