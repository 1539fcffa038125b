"""CPU-seconds of a command and of everything it starts, Ray's daemons and workers included.

    python benchmarks/cputree.py .venv/bin/python -m pytest -q tests/integration/test_sweep_local.py

Wall time says little on a machine other work shares; CPU time of the test's own processes says what a test
costs. Process trees do not hold it: `ray start` daemonises its raylet and workers, servers re-parent. So the
command runs with a unique environment variable, which every process it starts inherits, and every process
carrying it is sampled (user + system time from /proc, every 0.25 s; a process that lives less than that
between two samples is missed). Prints the heaviest processes, the CPU by kind of process (Ray workers, Ray's
daemons, dicelab commands, MLflow servers, ...) and `CPUTREE cpu=<s> wall=<s> rc=<code>` on stderr, and
exits with the command's code. Linux only. Heavy load still inflates polling loops somewhat:
compare figures taken at similar loads. benchmarks/results/cputree.md has the suite's figures.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
SHOWN = 8  # the heaviest processes printed
# (kind, substrings of a command line), first match wins: where a test suite's CPU goes, by what it starts
KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Ray worker", ("ray/_private/workers/default_worker.py",)),
    (
        "Ray daemon",
        (
            "ray/dashboard/",
            "ray/autoscaler/",
            "ray/_private/log_monitor.py",
            "ray/_private/runtime_env/agent/",
            "gcs_server",
            "raylet",
            "ray-dashboard-",
            "/bin/ray start",
        ),
    ),
    ("pytest-xdist worker", ("exec(eval(sys.stdin.readline()))",)),
    ("dicelab command", ("/bin/dicelab ", "-m dicelab.cli", "from dicelab.cli import")),
    ("MLflow server", ("mlflow server", "uvicorn", "gunicorn", "huey_consumer")),
    ("PostgreSQL", ("/postgresql/",)),
    ("multiprocessing helper", ("multiprocessing.forkserver", "multiprocessing.resource_tracker")),
)


def _stat(pid: str) -> tuple[str, float]:
    """(start time, CPU-seconds so far) of process `pid`."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[19], (int(fields[11]) + int(fields[12])) / TICKS


def _tagged(pid: str, needle: bytes) -> str | None:
    """The command line of `pid` when its environment carries `needle`, else None."""
    if needle not in Path(f"/proc/{pid}/environ").read_bytes():
        return None
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def kind(command: str) -> str:
    """The kind of process a command line belongs to (KINDS), else "other"."""
    for name, needles in KINDS:
        if any(needle in command for needle in needles):
            return name
    return "other"


def main(command: list[str]) -> int:
    tag = uuid.uuid4().hex
    needle = f"CPUTREE_TAG={tag}".encode()
    seen: dict[tuple[str, str], list[str | float] | None] = {}  # (pid, start) -> [command, cpu] or None

    def sample() -> None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                start, cpu = _stat(pid)
                key = (pid, start)
                if key not in seen:
                    cmd = _tagged(pid, needle)
                    seen[key] = None if cmd is None else [cmd, 0.0]
                if seen[key] is not None:
                    seen[key][1] = cpu
            except OSError:  # ended between listing and reading, or not ours to read
                continue

    started = time.monotonic()
    try:
        process = subprocess.Popen(command, env={**os.environ, "CPUTREE_TAG": tag})
    except OSError as error:  # not found, not executable: the command never ran
        print(f"cputree: cannot run {command[0]!r}: {error.strerror}", file=sys.stderr)
        return 2
    while process.poll() is None:
        sample()
        time.sleep(0.25)
    sample()
    rows = sorted(((float(v[1]), pid, str(v[0])) for (pid, _), v in seen.items() if v), reverse=True)
    for cpu, pid, cmd in rows[:SHOWN]:
        print(f"  {cpu:7.1f} {pid:>7} {cmd[:150]}", file=sys.stderr)
    by_kind: dict[str, list[float]] = {}
    for cpu, _, cmd in rows:
        spent = by_kind.setdefault(kind(cmd), [0.0, 0])
        spent[0] += cpu
        spent[1] += 1
    print("  by kind: CPU-s, processes", file=sys.stderr)
    for name, (cpu, count) in sorted(by_kind.items(), key=lambda item: -item[1][0]):
        print(f"  {cpu:7.1f} {count:5.0f}  {name}", file=sys.stderr)
    total = sum(row[0] for row in rows)
    wall = time.monotonic() - started
    print(f"CPUTREE cpu={total:.1f} wall={wall:.1f} rc={process.returncode}", file=sys.stderr)
    return process.returncode


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        print("usage: python benchmarks/cputree.py COMMAND [ARG ...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
