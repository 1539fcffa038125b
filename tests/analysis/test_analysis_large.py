"""10,000 trials: the benchmark script's writer puts them in the store in bulk and load_runs reads them back
(in the test's own process, which has MLflow and the analysis imported already; slow)."""

import re

import pytest

from .large_experiment import main


@pytest.mark.slow
def test_ten_thousand_trials_load_in_one_table(tmp_path, capsys):
    main([str(tmp_path / "mlflow.db"), "--trials", "10000"])
    out = capsys.readouterr().out
    # Every trial logs the whole flattened config (about 60 params; the count follows the config schema).
    loaded = re.search(r"load_runs: 10000 trials, (\d+) params each", out)
    assert loaded and int(loaded.group(1)) >= 50, out
    print(out)  # the timing, for `pytest -s`
