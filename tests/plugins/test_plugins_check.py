"""`dicelab plugins check`: the contract suites over a plugin's entries, a line per check, exit 1 on a
failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.plugins.conftest import poly1_source, write

from dicelab.cli import dispatch
from dicelab.contracts._running import run_checks
from dicelab.contracts.families import FamilyContract
from dicelab.tasks.families import FAMILIES

pytestmark = pytest.mark.usefixtures("isolated_plugins")

# Plain cross entropy that forgets `ignore_index` (ignored positions count as class 0 ... or crash) and whose
# binary branch returns NaN for a confident logit.
BROKEN = """
import torch
import torch.nn.functional as F

from dicelab.losses import LOSSES, Loss


@LOSSES.register("careless")
class CarelessLoss(Loss):
    def forward(self, logits, target):
        if logits.dim() == 2 and logits.shape[-1] > 1:
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1).clamp(min=0))
        p = torch.sigmoid(logits.reshape(-1).float())
        y = target.reshape(-1).float().clamp(min=0)
        return -(y * p.log() + (1 - y) * (1 - p).log()).mean()
"""


def test_a_correct_plugin_passes_every_check(tmp_path: Path, capsys) -> None:
    plugin = write(tmp_path / "poly1.py", poly1_source())
    assert dispatch.main(["plugins", "check", str(plugin)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 10 and all(line.startswith("pass  loss 'poly1': ") for line in lines), lines


def test_a_broken_plugin_names_each_failing_contract_and_exits_1(tmp_path: Path, capsys) -> None:
    plugin = write(tmp_path / "careless.py", BROKEN)
    assert dispatch.main(["plugins", "check", str(plugin)]) == 1
    lines = capsys.readouterr().out.splitlines()
    failed = {line.split(": ")[1] for line in lines if line.startswith("FAIL")}
    assert {
        "ignored positions change nothing",
        "values and gradients stay finite for logits up to 100",
    } <= failed, lines
    assert "pass  loss 'careless': is registered" in lines
    assert all(line.count("\n") == 0 and ": " in line for line in lines)


def test_a_plugin_that_registers_nothing_fails_and_one_that_cannot_load_is_exit_2(
    tmp_path: Path, capsys
) -> None:
    empty = write(tmp_path / "empty_plugin.py", "VALUE = 1\n")
    assert dispatch.main(["plugins", "check", str(empty)]) == 1
    assert capsys.readouterr().out.startswith("FAIL  plugin empty_plugin: registers a loss")
    assert dispatch.main(["plugins", "check", str(tmp_path / "gone.py")]) == 2
    assert (
        capsys.readouterr().err
        == f"dicelab plugins: error: plugin {tmp_path}/gone.py: no such file or directory\n"
    )


@pytest.mark.parametrize("name", FAMILIES.names())
def test_every_built_in_family_passes_the_family_contract(name: str) -> None:
    results = run_checks(FamilyContract(name), name)
    assert results and all(result.passed for result in results), [r.line() for r in results]
