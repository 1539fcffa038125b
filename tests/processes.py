"""Processes a test starts in a session of its own, so that exactly their process group is stopped (never a
process found by name): a server, a Ray node, a dicelab command."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Process:
    """A process started in its own session; stop() signals exactly its process group."""

    name: str
    popen: subprocess.Popen
    log: Path
    # `ray start --block` stops its node itself, draining it first through the head's GCS (Ray 2.60): a
    # SIGTERM to the whole group stops the GCS too, and the head's `ray start` then waits its 30 s drain
    # timeout on a GCS that is gone. Signalled alone, it drains and stops its node in a few seconds.
    leader_first: bool = False

    def dump_stacks(self) -> None:
        """Where a dicelab command that seems stuck waits: every thread's stack into its log (SIGUSR2,
        `dicelab.cli.dispatch.enable_stack_dumps`; other programs would die of that signal)."""
        dump_stacks(self.popen, self.name)

    def kill(self) -> None:
        """SIGKILL the process group at once (a crash, not a shutdown)."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.popen.wait(timeout=60)

    def stop(self) -> None:
        """SIGTERM (the leader first where it stops its group itself), then SIGKILL to what is left."""
        group = self.popen.pid  # started in a session of its own: the group outlives an exited leader
        if self.leader_first and self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=20)
            if self.popen.poll() is not None:  # stopped: only strays of its group could be left
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
                return
        for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                return
            try:
                self.popen.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                continue


def dump_stacks(popen: subprocess.Popen, name: str) -> None:
    """SIGUSR2 to a running dicelab command (it prints every thread's stack to its stderr), and a moment
    for it to do so: called before a command that timed out is killed."""
    if name.startswith("dicelab") and popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(popen.pid, signal.SIGUSR2)
        time.sleep(2)


def start(name: str, args: list[str], env: dict[str, str], directory: Path) -> Process:
    """Start a process in its own session (so its whole group can be signalled), logging to directory."""
    log = directory / f"{name}.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            args,
            env=env,
            cwd=directory,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return Process(name, popen, log)
