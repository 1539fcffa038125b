"""Two ways of running the same `dicelab` command, alternated ABBA in fresh processes: what
`analyze_ab.py` uses.

A way is the Python code that runs the command (`python -c CODE ARGS...`). Per way: the wall seconds and
the CPU seconds of the process and its children (medians), and the ratio of the second way to the first
(below 1: the second is faster). The commands' output is discarded; a command that fails stops the
benchmark with its last line (`CommandFailed`).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from typing import Any


class CommandFailed(Exception):
    pass


def timed(code: str, command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (its own and its children's) of one `python -c code COMMAND`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *command], capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CommandFailed(f"`dicelab {' '.join(command)}` failed (exit {done.returncode}): {last}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def arguments(
    doc: str, command_help: str, *, required: bool
) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """A benchmark's `--pairs N -- COMMAND...` (the parser too, for its own checks of the command)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6, help="alternating runs of each way (default 6)")
    parser.add_argument("command", nargs="+" if required else "*", help=command_help)
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    return parser, args


def print_comparison(script: str, ways: dict[str, str], command: list[str], pairs: int) -> int:
    """`alternate`'s result as JSON on stdout, 0; a command that failed: one line naming `script` on stderr,
    2."""
    try:
        result = alternate(ways, command, pairs)
    except CommandFailed as failed:
        print(f"{script}: {failed}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2))
    return 0


def alternate(ways: dict[str, str], command: list[str], pairs: int) -> dict[str, Any]:
    """Each of the two `ways` run `pairs` times, ABBA (drift falls on both); their medians and the ratios
    of the second way to the first."""
    baseline, candidate = ways
    times: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    for pair in range(pairs):
        order = [baseline, candidate] if pair % 2 == 0 else [candidate, baseline]
        for way in order:
            times[way].append(timed(ways[way], command))
        print(f"pair {pair + 1}/{pairs} done", file=sys.stderr)
    medians = {
        way: {
            "wall_s": round(statistics.median(wall for wall, _ in runs), 2),
            "cpu_s": round(statistics.median(cpu for _, cpu in runs), 2),
            "walls": [round(wall, 2) for wall, _ in runs],
        }
        for way, runs in times.items()
    }
    return {
        "command": ["dicelab", *command],
        **medians,
        "wall_ratio": round(medians[candidate]["wall_s"] / medians[baseline]["wall_s"], 2),
        "cpu_ratio": round(medians[candidate]["cpu_s"] / medians[baseline]["cpu_s"], 2),
    }
