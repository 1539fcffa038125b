"""What the trials cost and what more seeds would cost; how many trials fit on one GPU.

Every trial logs its resource-seconds at its end (`cost/cpu_seconds`, `cost/gpu_seconds` = the GPU share Ray
reserved for it x its wall time) and, on CUDA, its peak memory (`gpu/peak_memory_mb`) and the GPU's size
(`gpu/total_memory_mb`). From them the Decision says what the decision cost, what the next step the power
analysis asks for would cost at the measured mean trial cost, and how many trials of a configuration fit on
one GPU of the size seen. Costs are in GPU-hours when any trial held a GPU, else in CPU-hours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from dicelab.stats import NO_DIFFERENCE
from dicelab.tracking import conventions as names
from dicelab.words import count

GPU_TOTAL_MEMORY_MB = names.GPU_TOTAL_MEMORY_MB  # the trial's GPU's memory, logged beside its peak
# Per trial process on top of torch's peak allocation: the CUDA context and the caching allocator's slack
# (torch.cuda.max_memory_allocated counts neither; the context alone is typically 300-500 MiB).
PROCESS_OVERHEAD_MB = 500.0
# The params that decide a trial's memory: trials that share them share a peak.
MEMORY_KEYS = ("model.backbone", "train.batch_size", "data.max_length", "train.precision")


@dataclass(frozen=True)
class Cost:
    """The summed cost of some trials and its mean per trial, in the unit that matters (GPU, else CPU)."""

    trials: int  # trials that logged their cost
    cpu_hours: float
    gpu_hours: float

    @property
    def unit(self) -> str:
        return "GPU" if self.gpu_hours > 0 else "CPU"

    @property
    def hours(self) -> float:
        return self.gpu_hours if self.unit == "GPU" else self.cpu_hours

    @property
    def mean_hours(self) -> float:
        return self.hours / self.trials if self.trials else math.nan

    def text(self) -> str:
        """'1.2 GPU-hours (3.4 CPU-hours)', or '0.52 CPU-hours'."""
        main = names.resource_hours(self.hours, self.unit)
        return f"{main} ({names.resource_hours(self.cpu_hours, 'CPU')})" if self.unit == "GPU" else main


def cost_of(trials: pd.DataFrame) -> Cost:
    """The cost of the given trial rows (failed ones included: they were paid for too)."""
    if names.COST_WALL_SECONDS not in trials:
        return Cost(0, 0.0, 0.0)
    costed = trials[pd.to_numeric(trials[names.COST_WALL_SECONDS], errors="coerce").notna()]
    return Cost(len(costed), _sum(costed, names.COST_CPU_SECONDS), _sum(costed, names.COST_GPU_SECONDS))


def next_step_trials(rows: pd.DataFrame) -> tuple[int, int]:
    """(more seeds, more trials) that the undecided comparisons of one arena ask for: every configuration in
    an undecided comparison runs seeds until it has the largest number its comparisons need."""
    needed: dict[str, int] = {}
    have: dict[str, int] = {}
    for _, row in rows[(rows["verdict"] == NO_DIFFERENCE) & rows["seeds_needed"].notna()].iterrows():
        for side in ("candidate", "reference"):
            name = str(row[side])
            needed[name] = max(needed.get(name, 0), int(row["seeds_needed"]))
            have[name] = int(row[f"n_{side}"])
    more = {name: max(0, needed[name] - have[name]) for name in needed}
    return max(more.values(), default=0), sum(more.values())


def next_step_statement(rows: pd.DataFrame, arena_trials: pd.DataFrame) -> str | None:
    """'Next step: about 6 more paired seeds (12 trials), about 0.4 GPU-hours at the measured ...', or None
    when nothing undecided asks for more seeds."""
    seeds, trials = next_step_trials(rows)
    if not trials:
        return None
    cost = cost_of(arena_trials)
    text = f"Next step: about {count(seeds, 'more paired seed')} ({count(trials, 'trial')})"
    if not cost.trials:
        return f"{text}; the trials logged no cost, so its price is unknown."
    total = names.resource_hours(trials * cost.mean_hours, cost.unit)
    per_trial = names.resource_hours(cost.mean_hours, cost.unit)
    return f"{text}, about {total} at the measured mean of {per_trial} per trial."


def spent_statement(trials: pd.DataFrame) -> str | None:
    """'This decision cost 1.2 GPU-hours (3.4 CPU-hours) over 24 trials.' None when no trial logged a cost."""
    cost = cost_of(trials)
    if not cost.trials:
        return None
    unlogged = len(trials) - cost.trials
    missing = f"; {count(unlogged, 'trial')} logged no cost (ended before reporting it)" if unlogged else ""
    return f"This decision cost {cost.text()} over {count(cost.trials, 'trial')}{missing}."


def memory_statements(trials: pd.DataFrame) -> list[str]:
    """Per memory-relevant configuration and GPU size seen: its peak and how many such trials fit on one
    GPU. Empty when no trial ran on a GPU."""
    if names.GPU_PEAK_MEMORY_MB not in trials:
        return []
    peaks = trials.assign(
        _peak=pd.to_numeric(trials[names.GPU_PEAK_MEMORY_MB], errors="coerce"),
        _total=pd.to_numeric(trials.get(GPU_TOTAL_MEMORY_MB, math.nan), errors="coerce"),
    )
    peaks = peaks[peaks["_peak"].notna()]
    keys = [key for key in MEMORY_KEYS if key in peaks and peaks[key].notna().any()]
    statements = []
    for group_key, group in peaks.groupby([*keys, "_total"], dropna=False, sort=True):
        values = group_key if isinstance(group_key, tuple) else (group_key,)
        label = ", ".join(f"{key.split('.')[-1]}={value}" for key, value in zip(keys, values, strict=False))
        peak, total = float(group["_peak"].max()), float(values[-1])
        text = f"GPU memory{f' ({label})' if label else ''}: peak {peak:,.0f} MiB per trial"
        text += f" (the highest of {count(len(group), 'trial')})"
        if math.isnan(total):
            statements.append(f"{text}; the GPU's size was not recorded.")
            continue
        fit = max(1, int(total // (peak + PROCESS_OVERHEAD_MB)))  # it ran, so one fits
        share, packs = _share(fit)
        statements.append(
            f"{text}: {count(fit, 'trial')} of this configuration fit on one {total:,.0f} MiB GPU "
            f"(counting {PROCESS_OVERHEAD_MB:.0f} MiB per trial for its CUDA context); "
            f"`search.resources.gpu: {share:g}` packs {packs} on one."
        )
    return statements


def _share(fit: int) -> tuple[float, int]:
    """The GPU share (Ray resolves 1e-4) that packs at most `fit` trials on a GPU, and how many it packs."""
    share = math.floor(1e4 / fit) / 1e4
    if int(1 / share + 1e-9) > fit:  # rounding down let one more in: round up instead
        share = math.ceil(1e4 / fit) / 1e4
    return share, int(1 / share + 1e-9)


def _sum(trials: pd.DataFrame, column: str) -> float:
    if column not in trials:
        return 0.0
    return float(pd.to_numeric(trials[column], errors="coerce").fillna(0.0).sum()) / 3600
