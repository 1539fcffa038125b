"""benchmarks/analyze_ab.py: both ways of reading a database URI timed in the same run, the ratio of the
SQL way to the public client's, the result written where asked; a failing command is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "analyze_ab.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_it_times_both_ways_and_writes_their_ratio(tmp_path):
    out = tmp_path / "ab.json"
    done = _run("--compare", "sql", "--pairs", "1", "--result", str(out), "--", "analyze", "--help")
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result == json.loads(done.stdout)
    assert result["command"] == ["dicelab", "analyze", "--help"]
    for way in ("public client", "sql"):
        assert len(result[way]["walls"]) == 1 and result[way]["wall_s"] > 0, result
    assert result["wall_ratio"] == round(result["sql"]["wall_s"] / result["public client"]["wall_s"], 2)
    assert result["reproduce"].startswith("benchmarks/analyze_ab.py --compare sql --pairs 1 -- analyze")


def test_a_failing_command_is_one_line_exit_2(tmp_path):
    store = f"sqlite:///{tmp_path / 'none.db'}"
    out = tmp_path / "ab.json"
    command = ["analyze", "--experiment", "x", "--tracking-uri", store]
    done = _run("--compare", "sql", "--pairs", "1", "--result", str(out), "--", *command)
    assert done.returncode == 2 and done.stdout == "" and not out.exists(), done
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert line.startswith("analyze_ab.py: `dicelab analyze --experiment x"), line
