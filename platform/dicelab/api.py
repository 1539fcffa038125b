"""dicelab from Python (a notebook, a script): run a trial or a sweep, analyze, export the winner.

    import dicelab

    result = dicelab.sweep("experiments/quickstart.yaml", overrides={"train.epochs": 2})
    result.best_config       # the winner's resolved config (a dict: what `dicelab export` writes)
    result.best_value        # its best dev value of result.metric (result.mode: max or min)
    result.trials            # pandas DataFrame: a row per trial (params, metrics, outcome)
    result.decision          # the analysis's Decision: its lines, and .verdicts / .comparisons structured
    result.winner_model_uri  # the winner's MLflow model ("models:/m-..."), for mlflow.pyfunc.load_model
    result == dicelab.load_sweep(result.name, result.sweep_id)  # a finished sweep, reloaded from MLflow
    report = dicelab.analyze(result.name)  # report.md / report.html, logged to the sweep's parent run

The functions do what `dicelab trial`, `dicelab sweep`, `dicelab analyze` and `dicelab export` do, through the
same code, but never print (unless `verbose=True`, or a `progress` callback is given: it receives the lines
the command would print) and never exit: a config, data or tracking error is raised as the
`dicelab.errors.DicelabError` whose one-line message the command would print. A trial that fails while
training is not an error: its result says so (`outcome`, `reason`).
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console

from dicelab.config import ExperimentConfig, config_to_yaml
from dicelab.tracking import conventions as names

if TYPE_CHECKING:
    from dicelab.analysis import Report
    from dicelab.analysis.sweep_result import SweepResult

ConfigSource = str | Path | Mapping[str, Any] | ExperimentConfig
Overrides = Mapping[str, Any] | Sequence[str] | None
Progress = Callable[[str], None]
API_CONFIG_DIR = Path(".dicelab") / "api-configs"  # configs given as objects, written for the sweep driver


@dataclass
class TrialResult:
    """One trial's result (what `dicelab trial --json` prints, plus where it was recorded)."""

    outcome: str  # completed | early_stopped | failed | non_finite
    metric: str  # the dev metric the trial selected its best evaluation on
    best_metrics: dict[str, float]  # dev metrics at the best evaluation
    final_metrics: dict[str, float]  # dev metrics at the last evaluation
    best_step: int | None
    steps: int
    reason: str | None  # why it failed or stopped early
    degenerate: str | None  # set when the best evaluation predicts one class / no entity
    run_id: str | None  # its MLflow run, when tracked
    tracking_uri: str | None
    experiment: str
    config: ExperimentConfig = field(repr=False)
    traceback: str | None = field(default=None, repr=False)  # a crash inside the trial
    model_uri: str | None = None  # the trial's saved model, when it saved one

    @property
    def best(self) -> float | None:
        """The best dev value of the selection metric."""
        return self.best_metrics.get(self.metric)

    @property
    def succeeded(self) -> bool:
        return self.outcome in (names.COMPLETED, names.EARLY_STOPPED)

    def _repr_html_(self) -> str:
        rows = [
            ("outcome", self.outcome + (f" ({self.reason})" if self.reason else "")),
            (f"best dev {self.metric}", _number(self.best)),
            ("best step / steps", f"{self.best_step} / {self.steps}"),
            ("MLflow run", self.run_id or "not tracked"),
        ]
        if self.degenerate:
            rows.append(("warning", self.degenerate))
        return _html_table(f"trial {self.config.name}", rows)


