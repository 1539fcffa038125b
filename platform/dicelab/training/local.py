"""One trial run locally, without Ray: what `dicelab trial` and `dicelab.trial()` both do.

The config is validated by the caller; this records the trial in MLflow (unless told not to), shows its
progress on `console` (none when None), and returns the trial's result. A config, data or tracking error
(DicelabError) is raised before training; a trial that fails while training returns its result (outcome
failed / non_finite, with the reason) and, for a crash, the traceback.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from rich.console import Console

from dicelab.config import ExperimentConfig
from dicelab.errors import DicelabError, TrialFailed
from dicelab.tracking import check_tracking, resolve_tracking_uri
from dicelab.tracking import conventions as names
from dicelab.training.reporter import MultiReporter, Reporter, TrialResult


@dataclass
class LocalTrial:
    result: TrialResult
    tracking_uri: str | None  # the MLflow store it was recorded in; None when not tracked
    experiment: str  # the MLflow experiment (tracking.experiment, else the config's name)
    traceback: str | None = None  # a crash inside the trial (its run is FAILED with the reason)


class _Outcome(Reporter):
    """Keeps the TrialResult, which a failed trial hands only to reporters."""

    result: TrialResult | None = None

    def on_end(self, result: TrialResult) -> None:
        self.result = result


def run_local_trial(
    config: ExperimentConfig,
    *,
    tracking_uri: str | None = None,
    track: bool = True,
    console: Console | None = None,
    quiet: bool = False,
    register: str | None = None,
) -> LocalTrial:
    """Run `config` as one trial. track: record it in MLflow when the config's tracking is enabled or a
    `tracking_uri` is given; console: where progress goes (None: nowhere); quiet: no progress bars at all
    (tokenizing, weights loading); register: a Model Registry name for the trial's saved model
    (train.save_model)."""
    # torch / transformers load after the config is valid: a config error is reported in under a second
    import datasets
    import transformers

    from dicelab.training.loop import run_trial
    from dicelab.training.reporters import ConsoleReporter, MlflowReporter

    outcome = _Outcome()
    reporters: list[Reporter] = []
    uri = None
    experiment = config.tracking.experiment or config.name
    if (config.tracking.enabled or tracking_uri) and track:
        uri = resolve_tracking_uri(tracking_uri, config)
        check_tracking(uri)  # before any data is loaded or step taken
        reporters.append(
            MlflowReporter(
                uri,
                experiment,
                run_name=config.tracking.run_name,
                tags={names.TRIAL_ID: "local"},
                log_predictions=config.tracking.log_predictions,
                save_model=True,  # train.save_model says which weights (none: no model)
                register=register,
            )
        )
    if quiet or console is None:
        datasets.disable_progress_bars()  # tokenizing and caching features
        transformers.utils.logging.disable_progress_bar()  # loading weights
    if console is not None and not quiet:
        reporters.append(ConsoleReporter(console=console))
    reporters.append(outcome)

    crash = None
    try:
        run_trial(config, MultiReporter(reporters))
    except DicelabError:
        raise  # a config/data error: the CLI prints one line and exits 2
    except TrialFailed:
        pass  # non-finite loss: the result says why
    except Exception:
        if outcome.result is None:
            raise  # failed before the trial started
        crash = traceback.format_exc()  # a crash inside the trial: its run is FAILED with the reason
    assert outcome.result is not None  # run_trial returned or raised after on_end
    return LocalTrial(outcome.result, uri, experiment, crash)
