"""NER two ways at equal budget: `token_tagging` against `mrc_ner` (BERT-MRC), with CE and with DSC, per seed.

Same sentences, backbone, epochs, batch size, learning rate and seeds for every cell; DSC at batch (set)
level with the official scripts' settings (see LOSSES). Each trial is `run_trial` without tracking; the
table gives dev entity F1 / precision / recall (seqeval, the same scorer for both formulations), whether
the trial is degenerate, and its CPU seconds; then paired comparisons by seed (`dicelab.stats.compare`,
paired t): MRC minus tagging per loss, and DSC minus CE per task.

`--iob DIR` first writes the data as CoNLL-2003 column files (4 columns, IOB1 tags, -DOCSTART- lines:
`DIR/train.txt`, `DIR/dev.txt`) and trains from them with `data.source: local, data.format: conll`, the way a
user's CoNLL / OntoNotes files are read.

    .venv/bin/python benchmarks/ner_formulations.py --seeds 1 2 3                 # tiny-bert, synthetic
    .venv/bin/python benchmarks/ner_formulations.py --seeds 1 2 3 --iob /tmp/iob  # via IOB1 files
    .venv/bin/python benchmarks/ner_formulations.py --seeds 1 --set model.backbone=minilm \\
        --set data.synthetic.n_train=1000 --set data.synthetic.n_dev=300 --set train.epochs=3 \\
        --set train.batch_size=16 --set train.learning_rate=1e-4
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from dicelab.data.synthetic import generate_tagging
from dicelab.experiment import load_experiment
from dicelab.stats import compare
from dicelab.training import run_trial

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = ROOT / "experiments" / "trials" / "tagging-synthetic.yaml"
TASKS = ("token_tagging", "mrc_ner")
# DSC as the official scripts run it (set level per batch, alpha 0.01, squared denominator, smooth 1): at
# its defaults (alpha 1, plain denominator) set-level DSC did not train mrc_ner from scratch (F1 0.018).
LOSSES = {
    "ce": [],
    "dsc": ["loss.level=batch", "loss.alpha=0.01", "loss.square_denominator=true", "loss.smooth=1.0"],
}


def to_iob1(tags: list[str]) -> list[str]:
    """IOB2 -> IOB1 (CoNLL-2003's scheme): B- only where an entity follows one of the same type."""
    out = []
    for position, tag in enumerate(tags):
        if tag.startswith("B-"):
            before = tags[position - 1] if position else "O"
            same_type_before = before != "O" and before[2:] == tag[2:]
            out.append(tag if same_type_before else "I-" + tag[2:])
        else:
            out.append(tag)
    return out


def write_conll(frame: Any, path: Path) -> None:
    """CoNLL-2003 layout: token, POS, chunk, NER tag; sentences separated by blank lines."""
    lines = ["-DOCSTART- -X- -X- O", ""]
    for tokens, tags in zip(frame["tokens"], frame["tags"], strict=True):
        lines += [f"{token} X X {tag}" for token, tag in zip(tokens, to_iob1(list(tags)), strict=True)]
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


def iob_overrides(directory: Path, config: Any) -> list[str]:
    """Write the config's synthetic sentences as CoNLL IOB1 files; returns the overrides that read them."""
    options = config.data.synthetic
    directory.mkdir(parents=True, exist_ok=True)
    write_conll(
        generate_tagging(options.n_train, options.entity_density, [options.seed, 0]), directory / "train.txt"
    )
    write_conll(
        generate_tagging(options.n_dev, options.entity_density, [options.seed, 1]), directory / "dev.txt"
    )
    return ["data.source=local", f"data.path={directory}", "data.format=conll"]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=str(DEFAULT_CONFIG))
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--losses", nargs="+", choices=list(LOSSES), default=list(LOSSES))
    parser.add_argument(
        "--iob", type=Path, help="write the data as CoNLL IOB1 files here and train from them"
    )
    parser.add_argument("--json", type=Path, help="write every trial's result here")
    args = parser.parse_args()

    overrides = ["train.num_threads=1", *args.set]
    if args.iob is not None:
        overrides += iob_overrides(args.iob, load_experiment(args.config, overrides))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    results: dict[str, dict[int, dict[str, Any]]] = {}
    for seed in args.seeds:
        for task in TASKS:
            for loss in args.losses:
                cell = f"{task} {loss}"
                config = load_experiment(
                    args.config,
                    [
                        *overrides,
                        f"task.name={task}",
                        f"loss.name={loss}",
                        *LOSSES[loss],
                        f"train.seed={seed}",
                    ],
                )
                torch.set_num_threads(config.train.num_threads or 1)
                started, wall = cpu_seconds(), time.perf_counter()
                result = run_trial(config)
                best = result.best_metrics
                results.setdefault(cell, {})[seed] = {
                    "f1": best.get("f1", 0.0),
                    "precision": best.get("precision", 0.0),
                    "recall": best.get("recall", 0.0),
                    "degenerate": result.degenerate,
                    "outcome": result.outcome,
                    "cpu_s": round(cpu_seconds() - started, 1),
                    "wall_s": round(time.perf_counter() - wall, 1),
                }
                print(f"seed {seed} {cell}: {results[cell][seed]}", flush=True)

    console = Console(width=150)
    table = Table(
        title=f"{Path(args.config).stem} ({'IOB1 files' if args.iob else 'in memory'}), seeds {args.seeds}"
    )
    for column in (
        "task",
        "loss",
        "dev F1 (mean ± sd)",
        "precision",
        "recall",
        "degenerate",
        "CPU s / trial",
    ):
        table.add_column(column, justify="left" if column in ("task", "loss") else "right")
    for cell, by_seed in results.items():
        rows = list(by_seed.values())
        f1 = [row["f1"] for row in rows]
        spread = statistics.stdev(f1) if len(rows) > 1 else 0.0
        table.add_row(
            *cell.split(),
            f"{statistics.mean(f1):.4f} ± {spread:.4f}",
            f"{sum(row['precision'] for row in rows) / len(rows):.4f}",
            f"{sum(row['recall'] for row in rows) / len(rows):.4f}",
            f"{sum(row['degenerate'] is not None for row in rows)}/{len(rows)}",
            f"{sum(row['cpu_s'] for row in rows) / len(rows):.0f}",
        )
    console.print(table)

    def f1_of(cell: str) -> dict[int, float]:
        return {seed: row["f1"] for seed, row in results[cell].items()}

    pairs = [(f"mrc_ner {loss}", f"token_tagging {loss}") for loss in args.losses]
    if "dsc" in args.losses and "ce" in args.losses:
        pairs += [(f"{task} dsc", f"{task} ce") for task in TASKS]
    comparisons = {}
    for candidate, reference in pairs if len(args.seeds) > 1 else []:  # one seed: nothing to compare
        found = compare(f1_of(candidate), f1_of(reference), test="t")
        comparisons[f"{candidate} - {reference}"] = dataclasses.asdict(found)
        console.print(
            f"{candidate} - {reference} (n={found.n}, {'paired' if found.paired else 'unpaired'}): "
            f"{found.difference:+.4f} [{found.low:+.4f}, {found.high:+.4f}], p={found.p_value:.3f}"
        )
    if args.json is not None:
        args.json.write_text(
            json.dumps({"results": results, "comparisons": comparisons}, indent=1, default=str)
        )


if __name__ == "__main__":
    main()
