"""The Tune trainable's checkpoint handling, without a running Tune."""

from __future__ import annotations

import torch
from ray import tune

from dicelab.sweeps import trainable


def test_a_trial_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    torch.save({"progress": {"step": 7}}, tmp_path / trainable.STATE_FILE)
    monkeypatch.setattr(tune, "get_checkpoint", lambda: tune.Checkpoint.from_directory(str(tmp_path)))
    assert trainable._restored_state() == {"progress": {"step": 7}}


def test_a_checkpoint_deleted_under_a_killed_driver_starts_the_trial_over(tmp_path, monkeypatch):
    gone = tmp_path / "checkpoint_000001"  # Tune's saved state still names it; the directory is gone
    monkeypatch.setattr(tune, "get_checkpoint", lambda: tune.Checkpoint.from_directory(str(gone)))
    assert trainable._restored_state() is None


def test_no_checkpoint_no_state(monkeypatch):
    monkeypatch.setattr(tune, "get_checkpoint", lambda: None)
    assert trainable._restored_state() is None
