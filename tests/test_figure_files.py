"""Figures written in the drawing process (a forked child, or `python -m dicelab.figure_files`) are the
PNGs drawn here, byte for byte; a drawing error is raised naming the file once the others are written; a
drawing process that dies leaves its figures to this process; a second writer at the same time draws its
own; and a user's script without a `__main__` guard is not run again by the drawing process's start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from matplotlib.collections import LineCollection
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from dicelab import figure_files, forking
from dicelab.figure_files import FigureWriter, write_png

DPI = 40  # small PNGs: the bytes are compared, not looked at


@pytest.fixture(autouse=True)
def own_drawer():
    """Each test starts without a drawing process and leaves none behind."""
    figure_files.stop_drawer()
    figure_files._drawer_failed = False
    yield
    figure_files.stop_drawer()
    figure_files._drawer_failed = False


@pytest.fixture(params=["forked", "process"])
def two_cores(request, monkeypatch):
    """A drawing process is started whatever cores this machine has (it is skipped on one core): a child
    forked from this one, or a process of its own (where forking is not safe, as in this test's process,
    which runs pytest-xdist's threads: the forked child here only draws and answers)."""
    monkeypatch.setattr(forking, "usable_cores", lambda: 2)
    monkeypatch.setattr(forking, "can_fork", lambda: request.param == "forked")
    return request.param


def _figure(seed: int) -> Figure:
    """Lines, a band, dots, a colour-mapped line collection, a log axis, a legend and text."""
    rng = np.random.default_rng(seed)
    figure = Figure(figsize=(5, 3))
    top, bottom = figure.subplots(2, 1)
    x = np.linspace(1e-3, 1.0, 40)
    y = np.sin(x * 6) + rng.normal(0, 0.1, x.size)
    top.plot(x, y, label="mean", marker="o", markersize=3)
    top.fill_between(x, y - 0.2, y + 0.2, alpha=0.3, label="interval")
    top.scatter(x, y + rng.normal(0, 0.2, x.size), s=8, label="seeds")
    top.set_xscale("log")
    top.legend(loc="upper right", title="seed")
    segments = [np.column_stack([np.arange(5), rng.normal(size=5)]) for _ in range(12)]
    lines = LineCollection(segments, cmap="viridis", norm=Normalize(0, 11))
    lines.set_array(np.arange(12))
    bottom.add_collection(lines)
    bottom.autoscale()
    bottom.annotate("best", xy=(2, 0), xytext=(3, 1), arrowprops={"arrowstyle": "->"})
    figure.suptitle(f"figure {seed}")
    return figure


def test_figures_written_by_the_drawing_process_are_the_pngs_drawn_here(tmp_path, two_cores):
    writer = FigureWriter(DPI)
    there = [writer.save(_figure(seed), tmp_path / "there" / f"{seed}.png") for seed in range(3)]
    assert figure_files._drawer is not None  # they went to the drawing process
    writer.wait()
    for seed, path in enumerate(there):
        here = write_png(_figure(seed), tmp_path / "here" / f"{seed}.png", DPI)
        assert path.read_bytes() == here.read_bytes(), seed


def test_one_core_draws_here_and_starts_no_process(tmp_path, monkeypatch):
    monkeypatch.setattr(forking, "usable_cores", lambda: 1)
    writer = FigureWriter(DPI)
    path = writer.save(_figure(0), tmp_path / "a.png")
    assert path.stat().st_size > 0 and figure_files._drawer is None  # written before save returned
    writer.wait()


def test_a_drawing_error_names_the_file_after_the_others_are_written(tmp_path, two_cores):
    writer = FigureWriter(DPI)
    writer.save(_figure(0), tmp_path / "first.png")
    broken = _figure(1)
    broken.axes[0].set_title(r"$\frac{$")  # mathtext that cannot be parsed: drawing it raises
    writer.save(broken, tmp_path / "broken.png")
    writer.save(_figure(2), tmp_path / "last.png")
    with pytest.raises(RuntimeError, match=r"^broken\.png: \w+"):
        writer.wait()
    assert (tmp_path / "first.png").stat().st_size > 0 and (tmp_path / "last.png").stat().st_size > 0
    # the drawing process still serves the next report
    again = FigureWriter(DPI)
    again.save(_figure(3), tmp_path / "next.png")
    again.wait()
    assert (tmp_path / "next.png").stat().st_size > 0


def test_a_drawing_process_that_dies_leaves_its_figures_to_this_one(tmp_path, two_cores):
    writer = FigureWriter(DPI)
    writer.save(_figure(0), tmp_path / "0.png")
    drawer = figure_files._drawer
    assert drawer is not None
    assert (drawer.process is None) == (two_cores == "forked")
    os.kill(drawer.pid, signal.SIGKILL)
    if drawer.process is not None:
        drawer.process.wait(timeout=30)
    else:
        os.waitpid(drawer.pid, 0)  # reaped here: the drawer's stop finds it gone
    for seed in (1, 2):  # submitted to a dead process: written here, now or in wait()
        writer.save(_figure(seed), tmp_path / f"{seed}.png")
    writer.wait()
    for seed in range(3):
        here = write_png(_figure(seed), tmp_path / "here" / f"{seed}.png", DPI)
        assert (tmp_path / f"{seed}.png").read_bytes() == here.read_bytes(), seed
    assert figure_files._drawer is None and figure_files._drawer_failed  # not started again


def test_drain_returns_once_nothing_more_is_written(tmp_path, two_cores):
    writer = FigureWriter(DPI)
    paths = [writer.save(_figure(seed), tmp_path / f"{seed}.png") for seed in range(3)]
    writer.drain()
    sizes = [path.stat().st_size for path in paths]
    assert all(sizes)
    drawer = figure_files._drawer
    if two_cores == "forked":  # ended with the report: it holds this process's memory as it was at the fork
        assert drawer is None
        return
    assert drawer is not None and drawer.claim.acquire(blocking=False)  # released for the next writer
    drawer.claim.release()


def test_a_forked_drawing_process_ends_with_its_report_and_the_next_forks_anew(tmp_path, monkeypatch):
    monkeypatch.setattr(forking, "can_fork", lambda: True)
    pids = []
    for report in range(2):
        writer = FigureWriter(DPI)
        writer.save(_figure(report), tmp_path / f"{report}.png")
        drawer = figure_files._drawer
        assert drawer is not None and drawer.forked
        pids.append(drawer.pid)
        writer.wait()
        assert figure_files._drawer is None
        with pytest.raises(ChildProcessError):
            os.waitpid(drawer.pid, os.WNOHANG)  # ended and reaped
    assert pids[0] != pids[1]


def test_a_second_writer_meanwhile_draws_its_own(tmp_path, two_cores):
    first = FigureWriter(DPI)
    first.save(_figure(0), tmp_path / "first.png")  # holds the drawing process until its wait
    written: list[bool] = []

    def other() -> None:
        second = FigureWriter(DPI)
        path = second.save(_figure(1), tmp_path / "second.png")
        written.append(path.stat().st_size > 0)  # drawn here, before save returned
        second.wait()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(timeout=60)
    first.wait()
    assert written == [True]


def test_a_script_without_a_main_guard_runs_once(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            from matplotlib.figure import Figure
            from dicelab import figure_files, forking
            forking.usable_cores = lambda: 2
            print("script ran", flush=True)
            writer = figure_files.FigureWriter(100)
            for index in range(2):
                figure = Figure()
                figure.subplots().plot([0, 1], [index, 1])
                writer.save(figure, Path({str(tmp_path)!r}) / f"{{index}}.png")
            assert figure_files._drawer is not None
            writer.wait()
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("script ran") == 1, done.stdout
    assert all((tmp_path / f"{index}.png").stat().st_size > 0 for index in range(2))
