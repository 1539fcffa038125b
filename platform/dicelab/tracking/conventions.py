"""MLflow naming conventions shared by the trial engine, the sweeps and the analysis.

- One experiment per sweep name (a standalone `dicelab trial` uses the config's tracking.experiment).
- A parent run per sweep invocation (tag ROLE=parent), one nested child run per trial (ROLE=trial).
- Child params are the flattened config: `loss.name`, `loss.alpha`, `data.variant`, `train.seed`, ...
- Metrics at each evaluation: `dev_<metric>` (dev_f1, dev_precision, ...), plus `train_loss`, `epoch`,
  `learning_rate`; at the end `best_dev_<metric>` and `best_step`, and when a test split exists
  `test_<metric>` of the best state (dicelab.training.held_out; also `threshold`, `*_f1_tuned`, `*_ece`).
"""

from __future__ import annotations

# Tags
ROLE = "dicelab.role"  # "parent" | "trial"
ROLE_PARENT = "parent"
ROLE_TRIAL = "trial"
ROLE_ANALYSIS = "analysis"  # holds a report when an experiment has no parent run
SWEEP_NAME = "dicelab.sweep"  # the sweep's name, on parent and children
SWEEP_ID = "dicelab.sweep_id"  # one id per sweep invocation (stable across --resume)
TRIAL_ID = "dicelab.trial_id"  # Ray Tune trial id (or "local" for `dicelab trial`)
OUTCOME = "dicelab.outcome"  # one of OUTCOMES
REASON = "dicelab.reason"  # why a trial failed or stopped early, one line
PRIMARY_METRIC = "dicelab.metric"  # the dev metric the trial selected on, e.g. "f1"
GIT_COMMIT = "dicelab.git_commit"
DATA_FINGERPRINT = "dicelab.data_fingerprint"
# A trial given a GPU that CUDA could not see trained on CPU instead: one line saying so.
DEVICE_FALLBACK = "dicelab.device_fallback"
# The hub commit a hub backbone (model.backbone, at model.revision) resolved to; absent for local backbones.
BACKBONE_COMMIT = "dicelab.backbone_commit"
# A trial whose best evaluation predicts no positive / no entity / a single class: one line saying which.
# Set on the trial's run; the sweep table and the analysis mark such trials and never average them silently.
DEGENERATE = "dicelab.degenerate"
# A finished trial whose test split could not be scored: one line saying why (its dev record stands).
HELD_OUT_ERROR = "dicelab.held_out_error"
# Seed racing: on the parent run, the race's decision; on a trial's run, "dropped" when its configuration
# was eliminated (its finished seeds stay observations).
RACE_DECISION = "dicelab.race.decision"
RACE_STATUS = "dicelab.race.status"
RACE_WINNER = "dicelab.race.winner"  # on the parent run: the configuration the race chose
RACE_TEST = "dicelab.race.test"  # on the parent run: the paired test the race decided with (t | permutation)
RACE_CONFIGURATION = "dicelab.race.configuration"  # on a raced trial's run: its configuration's race label
# On a dropped trial's run: the race's evidence at the drop (JSON: leader, n, difference, low, high, p,
# p_holm, family, test), which the analysis's Decision keeps as the race made it.
RACE_ELIMINATION = "dicelab.race.elimination"

# Experiment tag read by MLflow 3's UI to choose an experiment's first page: "custom_model_development" opens
# the runs table ("Model training"); without it the UI guesses and may open the GenAI overview (traces).
EXPERIMENT_KIND = "mlflow.experimentKind"
EXPERIMENT_KIND_TRAINING = "custom_model_development"

# Values of OUTCOME. MLflow status: completed/early_stopped -> FINISHED, failed/non_finite -> FAILED.
COMPLETED = "completed"
EARLY_STOPPED = "early_stopped"  # stopped by the scheduler (ASHA) or by early stopping patience
FAILED = "failed"  # raised an exception
NON_FINITE = "non_finite"  # the loss became NaN or inf
OUTCOMES = (COMPLETED, EARLY_STOPPED, FAILED, NON_FINITE)

# Metric names
DEV_PREFIX = "dev_"
BEST_PREFIX = "best_dev_"
TEST_PREFIX = "test_"  # the held-out split, scored once with the best dev state
# A binary classifier's decision threshold on P(positive) tuned for F1 on its best dev predictions, the F1
# there (best_dev_f1_tuned, test_f1_tuned) and the expected calibration error (best_dev_ece, test_ece).
THRESHOLD_METRIC = "threshold"
F1_TUNED = "f1_tuned"
ECE = "ece"
TRAIN_LOSS = "train_loss"
EPOCH = "epoch"
LEARNING_RATE = "learning_rate"
BEST_STEP = "best_step"
SAMPLES_PER_SECOND = "train_samples_per_second"
SKIPPED_STEPS = "train_skipped_steps"  # optimizer steps the fp16 gradient scaler skipped (inf/NaN gradients)
# What a trial used, logged at its end (GPU-seconds = the GPU fraction reserved for it x wall seconds)
COST_WALL_SECONDS = "cost/wall_seconds"
COST_CPU_SECONDS = "cost/cpu_seconds"
COST_GPU_SECONDS = "cost/gpu_seconds"
GPU_PEAK_MEMORY_MB = "gpu/peak_memory_mb"  # torch.cuda.max_memory_allocated over the trial, CUDA only
GPU_TOTAL_MEMORY_MB = "gpu/total_memory_mb"  # the trial's GPU's memory, CUDA only (how many trials fit)

# Artifacts (paths inside a run)
CONFIG_ARTIFACT = "config.yaml"  # the fully resolved config
PREDICTIONS_ARTIFACT = "predictions/dev.jsonl"  # dev predictions of the best state
TEST_PREDICTIONS_ARTIFACT = "predictions/test.jsonl"  # test predictions of the best state (a test split)
CLASS_REPORT_ARTIFACT = "reports/per_class.json"  # per-class precision/recall/F1/support
MANIFEST_ARTIFACT = "data/manifest.json"  # resampling manifest when data.variant != original
REPORT_DIR = "report"  # analysis report on the sweep's parent run


def dev_metric(name: str) -> str:
    return f"{DEV_PREFIX}{name}"


def best_metric(name: str) -> str:
    return f"{BEST_PREFIX}{name}"


def test_metric(name: str) -> str:
    return f"{TEST_PREFIX}{name}"


def resource_hours(hours: float, unit: str, digits: int = 2) -> str:
    """A cost as printed: '0.061 CPU-hours', '1 GPU-hour' (`digits` significant digits)."""
    number = f"{hours:.{digits}g}"
    return f"{number} {unit}-hour" if number == "1" else f"{number} {unit}-hours"
