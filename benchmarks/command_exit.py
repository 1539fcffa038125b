"""A `dicelab` command ending through its program (`dicelab.cli.program`: exit handlers, then the process
ends) against the same command ending through Python's own exit (`sys.exit(main())`: exit handlers, then
the teardown of every module and object), alternating, in fresh processes.

    .venv/bin/python benchmarks/command_exit.py                                   # validate the quickstart
    .venv/bin/python benchmarks/command_exit.py --pairs 8 -- analyze --experiment quickstart --no-log

Per way: the wall seconds and the CPU seconds of the command and its children (medians), and the ratio of
the program's to Python's exit (below 1: the program ends sooner). The commands' output is discarded; a
command that fails stops the benchmark with its last line, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

WAYS = {
    "python's exit": "import sys; from dicelab.cli.dispatch import main; sys.exit(main())",
    "the program": "from dicelab.cli.dispatch import program; program()",
}
DEFAULT_COMMAND = ["validate", str(Path(__file__).resolve().parents[1] / "experiments" / "quickstart.yaml")]


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6, help="alternating runs of each way (default 6)")
    parser.add_argument("command", nargs="*", help="the dicelab command's arguments (after --)")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    command = args.command or DEFAULT_COMMAND
    times: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for pair in range(args.pairs):
        order = list(WAYS) if pair % 2 == 0 else list(reversed(WAYS))  # ABBA: drift falls on both
        for way in order:
            try:
                times[way].append(timed(WAYS[way], command))
            except CommandFailed as failed:
                print(f"command_exit.py: {failed}", file=sys.stderr)
                return 2
        print(f"pair {pair + 1}/{args.pairs} done", file=sys.stderr)
    medians = {
        way: {
            "wall_s": round(statistics.median(wall for wall, _ in runs), 2),
            "cpu_s": round(statistics.median(cpu for _, cpu in runs), 2),
            "walls": [round(wall, 2) for wall, _ in runs],
        }
        for way, runs in times.items()
    }
    baseline, program = medians["python's exit"], medians["the program"]
    result = {
        "command": ["dicelab", *command],
        **medians,
        "wall_ratio": round(program["wall_s"] / baseline["wall_s"], 2),
        "cpu_ratio": round(program["cpu_s"] / baseline["cpu_s"], 2),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
