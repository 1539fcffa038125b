"""Analysis of tracked sweeps: sensitivity curves, ablation tables, importance and reports, read from MLflow.

from dicelab.analysis import load_runs, sensitivity_curves, ablation_table, build_report

runs = load_runs("quickstart")                 # one row per trial in runs.trials
curves = sensitivity_curves(runs)              # mean ± t-interval per hyperparameter value
table = ablation_table(runs)                   # loss x data variant, delta vs CE, paper numbers
report = build_report(runs, "out/quickstart")  # report.md + report.html, logged to the parent run
"""

from dicelab.analysis._ablation import ablation_table
from dicelab.analysis._design import SweptParam, swept_params
from dicelab.analysis._importance import Importance, parameter_importance
from dicelab.analysis._loading import RunSet, load_histories, load_runs
from dicelab.analysis._observations import AnalysisOptions, observations
from dicelab.analysis._paper import PaperNumbers, paper_from_config
from dicelab.analysis._report import Report, build_report, default_report_dir
from dicelab.analysis._sensitivity import sensitivity_curves
from dicelab.analysis._stats import Interval, t_interval, welch_interval

__all__ = [
    "AnalysisOptions",
    "Importance",
    "Interval",
    "PaperNumbers",
    "Report",
    "RunSet",
    "SweptParam",
    "ablation_table",
    "build_report",
    "default_report_dir",
    "load_histories",
    "load_runs",
    "observations",
    "paper_from_config",
    "parameter_importance",
    "sensitivity_curves",
    "swept_params",
    "t_interval",
    "welch_interval",
]
