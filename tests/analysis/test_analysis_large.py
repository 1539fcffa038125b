"""10,000 trials: the benchmark script writes them in bulk and loads them back (about 2 minutes: slow)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("large_experiment.py")


@pytest.mark.slow
def test_ten_thousand_trials_load_in_one_table(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "mlflow.db"), "--trials", "10000"],
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    # Every trial logs the whole flattened config (about 60 params; the count follows the config schema).
    loaded = re.search(r"load_runs: 10000 trials, (\d+) params each", result.stdout)
    assert loaded and int(loaded.group(1)) >= 50, result.stdout
    print(result.stdout)  # the timing, for `pytest -s`
