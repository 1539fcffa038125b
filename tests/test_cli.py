"""The `dicelab` entry point: help, sub-command dispatch and one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dicelab.cli import dispatch

DICELAB = [sys.executable, "-m", "dicelab.cli"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DICELAB, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_help_lists_every_command() -> None:
    result = run("--help")
    assert result.returncode == 0
    for command in ("trial", "sweep", "submit", "resample", "analyze", "ui", "losses", "validate"):
        assert command in result.stdout


def test_every_command_is_one_module_of_the_cli_package() -> None:
    package = Path(dispatch.__file__).parent
    modules = {path.stem for path in package.glob("*.py")} - {"__init__", "__main__", "dispatch"}
    assert {name: module for name, (module, _) in dispatch.COMMANDS.items()} == {
        name: f"dicelab.cli.{name}" for name in sorted(modules)
    }


def test_validate_accepts_a_good_config(tmp_path: Path) -> None:
    config = tmp_path / "ok.yaml"
    config.write_text("name: ok\nloss: {name: dsc, alpha: 0.5}\n")
    result = run("validate", str(config))
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_bad_config_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("name: bad\nloss: {name: tversky, alpha: 0.3, beta: 0.7}\n")
    result = run("validate", str(config), "--set", "train.lr=0.1")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "'train.lr'" in lines[0] and "learning_rate" in lines[0]


def test_output_into_a_pipe_whose_reader_left_ends_quietly(tmp_path: Path, monkeypatch, capsys) -> None:
    """`dicelab analyze ... | head`: the reader goes before the command's last line; exit 141 as a command
    stopped by SIGPIPE, no traceback (Python ignores SIGPIPE: the write fails with EPIPE)."""
    config = tmp_path / "ok.yaml"
    config.write_text("name: ok\n")
    reader, writer = os.pipe()
    os.close(reader)  # gone before the command writes a byte
    with os.fdopen(writer, "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        assert dispatch.main(["validate", str(config)]) == 141
        monkeypatch.undo()
    assert capsys.readouterr().err == ""


def test_a_broken_pipe_of_a_connection_is_not_taken_for_the_consoles(monkeypatch, capsys) -> None:
    import dicelab.cli.validate as command

    def run(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")  # e.g. a tracking server's socket

    monkeypatch.setattr(command, "run", run)
    with pytest.raises(BrokenPipeError):
        dispatch.main(["validate", "x.yaml"])


def test_unreadable_config_exit_code_2(tmp_path: Path) -> None:
    result = run("validate", str(tmp_path / "missing.yaml"))
    assert result.returncode == 2
    assert "missing.yaml" in result.stderr and "cannot read" in result.stderr


# `dicelab X --help` and a config error must not wait for the heavy frameworks (MLflow alone costs seconds).
HEAVY = ("torch", "ray", "transformers", "mlflow")
PROBE = f"""
import json, sys
from dicelab.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print(json.dumps({{"code": code, "heavy": [name for name in {HEAVY!r} if name in sys.modules]}}))
"""
COMMANDS = tuple(dispatch.COMMANDS)


def probe(*args: str, cwd: Path | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "stderr": done.stderr}


@pytest.mark.parametrize("command", COMMANDS)
def test_help_imports_no_heavy_framework(command: str) -> None:
    seen = probe(command, "--help")
    assert seen["code"] == 0 and seen["heavy"] == [], seen


@pytest.mark.parametrize(
    "command", [("trial",), ("sweep",), ("validate",), ("submit", "--address", "http://127.0.0.1:9")]
)
def test_a_config_error_comes_before_any_heavy_framework(command: tuple[str, ...], tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("name: bad\nsearch: {algorithm: grid, space: {loss.name: {grid: [ce]}}}\n")
    seen = probe(command[0], str(config), *command[1:], "--set", "train.lr=0.1", cwd=tmp_path)
    assert seen["code"] == 2, seen
    assert "'train.lr' is not allowed" in seen["stderr"] and len(seen["stderr"].strip().splitlines()) == 1
    assert seen["heavy"] == [], seen


def test_usr2_prints_every_threads_stack_and_the_command_goes_on() -> None:
    """What a user (or a test that timed out) does to a driver that seems stuck: `kill -USR2 PID`."""
    code = (
        "import threading, time\n"
        "from dicelab.cli import dispatch\n"
        "dispatch.enable_stack_dumps()\n"
        "threading.Thread(target=time.sleep, args=(60,), name='beside', daemon=True).start()\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGUSR2)
        time.sleep(1)
        assert process.poll() is None  # the dump does not end it
    finally:
        process.kill()
        _, stderr = process.communicate()
    assert stderr.count("(most recent call first)") == 2, stderr  # both threads
    assert 'File "<string>", line' in stderr, stderr  # where the main thread is


def test_stack_dumps_are_skipped_where_stderr_is_no_file() -> None:
    """A caller that captures `main`'s output in memory (a notebook, a test) gets no error from them."""
    import contextlib
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        dispatch.enable_stack_dumps()


def test_ui_of_an_unknown_experiment_is_one_line_before_the_ui_starts(tmp_path: Path, capsys) -> None:
    """Nothing says the UI is up (nor starts it) when --experiment names no experiment of the store."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(uri).create_experiment("exp")
    capsys.readouterr()  # MLflow's lines about creating the store
    code = dispatch.main(["ui", "--tracking-uri", uri, "--experiment", "nope", "--port", "1"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"dicelab ui: error: no experiment 'nope' in {uri} (available: Default, exp)"
    ]


@pytest.mark.parametrize("command", ["validate", "sweep"])
def test_a_set_of_a_swept_key_is_one_line_exit_2_before_anything_runs(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--set loss.name=dsc` on a sweep of ce and dice would run ce and dice: refused, not ignored
    config = tmp_path / "sweep.yaml"
    config.write_text("name: s\nsearch: {space: {loss.name: {grid: [ce, dice]}}}\n")
    monkeypatch.chdir(tmp_path)
    assert dispatch.main([command, str(config), "--set", "loss.name=dsc"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--set loss.name: the search sets it in every trial" in lines[0], lines
    assert "search.space.loss.name" in lines[0]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["sweep.yaml"]  # nothing written
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tracking-uri", "sqlite:///{tmp}/typo/mlflow.db"], "no MLflow store at {tmp}/typo/mlflow.db"),
        ([], "no MLflow store at {tmp}/.dicelab/mlflow.db"),  # a directory where nothing ran
        (["--port", "70000"], "argument --port: 70000 is not a port (1 to 65535)"),
    ],
)
def test_ui_refuses_a_missing_store_or_a_port_out_of_range_in_one_line(
    args: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    args = [arg.format(tmp=tmp_path) for arg in args]
    try:
        code = dispatch.main(["ui", *args])
    except SystemExit as stop:  # argparse's own error
        code = stop.code
    assert code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("dicelab ui: error:") and message.format(tmp=tmp_path) in error, error
    assert list(tmp_path.iterdir()) == []  # no empty store created


def test_the_program_exits_with_mains_code_through_pythons_exit(monkeypatch) -> None:
    monkeypatch.setattr(dispatch, "main", lambda: 3)
    with pytest.raises(SystemExit) as stop:
        dispatch.program()
    assert stop.value.code == 3


def test_the_installed_command_and_python_m_end_through_the_program() -> None:
    from importlib.metadata import entry_points

    (script,) = entry_points(group="console_scripts", name="dicelab")
    assert script.value == "dicelab.cli:program"
    main_module = Path(dispatch.__file__).with_name("__main__.py").read_text(encoding="utf-8")
    assert "program()" in main_module
