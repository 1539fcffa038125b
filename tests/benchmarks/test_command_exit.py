"""benchmarks/command_exit.py: both ways of ending a command timed in the same run, and a command that
fails stops it in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "command_exit.py"


def test_it_times_both_ways_and_gives_their_ratio():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--pairs", "2", "--", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["command"] == ["dicelab", "--version"]
    for way in ("python's exit", "the program"):
        assert len(result[way]["walls"]) == 2 and result[way]["wall_s"] > 0, result
    ratio = result["the program"]["wall_s"] / result["python's exit"]["wall_s"]
    assert result["wall_ratio"] == round(ratio, 2)


def test_a_failing_command_is_one_line_exit_2():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--pairs", "1", "--", "validate", "/no/such/config.yaml"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == "", done
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert line.startswith("command_exit.py: `dicelab validate /no/such/config.yaml` failed (exit 2): "), line
    assert "config.yaml" in line.split("failed (exit 2): ", 1)[1]
