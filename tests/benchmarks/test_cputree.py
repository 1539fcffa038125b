"""benchmarks/cputree.py: the CPU of a command and of what it starts, a daemonised grandchild included (as
`ray start` leaves its raylet), and the command's exit code passed on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cputree.py"
# Each process idles a second after spinning: the tool samples every 0.25 s, so the spin's last CPU is seen
# before the process ends even on a loaded machine (what a process burns in its last 0.25 s can be missed).
SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\ntime.sleep(1)\n"
# The command spins 0.6 CPU-s and starts a child in a session of its own (as `ray start`'s daemons are)
# that spins 0.8: a walk of the command's process group or session would miss the child, the tag does not.
COMMAND = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {SPIN.format(s=0.8)!r}], start_new_session=True)
exec({SPIN.format(s=0.6)!r})
child.wait()
sys.exit(3)
"""


def test_it_counts_a_detached_grandchild_and_passes_the_exit_code_on():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), sys.executable, "-c", COMMAND],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    total = float(re.search(r"CPUTREE cpu=([\d.]+) wall=[\d.]+ rc=3", done.stderr).group(1))
    assert 1.4 <= total <= 4.0, done.stderr  # 0.6 + 0.8 spun, plus two interpreters' start-up
    assert done.stderr.count(sys.executable) >= 2, done.stderr  # both processes listed


def test_without_a_command_it_says_how_to_use_it():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "usage: python benchmarks/cputree.py COMMAND" in done.stderr
