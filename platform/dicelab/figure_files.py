"""Writing matplotlib figures as PNG files, here or in a drawing process beside this one.

Drawing is a large part of a report's CPU time (its 12 figures at 1,000 trials). A `FigureWriter` hands
each figure, pickled, to one drawing process that draws and writes it, while this process goes on computing
the next sections; `wait()` returns once every file is written. The drawing process is a child forked from
this one where that is safe (`dicelab.forking`: it has matplotlib imported already), else a process of its
own. On one core, or when the drawing process cannot start or dies, figures are drawn here instead: the
same function either way, so the pixels are the same.

This module imports only matplotlib and numpy (on first use): a drawing process of its own starts from it
alone, without the analysis's MLflow, pandas or scipy.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dicelab import forking

if TYPE_CHECKING:
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

STOP_TIMEOUT_S = 10  # a drawing process still busy this long after its input ended is killed
_HEADER = struct.Struct("!Q")  # each message: its length, then a pickle
_lock = threading.Lock()
_drawer: Drawer | None = None
_drawer_failed = False  # a drawing process that could not start (or died) is not tried again here


def write_png(figure: Figure, path: Path, dpi: int) -> Path:
    """Write `figure` as a PNG at `dpi`, in one draw.

    `savefig` draws a figure with a layout engine twice: once without output to place the axes, then for
    real. Agg's own draw places them and renders in one pass; its pixels are written as they are."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.image import imsave

    path.parent.mkdir(parents=True, exist_ok=True)
    figure.set_dpi(dpi)
    canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else FigureCanvasAgg(figure)
    canvas.draw()
    imsave(path, np.asarray(canvas.buffer_rgba()), format="png", dpi=dpi)
    return path


def _send(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the drawing process ended")
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the drawing process ended")
    return pickle.loads(data)


class Drawer:
    """The drawing process: it reads (pickled figure, path, dpi) messages and answers each, in order, with
    None or the one-line error that drawing it raised.

    A child forked from this process where that is safe (`dicelab.forking`): it has matplotlib imported
    already, and it ends with the report that forked it. Elsewhere a process of its own (`python -m
    dicelab.figure_files`, over its stdin and stdout), kept for later reports, rather than `multiprocessing`:
    spawn and forkserver run the caller's main script again in the child, which a user's script without a
    `__main__` guard does not survive."""

    def __init__(self) -> None:
        self._writing = threading.Lock()
        self.claim = threading.Lock()  # held by the FigureWriter using this process (see FigureWriter)
        self.process: subprocess.Popen[bytes] | None = None
        self.pid: int
        self.requests: IO[bytes]
        self.answers: IO[bytes]
        if forking.can_fork():
            self._fork()
        else:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "dicelab.figure_files"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "MPLBACKEND": "Agg"},
            )
            assert self.process.stdin is not None and self.process.stdout is not None
            self.pid, self.requests, self.answers = self.process.pid, self.process.stdin, self.process.stdout

    def _fork(self) -> None:
        requests_in, requests_out = os.pipe()
        answers_in, answers_out = os.pipe()

        def child() -> None:
            os.close(requests_out)  # else its own copy would keep the requests from ever ending
            os.close(answers_in)
            with open(requests_in, "rb") as requests, open(answers_out, "wb") as answers:
                _serve(requests, answers)

        self.pid = forking.fork(child)
        os.close(requests_in)
        os.close(answers_out)
        self.requests, self.answers = open(requests_out, "wb"), open(answers_in, "rb")  # noqa: SIM115

    @property
    def forked(self) -> bool:
        return self.process is None

    def submit(self, pickled: bytes, path: Path, dpi: int) -> None:
        with self._writing:
            _send(self.requests, (pickled, str(path), dpi))

    def answer(self) -> str | None:
        return _receive(self.answers)

    def stop(self) -> None:
        # the drawing process ends at the end of its input; a dead one's pipe may refuse what is left
        with contextlib.suppress(OSError):
            self.requests.close()
        if self.process is not None:
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        else:
            forking.stop_child(self.pid, STOP_TIMEOUT_S)
        self.answers.close()


def _shared_drawer() -> Drawer | None:
    """This process's one drawing process, started on first use and kept for later reports (its start,
    about a CPU-second, is paid once); None where drawing here is the better choice."""
    global _drawer, _drawer_failed
    with _lock:
        if _drawer is None and not _drawer_failed and forking.usable_cores() > 1:
            try:
                _drawer = Drawer()
                atexit.register(stop_drawer)
            except OSError as error:
                logger.debug("figures are drawn in this process: %s", error)
                _drawer_failed = True
        return _drawer


