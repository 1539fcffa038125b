"""Tune's experiment state survives a full disk under its storage (`search.storage`).

Tune rewrites its experiment-level files (experiment_state-*.json, the searcher's and callbacks' state,
tuner.pkl) in place, from its driver's staging copy: on a full disk the rewrite truncates them, and a sweep
whose experiment state cannot be read cannot be resumed ("Failed to restore the run state"). So, while the
sweep runs, every complete version of those files is copied to LAST_GOOD beside them, atomically (written
to a temporary name, then renamed): a copy that fails for want of space leaves the previous good one. Before
a resume, a file that cannot be read is put back from its last good copy, and a trial's pickled error that
was cut short is removed (Tune then reads the error's text file instead).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import pickle
import pickletools
import shutil
import time
from pathlib import Path
from typing import Any

from pyarrow.fs import FileType
from ray.tune import Callback
from ray.tune.experiment import Trial
from rich.console import Console

from dicelab.errors import DicelabError
from dicelab.sweeps import ray_adapter

LAST_GOOD = ".last_good"
TRIAL_ERROR_PICKLE = ray_adapter.TRIAL_ERROR_PICKLE  # Tune's pickled error of a trial, in its directory
# at least this long between copies (Tune may save every second): no need to chase each save
COPY_EVERY_S = 2.0
NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device"
PICKLE_PROTOCOL = pickle.PROTO  # the first byte of a pickle of protocol 2 or later

_log = logging.getLogger(__name__)


def state_files(directory: Path) -> list[Path]:
    """The experiment-level files Tune restores a sweep from (the ones it syncs down on restore); hidden
    ones are temporary files of an atomic save, not state."""
    return sorted(
        path
        for path in directory.iterdir()
        if path.is_file()
        and path.suffix in ray_adapter.EXPERIMENT_STATE_SUFFIXES
        and not path.name.startswith(".")
    )


def is_complete(path: Path) -> bool:
    """Whether a state file reads to its end: a pickle stream that reaches its STOP opcode (checked without
    unpickling anything), else JSON that parses. By content, not by name: Tune's searcher state
    (basic-variant-state-*.json) is a pickle."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if data.startswith(PICKLE_PROTOCOL):
        try:
            last = None
            for opcode, _, _ in pickletools.genops(data):
                last = opcode.name
        except (ValueError, EOFError):
            return False
        return last == "STOP"
    try:
        json.loads(data)
    except ValueError:  # an empty file too
        return False
    return True


def _copy_atomically(source: Path, target: Path) -> None:
    """`target` is `source`'s content whole, or left as it was (a failed copy leaves no partial file)."""
    partial = target.with_name(f".{target.name}.partial")
    try:
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def keep_good_copies(directory: Path) -> None:
    """Copy each complete state file that changed since its last good copy to LAST_GOOD.

    Raises OSError (ENOSPC on a full disk) after trying every file."""
    keep = directory / LAST_GOOD
    keep.mkdir(exist_ok=True)
    failed: OSError | None = None
    for path in state_files(directory):
        copy = keep / path.name
        try:
            modified = path.stat().st_mtime_ns  # before reading: a later rewrite is copied next round
            if copy.exists() and copy.stat().st_mtime_ns == modified:
                continue
            # Tune may be rewriting it right now: an incomplete file is skipped, the next round copies it
            if is_complete(path):
                _copy_atomically(path, copy)
                os.utime(copy, ns=(modified, modified))
        except OSError as error:
            failed = error
    if failed is not None:
        raise failed


def repair(directory: Path) -> list[str]:
    """Before a resume: put back each state file that cannot be read from its last good copy, and remove
    trial error pickles cut short (Tune fails on them when it collects the results). Returns what was
    repaired, as paths relative to `directory`."""
    repaired = []
    keep = directory / LAST_GOOD
    if keep.is_dir():
        for copy in state_files(keep):
            live = directory / copy.name
            if not is_complete(live) and is_complete(copy):
                _copy_atomically(copy, live)
                repaired.append(copy.name)
    return repaired + drop_truncated_errors(directory)


