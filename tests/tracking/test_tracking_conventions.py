"""How costs are written (`dicelab.tracking.conventions`): the report and a sweep's closing lines share it."""

from __future__ import annotations

from dicelab.tracking.conventions import resource_hours


def test_one_hour_is_singular():
    assert resource_hours(1.04, "CPU") == "1 CPU-hour"
    assert resource_hours(1.5, "GPU") == "1.5 GPU-hours" and resource_hours(0.061, "CPU") == "0.061 CPU-hours"
