"""The trial: prepare inputs once, run one plain-PyTorch train/eval loop, report through reporters.

    inputs = prepare_inputs(config)
    result = run_trial(config, ConsoleReporter(), inputs=inputs)

Reporters: `dicelab.training.reporters` (ConsoleReporter, MlflowReporter); the contract is
`dicelab.training.reporter` (Reporter, Evaluation, TrialResult).

The names are imported on first use (PEP 562): importing any `dicelab.training` module runs this file first,
and `dicelab trial --help` or a config error (`dicelab.cli.trial` needs `TrialResult`) must not wait for torch
and transformers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dicelab.training.inputs import TrialInputs, inputs_key, prepare_inputs
    from dicelab.training.loop import run_trial
    from dicelab.training.reporter import Evaluation, MultiReporter, Reporter, TrialResult

_HOMES = {
    "Evaluation": "reporter",
    "MultiReporter": "reporter",
    "Reporter": "reporter",
    "TrialInputs": "inputs",
    "TrialResult": "reporter",
    "inputs_key": "inputs",
    "prepare_inputs": "inputs",
    "run_trial": "loop",
}
__all__ = [
    "Evaluation",
    "MultiReporter",
    "Reporter",
    "TrialInputs",
    "TrialResult",
    "inputs_key",
    "prepare_inputs",
    "run_trial",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