def drop_truncated_errors(directory: Path) -> list[str]:
    """Remove the trials' pickled errors that a full disk cut short (Tune fails on them when it collects the
    results; the trial's text trace beside it stays, and Tune reads that instead). Returns what was removed,
    as paths relative to `directory`."""
    dropped = []
    for pickled in ray_adapter.trial_error_pickles(directory):
        if not is_complete(pickled):
            pickled.unlink()
            dropped.append(str(pickled.relative_to(directory)))
    return dropped


def prepare_resume(directory: Path) -> None:
    """Repair Tune's state before it restores the sweep. A state file still unreadable (cut short before
    any good copy was kept) is refused: Tune would silently start the sweep over with new trials, and new
    runs beside the old ones."""
    repaired = repair(directory)
    if repaired:
        _log.warning(
            "Tune's state in %s was cut short (a full disk?): restored %s", directory, ", ".join(repaired)
        )
    damaged = [path.name for path in state_files(directory) if not is_complete(path)]
    if damaged:
        raise DicelabError(
            f"--resume: Tune's state in {directory} is cut short ({', '.join(damaged)}) and has no good "
            "copy: start the sweep again without --resume"
        )


def forget_lost_checkpoints(trials: list[Trial]) -> list[Trial]:
    """Unfinished trials whose latest checkpoint is gone lose it, so that they start over (in their own
    runs) instead of failing on every retry ("Could not recover from checkpoint as it does not exist").

    A put-back state may be a second or two older than the sweep: Tune has since saved a newer checkpoint
    and deleted the one it names (num_to_keep=1). The same happens when a driver is killed between the two.
    Returns the trials changed."""
    changed = []
    for trial in trials:
        checkpoint = trial.checkpoint
        if checkpoint is None or trial.status == Trial.TERMINATED:
            continue
        if checkpoint.filesystem.get_file_info(checkpoint.path).type == FileType.NotFound:
            ray_adapter.forget_checkpoint(trial)
            changed.append(trial)
    return changed


class StateKeeper(Callback):
    """Keeps last good copies of the experiment state while the sweep runs, says clearly when Tune's
    storage ran out of space (trials then fail with "No space left on device"), and on a resume lets a
    trial whose checkpoint is gone start over (`forget_lost_checkpoints`).

    copy_every_s: the least time between two copies. Each copy reads and writes every trial's state, so a
    large sweep passes a period that grows with its trials (`tuning.build_tuner`: as Tune's own saves), which
    keeps the copies' cost linear in the sweep's size; a full disk then leaves a last good copy up to that
    old for `--resume`."""

    def __init__(self, directory: Path, config_path: str, copy_every_s: float = COPY_EVERY_S):
        self.directory, self.config_path = directory, config_path
        self.copy_every_s = max(COPY_EVERY_S, copy_every_s)
        self._copied_at = 0.0
        self._checked = False  # the trials' checkpoints, before the first step starts any trial
        self.full = False

    def __getstate__(self) -> dict[str, Any]:  # pickled with the experiment: a resumed sweep starts afresh
        return {
            "directory": self.directory,
            "config_path": self.config_path,
            "copy_every_s": self.copy_every_s,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        fresh = StateKeeper(state["directory"], state["config_path"], state.get("copy_every_s", COPY_EVERY_S))
        self.__dict__.update(fresh.__dict__)

    def on_step_begin(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        if self._checked:
            return
        self._checked = True
        for trial in forget_lost_checkpoints(trials):
            _log.warning("trial %s: its checkpoint is gone, it starts over in its run", trial.trial_id)

    def _keep(self) -> None:
        self._copied_at = time.monotonic()
        try:
            keep_good_copies(self.directory)
        except OSError as error:
            self.full = self.full or error.errno == errno.ENOSPC
            _log.debug("could not copy Tune's state of %s: %s", self.directory, error)

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        if time.monotonic() - self._copied_at >= self.copy_every_s:
            self._keep()

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        path = Path(trial.error_file) if trial.error_file else None
        if path is not None and path.is_file() and NO_SPACE in path.read_text(errors="replace"):
            self.full = True

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        # after Tune's last save: what it wrote there last, and what a full disk cut short
        self._keep()
        with contextlib.suppress(OSError):
            repair(self.directory)
        if self.full:
            Console(stderr=True).print(
                f"Tune's storage is full ({NO_SPACE}: {self.directory}): free space there, then continue "
                f"with: dicelab sweep {self.config_path} --resume --retry-failed",
                highlight=False,
                soft_wrap=True,
            )