def trial(
    config_or_path: ConfigSource,
    overrides: Overrides = None,
    *,
    tracking_uri: str | None = None,
    track: bool = True,
    progress: Progress | None = None,
    verbose: bool = False,
) -> TrialResult:
    """Run one trial locally, without Ray (as `dicelab trial`). track=False: not recorded in MLflow."""
    from dicelab.experiment import check_experiment, load_experiment
    from dicelab.training.local import run_local_trial

    if isinstance(config_or_path, (str, Path)):
        config = load_experiment(config_or_path, _override_list(overrides))
    else:
        from dicelab.config import parse_config
        from dicelab.config.reading import apply_overrides

        config = parse_config(apply_overrides(_config_dict(config_or_path), _override_list(overrides)))
        check_experiment(config)
    console = _console(progress, verbose)
    local = run_local_trial(config, tracking_uri=tracking_uri, track=track, console=console)
    result = local.result
    return TrialResult(
        outcome=result.outcome,
        metric=result.metric,
        best_metrics=dict(result.best_metrics),
        final_metrics=dict(result.final_metrics),
        best_step=result.best_step,
        steps=result.steps,
        reason=result.reason,
        degenerate=result.degenerate,
        run_id=result.run_id,
        tracking_uri=local.tracking_uri,
        experiment=local.experiment,
        config=config,
        traceback=local.traceback,
        model_uri=getattr(result, "model_uri", None),
    )


def sweep(
    config_or_path: ConfigSource,
    overrides: Overrides = None,
    *,
    address: str | None = None,
    name: str | None = None,
    resume: bool = False,
    retry_failed: bool = False,
    tracking_uri: str | None = None,
    register: str | None = None,
    progress: Progress | None = None,
    verbose: bool = False,
) -> SweepResult:
    """Run a sweep (as `dicelab sweep`) on a private local Ray, or on the cluster at `address`, and read it
    back from MLflow as a SweepResult (what `load_sweep` returns for it later: the two are equal)."""
    from dicelab.config import read_config
    from dicelab.errors import ConfigError

    if retry_failed and not resume:
        raise ConfigError("retry_failed continues a sweep: use it with resume=True")
    path = _config_path(config_or_path)
    read_config(path, _override_list(overrides))  # a typo is raised before Ray or MLflow is imported
    from dicelab.sweeps.driver import SweepOptions, execute_sweep

    started = time.monotonic()
    options = SweepOptions(
        config=str(path),
        overrides=_override_list(overrides),
        address=address,
        name=name,
        resume=resume,
        retry_failed=retry_failed,
        tracking_uri=tracking_uri,
        register=register,
    )
    outcome = execute_sweep(options, _console(progress, verbose) or _silent())
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    from dicelab.analysis.sweep_result import MODEL_SECONDS, read_sweep

    # what the call took, kept on the parent run beside its cost/*: a reloaded sweep reports the same cost
    now = int(time.time() * 1000)
    spent = {names.COST_WALL_SECONDS: time.monotonic() - started, MODEL_SECONDS: outcome.model_seconds}
    MlflowClient(outcome.tracking_uri).log_batch(
        outcome.parent_run_id, metrics=[Metric(key, value, now, 0) for key, value in spent.items()]
    )
    result = read_sweep(outcome.name, outcome.sweep_id, outcome.tracking_uri)
    result.exit_code = outcome.exit_code  # 130 when interrupted, whatever the parent's status says
    result.warnings = list(outcome.warnings)
    return result


def load_sweep(experiment: str, sweep_id: str | None = None, tracking_uri: str | None = None) -> SweepResult:
    """A finished sweep of `experiment` (`sweep_id`; None: its newest) read back from MLflow: the object
    `sweep` returned for it (Optuna's `optuna.load_study`, Ray Tune's `Tuner.restore(...).get_results()`)."""
    from dicelab.analysis.sweep_result import read_sweep

    return read_sweep(experiment, sweep_id, tracking_uri)


def analyze(
    experiment: str,
    *,
    tracking_uri: str | None = None,
    out: str | Path | None = None,
    compare: Sequence[str] = (),
    sweep_ids: Sequence[str] | None = None,
    metric: str | None = None,
    use: Literal["best", "final"] = "best",
    include_early_stopped: bool = True,
    confidence: float = 0.95,
    baseline: str = "loss.name=ce",
    detect: float | None = None,
    test: Literal["permutation", "t"] | None = None,
    log_to_mlflow: bool = True,
    all_sweeps: bool = False,
) -> Report:
    """Write the experiment's report (as `dicelab analyze`: its newest sweep, or every sweep pooled with
    `all_sweeps=True`, or `sweep_ids`) and return it: `report.decision` (lines),
    `report.html`, `report.markdown`, `report.files` (figures and CSVs)."""
    from dicelab.analysis.analyze import analyze_experiment

    _, report = analyze_experiment(
        experiment,
        tracking_uri,
        out=out,
        compare=compare,
        sweep_ids=sweep_ids,
        metric=metric,
        use=use,
        include_early_stopped=include_early_stopped,
        confidence=confidence,
        baseline=baseline,
        detect=detect,
        test=test,
        log_to_mlflow=log_to_mlflow,
        all_sweeps=all_sweeps,
    )
    return report


