"""benchmarks/gpu_check.py in its tiny CPU mode (--dry-run): every section runs (Trainer at its defaults and
best settings, dicelab's trial, precisions, a packed trial in its own process) and the table is written;
the check's import chain stays free of MLflow and Ray (the GPU machine it is carried to has neither)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_check.py"
# Runs the check as `python benchmarks/gpu_check.py --dry-run` would, then looks at what it imported.
RUNNER = """
import runpy, sys
sys.argv = [{script!r}, "--dry-run", "--out", {out!r}]
runpy.run_path({script!r}, run_name="__main__")
heavy = sorted(name for name in ("mlflow", "ray", "optuna") if name in sys.modules)
print("imported:", heavy)
"""


@pytest.mark.slow
def test_the_dry_run_measures_every_section_and_writes_one_table(tmp_path):
    out = tmp_path / "check"
    completed = subprocess.run(
        [sys.executable, "-c", RUNNER.format(script=str(SCRIPT), out=str(out))],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip().endswith("imported: []")

    payload = json.loads((out / "gpu_check.json").read_text())
    rows = {(row["section"], row["run"], row["precision"]): row for row in payload["rows"]}
    assert all(not row["note"].startswith("failed") for row in payload["rows"]), payload["rows"]
    trainer_default = rows[("trainer", "HF Trainer, defaults", "fp32")]
    trainer_best = rows[("trainer", "HF Trainer, best settings", "fp32")]
    dicelab = rows[("trainer", "dicelab run_trial", "auto (fp32)")]
    for row in (trainer_default, trainer_best, dicelab):
        assert row["samples_per_s"] > 0
    assert trainer_default["vs_trainer"] == 1.0
    assert dicelab["vs_trainer"] == pytest.approx(dicelab["samples_per_s"] / trainer_default["samples_per_s"])
    assert trainer_best["note"] == "group_by_length"
    assert rows[("precision", "dicelab run_trial", "fp32")]["samples_per_s"] > 0
    for half in ("bf16", "fp16"):
        assert rows[("precision", "dicelab run_trial", half)]["note"] == "skipped: CUDA only"
    switches = {row["run"]: row for row in payload["rows"] if row["section"] == "switches"}
    assert switches["train.compile=true"]["note"].startswith("skipped")  # Inductor on CPU: minutes
    for label in ("train.tf32=false", "eager attention (not SDPA)", "a host sync every step"):
        assert switches[label]["samples_per_s"] > 0 and "x dicelab defaults" in switches[label]["note"]
    packed = rows[("packing", "1 trial in 1 process", "fp32")]
    assert packed["epochs_per_hour"] > 0 and "outcome completed" in packed["note"]
    assert packed["peak_mib"] is None  # no CUDA: no GPU memory to report

    table = (out / "gpu_check.md").read_text()
    assert table.startswith("GPU check, ") and "| section | run | model | precision | samples/s |" in table
    assert table.count("\n| ") == len(payload["rows"]) + 1  # header + one line per row
    assert "| section | run |" in completed.stdout  # also printed
