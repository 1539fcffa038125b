"""Reporters of the trial loop: console progress and MLflow runs (the Ray Tune one is in dicelab.sweeps)."""

from dicelab.training.reporter import Evaluation, MultiReporter, Reporter, TrialResult
from dicelab.training.reporters.console import ConsoleReporter
from dicelab.training.reporters.mlflow_run import MlflowReporter

__all__ = ["ConsoleReporter", "Evaluation", "MlflowReporter", "MultiReporter", "Reporter", "TrialResult"]
