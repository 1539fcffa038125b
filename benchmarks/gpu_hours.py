"""Estimate the GPU hours of every paper sweep in experiments/paper/ (for experiments/README.md).

Training compute per trial = 6 x parameters x tokens (forward + backward), tokens = training examples x
epochs x max_length (the official scripts pad to max length, so this is what the paper paid), divided by an
effective throughput in TFLOP/s:
- `--tflops N`: a number you know (default 100: an A100 in bf16 at ~32% MFU, an assumption);
- `--measured EXPERIMENT`: measured, from the trials of a sweep you ran on your GPU (or CPU): each trial
  logs train_samples_per_second, and TFLOP/s = 6 x parameters x max_length x samples/s / 1e12 (the median
  over the experiment's trials, each at its own backbone and max length).

    python benchmarks/gpu_hours.py [--tflops 100]
    python benchmarks/gpu_hours.py --measured table7-mrpc-bert [--tracking-uri URI]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from dicelab.experiment import load_experiment
from dicelab.sweeps.space import plan_sweep

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments" / "paper"

# Training-set sizes (examples, or tokenizer windows for MRC) of the public releases.
TRAIN_EXAMPLES = {
    "glue/mrpc": 3_668,
    "glue/qqp": 363_846,
    "glue/sst2": 67_349,
    "SetFit/sst5": 8_544,
    "conll2003": 14_041,
    "data/en_ontonotes5": 59_924,
    "data/zh_onto4": 15_724,
    "squad": 88_641,  # windows at max length 384, stride 128
    "squad_v2": 131_754,
    "quoref": 58_000,  # long contexts: about three windows per question
    "../shared/data/mrpc": 3_668,
    # Sentences of the licensed / user-supplied sets, approximate (the usual splits): estimates, not counts.
    "data/zh_msra": 46_364,
    "data/zh_ctb5": 18_089,
    "data/zh_ctb6": 23_420,
    "data/zh_ud14": 3_997,
    "data/en_wsj": 38_219,
    "data/en_tweets": 1_000,
}
# mrc_ner trains on one example per sentence x entity type: the types of each query set.
QUERY_SET_TYPES = {"conll03": 4, "ontonotes5": 18, "msra": 3, "ontonotes4": 4}
# Sizes of the Table 8 QQP variants (the paper's counts).
VARIANT_EXAMPLES = {
    "original": 363_871,
    "+positive": 458_477,
    "+negative": 458_477,
    "-negative": 269_165,
    "+positive+negative": 458_477,
}
PARAMETERS = {
    "bert-base-uncased": 110e6,
    "bert-base-cased": 108e6,
    "bert-base-chinese": 102e6,
    "bert-large-uncased": 335e6,
    "bert-large-cased": 333e6,
    "xlnet-base-cased": 117e6,
    "minilm": 22.7e6,
}


def estimate(path: Path, tflops: float) -> tuple[str, int, float]:
    config = load_experiment(path)
    plan = plan_sweep(config, str(path))
    parameters = PARAMETERS[config.model.backbone]
    dataset = config.data.name or config.data.path or config.data.source
    flops = 0.0
    for point in plan.points():
        trial = plan.trial_config(point)
        if "data.variant" in point:
            examples = VARIANT_EXAMPLES[trial.data.variant]
        elif trial.data.source.startswith("synthetic"):
            examples = trial.data.synthetic.n_train
        else:
            examples = TRAIN_EXAMPLES[dataset]
        if trial.task.name == "mrc_ner":
            examples *= QUERY_SET_TYPES.get(str(trial.task.queries), 4)
        tokens = examples * trial.train.epochs * trial.data.max_length
        flops += 6 * parameters * tokens
    return dataset, len(plan.points()), flops / (tflops * 1e12) / 3600


def measured_tflops(experiment: str, tracking_uri: str | None) -> float:
    """The median effective training TFLOP/s of an experiment's trials, from their logged samples/s."""
    from mlflow import MlflowClient

    from dicelab.tracking import conventions as names
    from dicelab.tracking import resolve_tracking_uri

    client = MlflowClient(resolve_tracking_uri(tracking_uri, None))
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise SystemExit(f"--measured: no experiment {experiment!r} in the tracking store")
    rates = []
    for run in client.search_runs([found.experiment_id], f"tags.`{names.ROLE}` = '{names.ROLE_TRIAL}'"):
        backbone, max_length = run.data.params.get("model.backbone"), run.data.params.get("data.max_length")
        history = client.get_metric_history(run.info.run_id, names.SAMPLES_PER_SECOND)
        if backbone in PARAMETERS and max_length and history:
            per_second = statistics.median(point.value for point in history)
            rates.append(6 * PARAMETERS[backbone] * int(max_length) * per_second / 1e12)
    if not rates:
        known = ", ".join(PARAMETERS)
        raise SystemExit(
            f"--measured: no trial of {experiment!r} on a known backbone ({known}) logged samples/s"
        )
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tflops", type=float, default=100.0, help="effective training TFLOP/s of one GPU")
    parser.add_argument("--measured", metavar="EXPERIMENT", help="TFLOP/s measured by this experiment's runs")
    parser.add_argument("--tracking-uri", help="the MLflow store of --measured (default: dicelab's)")
    args = parser.parse_args()
    if args.measured:
        args.tflops = measured_tflops(args.measured, args.tracking_uri)
        print(f"measured: {args.tflops:.3g} TFLOP/s effective (median over the trials of {args.measured})\n")
    print(f"| config | data | trials | GPU hours at {args.tflops:.3g} TFLOP/s |")
    print("|---|---|---:|---:|")
    for path in sorted(EXPERIMENTS.glob("*.yaml")):
        dataset, trials, hours = estimate(path, args.tflops)
        print(f"| {path.name} | {dataset} | {trials} | {hours:.1f} |")


if __name__ == "__main__":
    main()
