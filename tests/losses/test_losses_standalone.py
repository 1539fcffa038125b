"""The losses on their own: `import dicelab.losses` needs torch and nothing heavier, and the examples of
docs/losses.md (a plain PyTorch loop, the Hugging Face Trainer's `compute_loss_func`) run as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "losses.md"
HEAVY = ("ray", "mlflow", "transformers", "datasets", "pandas", "pyarrow", "sklearn", "scipy", "optuna")


def page_examples() -> dict[str, str]:
    return dict(
        re.findall(r'^```python title="([^"]+)"\n(.*?)^```$', PAGE.read_text(), re.MULTILINE | re.DOTALL)
    )


def test_importing_the_losses_pulls_in_torch_and_nothing_heavier() -> None:
    code = (
        "import sys, json\nimport dicelab.losses\n"
        f"print(json.dumps([name for name in {HEAVY!r} if name in sys.modules] + ['torch' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert json.loads(done.stdout) == [True]  # no heavy framework, and torch


def run_example(name: str, tmp_path: Path) -> str:
    script = tmp_path / name
    script.write_text(page_examples()[name])
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_plain_pytorch_loop_of_the_losses_page_trains(tmp_path: Path) -> None:
    printed = run_example("plain_pytorch.py", tmp_path)
    loss = float(re.search(r"dsc loss after training: ([0-9.]+)", printed).group(1))
    assert 0.0 < loss < 0.6, printed  # an untrained model starts near 1 - (set-level dice of a coin flip)


@pytest.mark.slow
def test_the_hugging_face_trainer_example_of_the_losses_page_trains_with_a_dicelab_loss(
    tmp_path: Path,
) -> None:
    printed = run_example("hf_trainer.py", tmp_path)
    loss = float(re.search(r"train loss: ([0-9.]+)", printed).group(1))
    assert 0.0 < loss < 1.0, printed  # the dice loss's range, as computed by the Trainer's steps