def export(
    experiment: str,
    *,
    sweep_id: str | None = None,
    tracking_uri: str | None = None,
    out: str | Path | None = None,
) -> str:
    """The experiment's winner as a runnable trial config (YAML text, as `dicelab export`); written to
    `out` too when given."""
    from dicelab.analysis.export import find_winner, winner_config
    from dicelab.files import write_atomically

    text = winner_config(find_winner(experiment, tracking_uri, sweep_id=sweep_id))
    if out is not None:
        write_atomically(Path(out), text)
    return text


# ----------------------------------------------------------------------------------------------------------


def _override_list(overrides: Overrides) -> list[str]:
    """{"train.epochs": 2} or ["train.epochs=2"] -> ["train.epochs=2"] (values as YAML: JSON is YAML)."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return [f"{key}={json.dumps(value, default=str)}" for key, value in overrides.items()]
    return [str(item) for item in overrides]


def _config_dict(source: Mapping[str, Any] | ExperimentConfig) -> dict[str, Any]:
    if isinstance(source, ExperimentConfig):
        from dicelab.config.reading import config_to_dict

        return config_to_dict(source)
    return json.loads(json.dumps(dict(source), default=str))


def _config_path(source: ConfigSource) -> Path:
    """A config file for the sweep driver (which reads a path, and names it in `--resume` hints): the path
    given, or the config object written under .dicelab/api-configs/, named by its content (stable: a
    resumed sweep finds the same file)."""
    if isinstance(source, (str, Path)):
        return Path(source)
    import yaml

    data = _config_dict(source)
    if data.get("plugins"):  # paths relative to the working directory (a notebook's), not to the file here
        from dicelab.plugins import resolve_entries

        data = {**data, "plugins": resolve_entries(data["plugins"], Path.cwd())}
        source = data
    text = (
        config_to_yaml(source)
        if isinstance(source, ExperimentConfig)
        else yaml.safe_dump(data, sort_keys=False)
    )
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = (API_CONFIG_DIR / f"{data.get('name', 'sweep')}-{digest}.yaml").resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(text, encoding="utf-8")
    return path


class _Lines(io.TextIOBase):
    """A text stream that hands each complete line to a callback."""

    def __init__(self, callback: Progress):
        self.callback, self.pending = callback, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        lines = (self.pending + text).split("\n")
        self.pending = lines.pop()
        for line in lines:
            self.callback(line)
        return len(text)


def _console(progress: Progress | None, verbose: bool) -> Console | None:
    """Where a run's progress goes: rich's own console (a notebook renders it), lines to a callback, or
    nowhere (None)."""
    if verbose:
        return Console()
    if progress is not None:
        # force_jupyter=False: in a notebook rich would display the lines instead of writing them to `file`
        return Console(
            file=_Lines(progress), width=120, soft_wrap=True, force_terminal=False, force_jupyter=False
        )
    return None


def _silent() -> Console:
    return Console(file=io.StringIO(), force_terminal=False, force_jupyter=False)


def __getattr__(name: str) -> Any:
    """`SweepResult` and `Decision` from the analysis layer, imported on first use (pandas, MLflow)."""
    if name in ("SweepResult", "Decision"):
        from dicelab.analysis import sweep_result

        return getattr(sweep_result, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _number(value: float | None) -> str:
    return "—" if value is None else f"{value:.4f}"


def _html_table(title: str, rows: list[tuple[str, Any]], escaped: frozenset[str] = frozenset()) -> str:
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(key)}</th>"
        f"<td style='text-align:left'>{value if key in escaped else html.escape(str(value))}</td></tr>"
        for key, value in rows
    )
    return f"<table><caption style='text-align:left'><b>{html.escape(title)}</b></caption>{body}</table>"
