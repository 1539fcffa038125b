"""A saved model travels: it carries dicelab's code, requires only what an index has, and loads and predicts
in a fresh virtual environment that holds its requirements (MLflow, torch, transformers, ...) but not
dicelab, as `mlflow models serve --env-manager virtualenv` or a colleague's machine would build it.

The environment is built once from the models' requirements.txt (as `make install` builds .venv: torch as pip
chooses it, the rest by uv, from uv's cache where `make install` left the same files) and kept in the
user's cache (`$XDG_CACHE_HOME/dicelab/test-venvs`) under a key of those requirements, so later runs reuse
it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pytest
import torch

from dicelab.config import ExperimentConfig
from dicelab.errors import DataError
from dicelab.models import save_model_dir
from dicelab.models.publishing import MODEL_REQUIREMENTS, code_paths, requirements
from dicelab.tasks import TASKS as TASKS_REGISTRY
from dicelab.training import TrialInputs, prepare_inputs

from .conftest import TASKS, trial_config, write_jsonl
from .test_models import GOLD_COLUMNS, assert_same_predictions

# Imported lazily by dicelab for a feature prediction never uses, and no dependency of dicelab's either.
OPTIONAL = {"spacy"}  # data augmentation's entity mentions (dicelab.data.resampling._mentions)

pytestmark = pytest.mark.slow  # a venv built on the first run (about half a minute), four models loaded there

# Run in the fresh environment: predict with each model, then list the third-party modules that the dicelab
# modules it imported import (at any depth of their code, lazily or not) and that the environment lacks.
PREDICT = r"""
import ast, importlib.util, json, sys
found = importlib.util.find_spec("dicelab")
import mlflow.pyfunc, pandas as pd
cases = json.loads(sys.argv[1])
out = {"dicelab_installed": found is not None, "predictions": {}}
for task, (model, inputs) in cases.items():
    loaded = mlflow.pyfunc.load_model(model)
    frame = pd.read_json(inputs, orient="records", lines=True)
    out["predictions"][task] = loaded.predict(frame).to_dict(orient="records")