def _give_up_drawer() -> None:
    global _drawer, _drawer_failed
    with _lock:
        dead, _drawer, _drawer_failed = _drawer, None, True
    if dead is not None:
        dead.stop()


def _stop_if_shared(drawer: Drawer) -> None:
    global _drawer
    with _lock:
        shared = _drawer is drawer
        if shared:
            _drawer = None
    if shared:
        drawer.stop()


def stop_drawer() -> None:
    """Stop this process's drawing process, if it runs (at exit; a later report starts another)."""
    global _drawer
    with _lock:
        drawer, _drawer = _drawer, None
    if drawer is not None:
        drawer.stop()


class FigureWriter:
    """Writes figures as PNG files, in the drawing process where there is one. `save` returns at once with
    the path the file will have; `wait` returns when every file is there, raising the first drawing error.

    One writer at a time uses the process's drawer (a second report built meanwhile, in another thread,
    draws its figures itself), from its first `save` to the end of its `wait` or `drain`."""

    def __init__(self, dpi: int) -> None:
        self.dpi = dpi
        self._drawer: Drawer | None = None
        self._pending: list[tuple[bytes, Path]] = []

    def _claimed_drawer(self) -> Drawer | None:
        if self._drawer is None:
            drawer = _shared_drawer()
            if drawer is not None and drawer.claim.acquire(blocking=False):
                self._drawer = drawer
        return self._drawer

    def save(self, figure: Figure, path: Path) -> Path:
        drawer = self._claimed_drawer()
        if drawer is None:
            return write_png(figure, path, self.dpi)
        path.parent.mkdir(parents=True, exist_ok=True)
        pickled = pickle.dumps(figure, protocol=pickle.HIGHEST_PROTOCOL)
        self._pending.append((pickled, path))
        try:
            drawer.submit(pickled, path, self.dpi)
        except OSError:  # the drawing process died: this figure and the others not yet answered, here
            self._draw_here(0)
        return path

    def wait(self) -> None:
        """Return when every figure saved so far is written; raise the first drawing error (after the others
        ended, so that nothing writes into a folder the caller then removes)."""
        errors = list(self._answers())
        if errors:
            raise RuntimeError(errors[0])

    def drain(self) -> None:
        """Wait for every figure saved so far, ignoring their errors (a report that failed elsewhere)."""
        for _ in self._answers():
            pass

    def _answers(self) -> Iterator[str]:
        """The drawing errors of the figures saved so far, as they are answered (in order)."""
        drawer, self._drawer = self._drawer, None
        try:
            for index, (_, path) in enumerate(self._pending):
                if drawer is None:
                    break
                try:
                    answer = drawer.answer()
                except (OSError, EOFError):  # died (killed, out of memory): the rest are drawn here
                    self._draw_here(index)
                    break
                if answer is not None:
                    yield f"{path.name}: {answer}"
        finally:
            self._pending = []
            if drawer is not None:
                if drawer.forked:
                    # Not kept for a later report: a forked child holds on to this process's memory as it was
                    # at the fork, and forking another costs little.
                    _stop_if_shared(drawer)
                drawer.claim.release()

    def _draw_here(self, start: int) -> None:
        drawer, self._drawer = self._drawer, None
        if drawer is not None:
            drawer.claim.release()
        _give_up_drawer()
        for pickled, path in self._pending[start:]:
            write_png(pickle.loads(pickled), path, self.dpi)
        self._pending = []


def _serve(requests_stream: IO[bytes], answers: IO[bytes]) -> None:
    """The drawing process: answer each message of `requests_stream`, in order, until it ends."""
    import queue

    import matplotlib

    matplotlib.use("Agg")
    requests: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def read() -> None:  # reads ahead, so that the caller's writes never wait for a drawing
        while True:
            try:
                requests.put(_receive(requests_stream))
            except EOFError:
                requests.put(None)
                return

    threading.Thread(target=read, daemon=True).start()
    while (request := requests.get()) is not None:
        pickled, path, dpi = request
        try:
            write_png(pickle.loads(pickled), Path(path), dpi)
            answer = None
        except Exception as error:  # answered to the caller, which raises it
            answer = f"{type(error).__name__}: {error}".splitlines()[0]
        _send(answers, answer)


if __name__ == "__main__":
    _answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the answers
    _serve(sys.stdin.buffer, _answers)
    # Every answer is flushed: the report's process waits for this one's end at its exit (Drawer.stop),
    # and Python's teardown of matplotlib's objects here would only add to that wait. What was printed
    # (sys.stdout writes to stderr's file here) is flushed first, as that teardown would have.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
