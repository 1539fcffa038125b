"""Writing matplotlib figures as PNG files, here or in a drawing process beside this one.

Drawing is about half of a report's CPU time (12 figures at 1,000 trials: ~4.5 of ~9.5 CPU-seconds). A
`FigureWriter` hands each figure, pickled, to one process of its own that draws and writes it, while this
process goes on computing the next sections; `wait()` returns once every file is written. On one core, or
when the drawing process cannot start or dies, figures are drawn here instead: the same function either
way, so the pixels are the same.

This module imports only matplotlib and numpy (on first use): the drawing process starts from it alone,
without the analysis's MLflow, pandas or scipy.
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

if TYPE_CHECKING:
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

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
    """The drawing process (`python -m dicelab.figure_files`): it reads (pickled figure, path, dpi) messages
    on its stdin and answers each, in order, with None or the one-line error that drawing it raised.

    A process of its own rather than `multiprocessing`: spawn and forkserver run the caller's main script
    again in the child, which a user's script without a `__main__` guard does not survive."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dicelab.figure_files"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "MPLBACKEND": "Agg"},
        )
        self._writing = threading.Lock()
        self.claim = threading.Lock()  # held by the FigureWriter using this process (see FigureWriter)

    def submit(self, pickled: bytes, path: Path, dpi: int) -> None:
        assert self.process.stdin is not None
        with self._writing:
            _send(self.process.stdin, (pickled, str(path), dpi))

    def answer(self) -> str | None:
        assert self.process.stdout is not None
        return _receive(self.process.stdout)

    def stop(self) -> None:
        if self.process.stdin is not None:
            # the drawing process ends at the end of its input; a dead one's pipe may refuse what is left
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _shared_drawer() -> Drawer | None:
    """This process's one drawing process, started on first use and kept for later reports (its start,
    about a CPU-second, is paid once); None where drawing here is the better choice."""
    global _drawer, _drawer_failed
    with _lock:
        if _drawer is None and not _drawer_failed and _usable_cores() > 1:
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
                drawer.claim.release()

    def _draw_here(self, start: int) -> None:
        drawer, self._drawer = self._drawer, None
        if drawer is not None:
            drawer.claim.release()
        _give_up_drawer()
        for pickled, path in self._pending[start:]:
            write_png(pickle.loads(pickled), path, self.dpi)
        self._pending = []


def _serve() -> None:
    """The drawing process: answer each message of stdin, in order, until stdin ends."""
    import queue

    import matplotlib

    matplotlib.use("Agg")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, never into the answers
    requests: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def read() -> None:  # reads ahead, so that the caller's writes never wait for a drawing
        while True:
            try:
                requests.put(_receive(sys.stdin.buffer))
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
    _serve()
    # Every answer is flushed: the report's process waits for this one's end at its exit (Drawer.stop),
    # and Python's teardown of matplotlib's objects here would only add to that wait. What was printed
    # (sys.stdout writes to stderr's file here) is flushed first, as that teardown would have.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
