"""benchmarks/report_forks.py: both ways of running a report's command timed in the same run, the
baseline really without forked children, and a command that fails stops it in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPT = BENCHMARKS / "report_forks.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=180)


def test_it_times_both_ways_and_gives_their_ratio():
    done = _run("--pairs", "1", "--", "analyze", "--help")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["command"] == ["dicelab", "analyze", "--help"]
    for way in ("no forks", "forked"):
        assert len(result[way]["walls"]) == 1 and result[way]["wall_s"] > 0, result
    assert result["wall_ratio"] == round(result["forked"]["wall_s"] / result["no forks"]["wall_s"], 2)


def test_the_baseline_forks_nothing():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import report_forks
    finally:
        sys.path.remove(str(BENCHMARKS))
    code = f"{report_forks.NO_FORKS}; from dicelab import forking; print(forking.can_fork())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
    plain = subprocess.run(
        [sys.executable, "-c", "from dicelab import forking; print(forking.can_fork())"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plain.stdout.strip() == "True", "this machine cannot fork: the comparison would be void"


def test_a_failing_command_is_one_line_exit_2(tmp_path):
    store = f"sqlite:///{tmp_path / 'empty.db'}"
    done = _run("--pairs", "1", "--", "analyze", "--experiment", "none", "--tracking-uri", store)
    assert done.returncode == 2 and done.stdout == "", done
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert line.startswith("report_forks.py: `dicelab analyze --experiment none"), line


def test_only_an_analyze_command_is_taken():
    done = _run("--", "validate", "x.yaml")
    assert done.returncode == 2 and "the command must be `analyze ...`, got `validate`" in done.stderr
