"""Last good copies of Tune's experiment state and their use before a resume (sweeps.tune_storage)."""

from __future__ import annotations

import contextlib
import errno
import json
import pickle
import subprocess
from pathlib import Path

import pytest
from ray.train._internal.session import _TrainingResult
from ray.tune import Checkpoint
from ray.tune.experiment import Trial

from dicelab.errors import DicelabError
from dicelab.sweeps.tune_storage import (
    LAST_GOOD,
    StateKeeper,
    drop_truncated_errors,
    forget_lost_checkpoints,
    is_complete,
    keep_good_copies,
    prepare_resume,
    repair,
)

STATE = "experiment_state-2026-11-25_10-00-00.json"
SEARCHER = "basic-variant-state-2026-11-25_10-00-00.json"  # a pickle, despite its name (Tune's)


def _experiment(directory: Path, trials: int) -> dict[str, bytes]:
    """An experiment directory with a JSON and a pickled state file (as Tune writes them)."""
    files = {
        STATE: json.dumps({"trial_data": [[f"trial {n}", {}] for n in range(trials)]}).encode(),
        SEARCHER: pickle.dumps({"points": list(range(trials))}),
    }
    directory.mkdir(exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return files


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("name", [STATE, SEARCHER])
def test_a_state_file_is_complete_only_when_it_reads_to_its_end(tmp_path, name):
    _experiment(tmp_path, 3)
    path = tmp_path / name
    assert is_complete(path)
    _truncate(path)
    assert not is_complete(path)
    path.write_bytes(b"")
    assert not is_complete(path)
    assert not is_complete(tmp_path / "missing.json")


def test_repair_puts_back_the_last_good_copy_of_a_file_cut_short(tmp_path):
    files = _experiment(tmp_path, 3)
    keep_good_copies(tmp_path)
    for name in files:
        _truncate(tmp_path / name)
    assert sorted(repair(tmp_path)) == sorted(files)
    assert {name: (tmp_path / name).read_bytes() for name in files} == files
    assert repair(tmp_path) == []  # nothing more to repair


def test_a_resume_is_refused_when_a_state_file_has_no_good_copy(tmp_path):
    _experiment(tmp_path, 3)
    keep_good_copies(tmp_path)
    _truncate(tmp_path / STATE)
    prepare_resume(tmp_path)  # repaired from its copy
    assert is_complete(tmp_path / STATE)
    (tmp_path / LAST_GOOD / SEARCHER).unlink()
    _truncate(tmp_path / SEARCHER)
    with pytest.raises(DicelabError, match=f"cut short \\({SEARCHER}\\) and has no good copy"):
        prepare_resume(tmp_path)


def test_a_newer_complete_version_replaces_the_copy_and_an_incomplete_one_never_does(tmp_path):
    _experiment(tmp_path, 2)
    keep_good_copies(tmp_path)
    newer = _experiment(tmp_path, 5)
    keep_good_copies(tmp_path)
    assert (tmp_path / LAST_GOOD / STATE).read_bytes() == newer[STATE]
    (tmp_path / STATE).write_bytes(newer[STATE][:10])  # Tune rewriting it, or a full disk
    keep_good_copies(tmp_path)
    assert (tmp_path / LAST_GOOD / STATE).read_bytes() == newer[STATE]


def test_repair_removes_a_trial_error_pickle_cut_short_and_keeps_a_whole_one(tmp_path):
    for trial, data in (("t1", pickle.dumps(ValueError("x"))), ("t2", pickle.dumps(ValueError("y"))[:5])):
        (tmp_path / trial).mkdir()
        (tmp_path / trial / "error.pkl").write_bytes(data)
    assert repair(tmp_path) == ["t2/error.pkl"]
    assert (tmp_path / "t1" / "error.pkl").exists() and not (tmp_path / "t2" / "error.pkl").exists()


def test_on_a_full_disk_the_last_good_copy_stays_whole(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: needs root")
    try:
        first = _experiment(disk, 10)
        keep_good_copies(disk)
        _experiment(disk, 5000)  # a bigger state: fits once, not twice
        with contextlib.suppress(OSError), (disk / "filler").open("wb") as out:
            out.write(b"\0" * (1 << 20))
        with pytest.raises(OSError) as raised:
            keep_good_copies(disk)
        assert raised.value.errno == errno.ENOSPC
        assert (disk / LAST_GOOD / STATE).read_bytes() == first[STATE]
        assert not list((disk / LAST_GOOD).glob(".*partial"))  # no partial copy left behind
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_an_unfinished_trial_whose_checkpoint_is_gone_starts_over(tmp_path):
    trials = []
    for name in ("kept", "lost", "finished"):
        (tmp_path / name).mkdir()
        trial = Trial("tune_trial", stub=True, trial_id=name)
        checkpoint = Checkpoint.from_directory(str(tmp_path / name))
        manager = trial.run_metadata.checkpoint_manager
        manager.register_checkpoint(_TrainingResult(checkpoint=checkpoint, metrics={"training_iteration": 2}))
        trials.append(trial)
    (tmp_path / "lost").rmdir()  # deleted by Tune after a newer one (num_to_keep=1)
    (tmp_path / "finished").rmdir()
    trials[2].set_status(Trial.TERMINATED)  # never started again: its checkpoint does not matter
    assert [trial.trial_id for trial in forget_lost_checkpoints(trials)] == ["lost"]
    assert [trial.checkpoint is not None for trial in trials] == [True, False, True]


def test_the_state_keeper_travels_with_the_experiment(tmp_path):
    keeper = StateKeeper(tmp_path, "sweep.yaml")
    keeper.full = True
    restored = pickle.loads(pickle.dumps(keeper))  # Tune pickles its callbacks into tuner.pkl
    assert (restored.directory, restored.config_path, restored.full) == (tmp_path, "sweep.yaml", False)


def test_drop_truncated_errors_is_what_a_finished_sweep_uses_before_reading_its_results_again(tmp_path):
    # the driver calls it when Tune's results fail on a pickled error a full disk cut short
    for trial, data in (("t1", pickle.dumps(ValueError("x"))[:3]), ("t2", pickle.dumps(ValueError("y")))):
        (tmp_path / trial).mkdir()
        (tmp_path / trial / "error.pkl").write_bytes(data)
        (tmp_path / trial / "error.txt").write_text("the text trace")
    assert drop_truncated_errors(tmp_path) == ["t1/error.pkl"]
    assert not (tmp_path / "t1" / "error.pkl").exists() and (tmp_path / "t1" / "error.txt").exists()
    assert drop_truncated_errors(tmp_path) == []  # nothing left to drop: the driver re-raises Tune's error
