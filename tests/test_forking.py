"""dicelab.forking: a result computed in a forked child is the one computed here; a child that fails or dies
leaves the work to this process (an error is raised here); an unread child is stopped; a child never writes
out this process's buffered output; and no child is forked where a fork is unsafe.

The tests that fork from this process patch `can_fork` (pytest-xdist runs threads here, which makes it
false); their children only compute and answer. The end-to-end test runs a single-threaded script."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from dicelab import forking
from dicelab.forking import Forked


@pytest.fixture
def forkable(monkeypatch):
    monkeypatch.setattr(forking, "can_fork", lambda: True)


def _pid_and_table(rows: int) -> tuple[int, dict[str, list[int]]]:
    return os.getpid(), {"squares": [index * index for index in range(rows)]}


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_child_computes_the_result_this_process_would(forkable):
    forked = Forked(_pid_and_table, 1000)
    assert forked.forked
    pid, table = forked.result()
    assert pid not in (os.getpid(), None) and table == _pid_and_table(1000)[1]
    assert forked.result() is forked.result()  # read once
    assert _gone(pid)  # reaped


def test_without_a_fork_it_is_computed_here_on_first_use(monkeypatch):
    monkeypatch.setattr(forking, "can_fork", lambda: False)
    calls: list[int] = []
    forked = Forked(lambda: calls.append(os.getpid()) or len(calls))
    assert not forked.forked and calls == []  # nothing computed yet
    assert forked.result() == 1 and forked.result() == 1 and calls == [os.getpid()]


def test_fork_false_computes_here(forkable):
    forked = Forked(_pid_and_table, 3, fork=False)
    assert not forked.forked and forked.result()[0] == os.getpid()


def test_a_child_that_fails_leaves_the_work_here(forkable):
    parent = os.getpid()

    def fails_in_a_child() -> int:
        if os.getpid() != parent:
            raise MemoryError("the child ran out")
        return 7

    assert Forked(fails_in_a_child).result() == 7


def test_an_error_is_raised_here(forkable):
    def broken() -> None:
        raise ValueError("no importance for this data")

    forked = Forked(broken)
    assert forked.forked
    with pytest.raises(ValueError, match="no importance for this data"):
        forked.result()


def test_a_child_that_dies_leaves_the_work_here(forkable):
    parent = os.getpid()

    def dies_in_a_child() -> int:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return 11

    assert Forked(dies_in_a_child).result() == 11


def test_close_stops_an_unread_child(forkable):
    ready_read, ready_write = os.pipe()

    def waits_forever() -> None:
        os.write(ready_write, b"x")  # in the child: it runs
        threading.Event().wait()

    forked = Forked(waits_forever)
    os.close(ready_write)
    assert os.read(ready_read, 1) == b"x"
    os.close(ready_read)
    pid = forked._pid
    assert pid is not None
    forked.close()
    assert _gone(pid)
    forked.close()  # twice is fine


def test_a_second_thread_means_no_fork():
    started, stop = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: (started.set(), stop.wait()))
    thread.start()
    started.wait()
    try:
        assert not forking.can_fork()
    finally:
        stop.set()
        thread.join()


def test_a_single_threaded_script_forks_and_its_buffered_output_is_written_once(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, sys
            from dicelab import forking
            from dicelab.forking import Forked
            assert forking.can_fork()
            print("buffered before the fork")  # to a pipe: still in this process's buffer
            sys.stderr.write("an unfinished line on stderr ")
            forked = Forked(lambda: (print("printed by the child"), os.getpid())[1])
            assert forked.forked and forked.result() != os.getpid()
            print("after")
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "buffered before the fork\nafter\n"
    assert done.stderr.count("an unfinished line on stderr") == 1, done.stderr
    assert "printed by the child" in done.stderr  # the child prints to stderr
