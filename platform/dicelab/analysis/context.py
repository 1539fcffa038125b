"""What every report section reads: the runs, the options and the tables computed once from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from dicelab.analysis import plots
from dicelab.analysis._format import slug
from dicelab.analysis.ablation import ablation_from_observations
from dicelab.analysis.comparisons import BaselineFinder, Decisions, decisions_from_observations
from dicelab.analysis.design import config_label, swept_params
from dicelab.analysis.held_out import HeldOut, decision_statements, held_out
from dicelab.analysis.importance import Importance, importance_from_observations
from dicelab.analysis.observations import VARIANT, AnalysisOptions, metric_label, observations
from dicelab.analysis.race import RaceRecord, race_records
from dicelab.analysis.runs import RunSet
from dicelab.analysis.sensitivity import CurveLine, curve_lines, curves_from_lines


@dataclass
class ReportContext:
    runs: RunSet
    options: AnalysisOptions
    root: Path  # the folder the report is written to (figures/ inside it)
    obs: pd.DataFrame = field(init=False)
    lines: list[CurveLine] = field(init=False)
    curves: pd.DataFrame = field(init=False)
    ablation: pd.DataFrame = field(init=False)
    decisions: Decisions = field(init=False)
    races: list[RaceRecord] = field(init=False)
    held_out: HeldOut = field(init=False)  # dev beside test; the losses against CE with a tuned threshold

    def __post_init__(self) -> None:
        self.obs = observations(self.runs, self.options)
        self.lines = list(curve_lines(self.obs, self.runs))
        # the arenas' configurations, found once for the curves' baselines and the decision
        finder = BaselineFinder(self.obs, self.runs.param_columns, self.options)
        self.curves = curves_from_lines(self.lines, self.obs, self.runs, self.options, finder)
        self.ablation = ablation_from_observations(self.obs, self.runs, self.options)
        self.decisions = decisions_from_observations(self.obs, self.runs, self.options, finder)
        self.races = race_records(self.runs)
        self.held_out = held_out(self.obs, self.decisions, self.runs, self.options)

    def held_out_statements(self, arena: pd.Series) -> list[str]:
        """The Decision's lines on held-out data and on CE with a tuned threshold (analysis.held_out)."""
        return decision_statements(self.held_out, arena, self.options)

    @cached_property
    def importance(self) -> Importance:
        """Computed on first use (its section and importance.csv)."""
        return importance_from_observations(self.obs, self.runs)

    @property
    def several(self) -> bool:
        """More than one experiment (--compare): titles and tables name the experiment."""
        return len(self.runs.experiments) > 1

    @property
    def level(self) -> str:
        return f"{self.options.confidence:.0%}"  # "95%"

    def group_title(self, experiment: str, task: str, metric: str) -> str:
        title = f"task `{task}` · {metric_label(metric)}"
        return f"{experiment} · {title}" if self.several else title

    def config_labels(self, group: pd.DataFrame) -> list[str]:
        """Per trial, what sets its configuration apart within `group`: "+positive · alpha=0.3, beta=0.7"."""
        params = swept_params(group, self.runs.param_columns)
        shown = [name for p in params for name in (p.name, *p.followers)]
        with_variant = group[VARIANT].nunique() > 1 or not shown
        labels = []
        for variant, *values in group[[VARIANT, *shown]].itertuples(index=False):
            parts = (variant if with_variant else "", config_label(zip(shown, values, strict=True)))
            labels.append(" · ".join(part for part in parts if part))
        return labels

    def save(self, figure: plots.Figure, kind: str, *parts: str) -> Path:
        stem = "_".join(slug(str(part)) for part in (kind, *parts))
        path = self.root / "figures" / f"{stem}.png"
        counter = 2
        while path.exists():
            path = self.root / "figures" / f"{stem}_{counter}.png"
            counter += 1
        return plots.save_figure(figure, path)
