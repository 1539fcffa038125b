"""Analysis of tracked sweeps: sensitivity curves, ablation tables, importance and reports, read from MLflow.

from dicelab.analysis import load_runs, sensitivity_curves, ablation_table, build_report

runs = load_runs("quickstart")                 # one row per trial in runs.trials
curves = sensitivity_curves(runs)              # mean ± t-interval per hyperparameter value
table = ablation_table(runs)                   # loss x data variant, delta vs CE, paper numbers
decided = decisions(runs)                      # paired comparisons: vs the baseline and the best, Holm
report = build_report(runs, "out/quickstart")  # report.md + report.html (opening with the Decision)
"""

from dicelab.analysis.ablation import ablation_table
from dicelab.analysis.comparisons import Decisions, decisions
from dicelab.analysis.design import SweptParam, swept_params
from dicelab.analysis.importance import Importance, parameter_importance
from dicelab.analysis.intervals import Interval, t_interval, welch_interval
from dicelab.analysis.observations import AnalysisOptions, observations
from dicelab.analysis.paper import PaperNumbers, paper_from_config
from dicelab.analysis.publishing import default_report_dir
from dicelab.analysis.report import Report, build_report
from dicelab.analysis.runs import RunSet, load_histories, load_runs
from dicelab.analysis.sensitivity import sensitivity_curves

__all__ = [
    "AnalysisOptions",
    "Decisions",
    "Importance",
    "Interval",
    "PaperNumbers",
    "Report",
    "RunSet",
    "SweptParam",
    "ablation_table",
    "build_report",
    "decisions",
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
