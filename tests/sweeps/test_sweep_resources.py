"""`search.resources`: one device per trial (fractions pack trials on a GPU), checked before Ray starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from dicelab.sweeps.schema import Resources

PROBE = """
import json, sys
from dicelab.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
started = "ray" in sys.modules and sys.modules["ray"].is_initialized()
print(json.dumps({"code": code, "ray_started": started}))
"""


@pytest.mark.parametrize("gpu", [0, 0.25, 0.5, 1])
def test_no_gpu_a_fraction_or_one_gpu_per_trial_is_accepted(gpu):
    assert Resources(gpu=gpu).gpu == gpu


@pytest.mark.parametrize("gpu", [1.5, 2, 8])
def test_more_than_one_gpu_per_trial_is_refused_with_the_reason(gpu):
    with pytest.raises(ValidationError, match="one device") as caught:
        Resources(gpu=gpu)
    assert caught.value.errors()[0]["loc"] == ("gpu",)


def test_dicelab_sweep_with_two_gpus_per_trial_is_one_line_exit_2_before_ray(tmp_path: Path):
    config = tmp_path / "two-gpus.yaml"
    search = {"resources": {"gpu": 2}, "space": {"loss.name": {"grid": ["ce", "dice"]}}}
    config.write_text(yaml.safe_dump({"name": "two-gpus", "search": search}))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "sweep", str(config)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"code": 2, "ray_started": False}, done.stderr  # refused before Ray starts
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "search.resources.gpu" in lines[0] and "one device" in lines[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["two-gpus.yaml"]  # nothing written
