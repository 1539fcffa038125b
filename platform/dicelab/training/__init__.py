"""The trial: prepare inputs once, run one plain-PyTorch train/eval loop, report through reporters.

    inputs = prepare_inputs(config)
    result = run_trial(config, ConsoleReporter(), inputs=inputs)

Reporters: `dicelab.training.reporters` (ConsoleReporter, MlflowReporter); the contract is
`dicelab.training.reporter` (Reporter, Evaluation, TrialResult).
"""

from dicelab.training.inputs import TrialInputs, inputs_key, prepare_inputs
from dicelab.training.loop import run_trial
from dicelab.training.reporter import Evaluation, MultiReporter, Reporter, TrialResult

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