out["dicelab_from"] = sys.modules["dicelab"].__file__
lacking = set()
for name, module in list(sys.modules.items()):
    if name.split(".")[0] != "dicelab" or not getattr(module, "__file__", None):
        continue
    for node in ast.walk(ast.parse(open(module.__file__, encoding="utf-8").read())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for top in {n.split(".")[0] for n in names}:
            if top not in sys.stdlib_module_names and top != "dicelab" and not importlib.util.find_spec(top):
                lacking.add(f"{top} (in {name})")
out["lacking"] = sorted(lacking)
print(json.dumps(out, default=str))
"""


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dicelab" / "test-venvs"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder at a time (two pytest workers may both need the environment)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build_venv(target: Path, requirements_file: Path) -> None:
    """A virtual environment at `target` with `requirements_file` installed and nothing of this environment's
    (no system site-packages). As `make install` does: torch from the files pip chooses (pip reads this
    machine's configuration, where the CPU build is; infra/scripts/install_torch.py), installed by uv, then
    the rest by uv, which resolves in seconds where pip takes minutes."""
    uv = Path(sys.executable).with_name("uv")
    uv_command = str(uv) if uv.is_file() else shutil.which("uv")
    if uv_command is None:  # the standard library's venv and pip: slower, same result
        subprocess.run([sys.executable, "-m", "venv", str(target)], check=True)
        pip = [str(target / "bin/python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "-r", str(requirements_file)], check=True)
        return
    python = str(target / "bin/python")
    subprocess.run([uv_command, "venv", "--quiet", "--python", sys.executable, str(target)], check=True)
    torch = next(line for line in requirements_file.read_text().split() if line.startswith("torch=="))
    report = target / "torch-report.json"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--ignore-installed", "--dry-run"]
    subprocess.run([*pip, "--report", str(report), torch], check=True, stderr=subprocess.DEVNULL)
    chosen = [
        f"{item['metadata']['name']} @ {item['download_info']['url']}"
        for item in json.loads(report.read_text())["install"]
    ]
    report.unlink()
    install = [uv_command, "pip", "install", "--quiet", "--python", python]
    subprocess.run([*install, "--no-deps", *chosen], check=True)
    subprocess.run([*install, "-r", str(requirements_file)], check=True)


@dataclass
class Portable:
    directory: Path  # the saved model
    inputs: TrialInputs
    config: ExperimentConfig
    state: dict[str, Any]


@pytest.fixture(scope="module")
def portables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Portable]:
    """task -> a model of its freshly built (untrained) weights, saved as a directory: what travels is the
    code and the files, which training does not change (tests/models/test_models.py compares trained models'
    predictions with their trials')."""
    root = tmp_path_factory.mktemp("portable")
    made = {}
    for task in TASKS:
        config = trial_config(task, root / "cache")
        inputs = prepare_inputs(config)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = TASKS_REGISTRY.get(task)().build_model(config, inputs.label_names, inputs.tokenizer)
        state = {key: value.detach().clone() for key, value in model.state_dict().items()}
        directory = save_model_dir(root / task, config, inputs.label_names, inputs.tokenizer_path, state)
        made[task] = Portable(directory, inputs, config, state)
    return made


@pytest.fixture(scope="module")
def model_dirs(portables: dict[str, Portable]) -> dict[str, Path]:
    return {task: portable.directory for task, portable in portables.items()}


@pytest.fixture(scope="module")
def fresh_python(model_dirs: dict[str, Path]) -> Path:
    """The interpreter of a virtual environment holding the models' requirements and nothing of dicelab's."""
    texts = {(directory / "requirements.txt").read_text() for directory in model_dirs.values()}
    assert len(texts) == 1, texts  # every task's model requires the same
    text = texts.pop()
    key = hashlib.sha256(f"{sys.version}\n{text}".encode()).hexdigest()[:16]
    target = _cache_root() / f"model-{key}"
    with _locked(_cache_root() / f"model-{key}.lock"):
        if not (target / ".complete").is_file():
            shutil.rmtree(target, ignore_errors=True)  # a build that was cut short
            requirements_file = _cache_root() / f"model-{key}.txt"
            requirements_file.write_text(text)
            _build_venv(target, requirements_file)
            (target / ".complete").touch()
    return target / "bin" / "python"


def test_a_saved_model_carries_dicelab_and_requires_only_what_an_index_has(model_dirs):
    for directory in model_dirs.values():
        required = (directory / "requirements.txt").read_text().split()
        assert [line.split("==")[0] for line in required] == list(MODEL_REQUIREMENTS)
        assert not any("+" in line for line in required)  # torch==2.13.0, not 2.13.0+cpu
        assert not any(line.startswith("dicelab") for line in required)
        assert (directory / "code" / "dicelab" / "models" / "pyfunc.py").is_file()
        assert not list((directory / "code").rglob("__pycache__"))


def test_a_saved_model_predicts_in_a_fresh_venv_without_dicelab(fresh_python, portables, tmp_path):
    """Every task's model, loaded from its directory alone with `mlflow.pyfunc.load_model`, predicts what
    it predicts here; dicelab is imported from the model's code/, and every third-party module that code
    imports is one the requirements installed."""
    where = "import site, sys; print(sys.prefix); print(*site.getsitepackages())"
    site = subprocess.run(
        [str(fresh_python), "-I", "-c", where], capture_output=True, text=True, check=True
    ).stdout.split()
    assert site[0] != sys.prefix
    for packages in map(Path, site[1:]):
        assert not list(packages.glob("dicelab*")) and not list(packages.glob("__editable__*dicelab*"))
    cases, expected = {}, {}
    for task, portable in portables.items():
        frame = portable.inputs.dev_frame
        unlabelled = frame.drop(columns=[c for c in GOLD_COLUMNS if c in frame.columns])
        cases[task] = [str(portable.directory), str(write_jsonl(tmp_path / f"{task}.jsonl", unlabelled))]
        here = mlflow.pyfunc.load_model(str(portable.directory)).predict(unlabelled)
        expected[task] = here.to_dict(orient="records")
    done = subprocess.run(
        [str(fresh_python), "-I", "-c", PREDICT, json.dumps(cases)],
        capture_output=True, text=True, cwd=tmp_path, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)},
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["dicelab_installed"] is False
    first = portables[next(iter(cases))].directory  # the first model loaded: dicelab is its code there
    assert Path(out["dicelab_from"]).is_relative_to(first / "code")
    assert [line for line in out["lacking"] if line.split()[0] not in OPTIONAL] == []
    for task, predicted in out["predictions"].items():
        assert_same_predictions(task, predicted, expected[task], gold=False)
    assert set(out["predictions"]) == set(TASKS)


def test_extra_code_and_requirements_travel_with_the_model_and_a_bad_path_is_one_line(portables, tmp_path):
    """A plugin's module file and package directory land beside dicelab in the model's code/ (on sys.path
    when it loads), its packages in the requirements; a missing path or a second `dicelab` is one line."""
    module = tmp_path / "my_loss.py"
    module.write_text("VALUE = 1\n")
    package = tmp_path / "my_tasks"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 2\n")
    pairs = portables["pair_classification"]
    directory = save_model_dir(
        tmp_path / "model", pairs.config, pairs.inputs.label_names, pairs.inputs.tokenizer_path, pairs.state,
        extra_code_paths=[module, package], extra_requirements=["timm==1.0"],
    )  # fmt: skip
    assert sorted(path.name for path in (directory / "code").iterdir()) == [
        "dicelab",
        "my_loss.py",
        "my_tasks",
    ]
    assert (directory / "code" / "my_tasks" / "__init__.py").read_text() == "VALUE = 2\n"
    assert (directory / "requirements.txt").read_text().split()[-1] == "timm==1.0"
    with pytest.raises(
        DataError, match=r"nowhere\.py: no such file or directory \(code for the saved model\)$"
    ):
        code_paths([tmp_path / "nowhere.py"])
    (tmp_path / "dicelab").mkdir()
    with pytest.raises(DataError, match=r"dicelab: the saved model already carries code named 'dicelab'"):
        code_paths([tmp_path / "dicelab"])
    assert requirements()[-1].startswith("tqdm==")
