"""The driver's start of a private local Ray: a start that times out (a machine too busy for Ray's fixed
waits) is tried once more, and a second time-out is one line, not Ray's traceback. Ray's own start is
replaced by one that fails as Ray does: making a real node miss its waits would mean loading the machine."""

from __future__ import annotations

import io

import pytest
import ray
import yaml
from rich.console import Console

from dicelab.sweeps import driver

TIMED_OUT = "The current node timed out during startup. This could happen because some of the raylet failed."


@pytest.fixture
def starts(monkeypatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    return calls


def _failing(calls: list[str], errors: list[Exception]):
    def init(**_: object) -> None:
        calls.append("init")
        if errors:
            raise errors.pop(0)

    return init


def test_a_start_that_times_out_is_tried_once_more(monkeypatch, starts):
    monkeypatch.setattr(ray, "init", _failing(starts, [RuntimeError(TIMED_OUT)]))
    driver._start_local_ray({}, {})
    assert starts == ["init", "shutdown", "init"]


def test_two_time_outs_are_one_line_exit_1(monkeypatch, starts):
    monkeypatch.setattr(ray, "init", _failing(starts, [RuntimeError(TIMED_OUT), RuntimeError(TIMED_OUT)]))
    with pytest.raises(driver.LocalRayError) as raised:
        driver._start_local_ray({}, {})
    message = str(raised.value)
    assert len(message.splitlines()) == 1 and "local Ray did not start (2 tries)" in message
    assert "--address auto" in message and raised.value.exit_code == 1
    assert raised.value.__suppress_context__  # the CLI prints the line, not Ray's traceback
    assert starts == ["init", "shutdown", "init", "shutdown"]


def test_a_ray_that_refuses_the_system_config_gets_a_plain_start(monkeypatch):
    given: list[dict] = []

    def init(**kwargs: object) -> str:
        system = kwargs["_system_config"]
        given.append(system)
        if system:
            raise ValueError("unknown _system_config key enable_worker_prestart")
        return "context"

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    assert driver._start_local_ray({"enable_worker_prestart": False}, {}) == "context"
    assert given == [{"enable_worker_prestart": False}, {}]


def test_any_other_start_error_is_raised_as_it_is(monkeypatch, starts):
    monkeypatch.setattr(ray, "init", _failing(starts, [ValueError("bad argument")]))
    with pytest.raises(ValueError, match="bad argument"):
        driver._start_local_ray({}, {})
    assert starts == ["init"]


@pytest.mark.parametrize(
    ("search", "expected"),
    [
        ({"seeds": [1]}, "1 trial (1 configuration x 1 seed)"),
        (
            {"seeds": [1, 2], "space": {"loss.name": {"grid": ["ce", "dice"]}}},
            "4 trials (2 configurations x 2 seeds)",
        ),
        ({"space": {"loss.name": {"grid": ["ce"]}}}, "1 trial (1 configuration)"),
    ],
)
def test_the_header_counts_in_words_that_agree(tmp_path, search, expected):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "search": search}))
    options = driver.SweepOptions(config=str(path))
    config, plan = driver.load_sweep_config(options)
    console = Console(file=io.StringIO(), width=400)
    driver._print_header(console, options, config, plan, "sqlite:///x.db")
    assert f"sweep s: {expected}, grid search" in console.file.getvalue()
