"""Work done in a forked child of this process while this process goes on with its own.

A report keeps both cores of a 2-core machine busy with two children forked from the analysis: one computes
the importance (Optuna's PED-ANOVA and fANOVA, about a third of the analysis at 1,000 trials) while this
process computes the other sections, and one draws the figures (`figure_files`). A fork rather than a new
process: the child starts with the analysis's imports already done (matplotlib alone takes about half a
CPU-second to import again) and its data in memory.

A child is forked only where that is safe and pays: on Linux, with more than one usable core, while this
process runs a single thread. A fork copies the calling thread alone, so a lock that another thread held
(Ray's gRPC, a notebook's kernel, a progress display) would stay held in the child forever. Elsewhere the
callers do the same work another way (here, or in a process of its own), with the same result.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
logger = logging.getLogger(__name__)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """True where a forked child may work beside this process (see the module's docstring)."""
    return sys.platform.startswith("linux") and threading.active_count() == 1 and usable_cores() > 1


def fork(work: Callable[[], object]) -> int:
    """Run `work()` in a forked child and return the child's process id. The child ends when `work` returns
    or raises, without this process's exit handlers and without writing out what this process left in its
    stdout and stderr buffers; what the child prints goes to the same stderr."""
    pid = os.fork()
    if pid != 0:
        return pid
    # The inherited stream objects stay referenced until os._exit: collecting them would flush the parent's
    # buffered text a second time.
    _inherited = (sys.stdout, sys.stderr)
    code = 1
    try:
        sys.stdout = sys.stderr = open(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115
        work()
        code = 0
    except BaseException:
        logger.debug("forked child %d failed", os.getpid(), exc_info=True)
    finally:
        os._exit(code)


class Forked(Generic[T]):
    """`function(*args)`, computed in a forked child when `fork` and `can_fork()`, else here on the first
    `result()`; here too when the child failed or died, so that an error is raised here. `close()` stops a
    child whose result is no longer wanted."""

    def __init__(self, function: Callable[..., T], *args: object, fork: bool = True) -> None:
        self._call = lambda: function(*args)
        self._pid: int | None = None
        self._pipe: int | None = None
        self._done = False
        self._value: T | None = None
        if fork and can_fork():
            self._start()

    @property
    def forked(self) -> bool:
        """Whether a child computes (or computed) the result."""
        return self._pid is not None

    def _start(self) -> None:
        read, write = os.pipe()

        def child() -> None:
            os.close(read)
            with open(write, "wb") as out:
                out.write(pickle.dumps(self._call(), protocol=pickle.HIGHEST_PROTOCOL))

        self._pid = fork(child)
        os.close(write)
        self._pipe = read

    def result(self) -> T:
        if not self._done:
            payload = self._received() if self._pipe is not None else b""
            self._value = pickle.loads(payload) if payload else self._call()
            self._done = True
        return self._value  # type: ignore[return-value]

    def _received(self) -> bytes:
        """The child's pickled result; empty when it failed or died."""
        assert self._pipe is not None and self._pid is not None
        with open(self._pipe, "rb") as pipe:
            self._pipe = None
            payload = pipe.read()
        _reap(self._pid)
        if not payload:
            logger.debug("the forked child %d gave no result: computed here", self._pid)
        return payload

    def close(self) -> None:
        """Stop the child if its result was not read (an error elsewhere ended the work)."""
        if self._pipe is None or self._pid is None:
            return
        os.close(self._pipe)
        self._pipe = None
        stop_child(self._pid, timeout_s=0)


def stop_child(pid: int, timeout_s: float) -> None:
    """Reap the forked child `pid`, killing it if it has not ended within `timeout_s` (0: at once)."""
    deadline = time.monotonic() + timeout_s
    with contextlib.suppress(ChildProcessError):  # reaped already (a SIGCHLD handler, say)
        while time.monotonic() < deadline:
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                return
            time.sleep(0.01)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # reaped already (a SIGCHLD handler, say)
        os.waitpid(pid, 0)
