"""`dicelab resample INPUT --variant NAME --out DIR`: build a Table 8 variant of a training set.

INPUT is a pairs file (TSV/CSV/JSONL/Parquet, GLUE QQP/MRPC layouts with or without a header) or a hub
dataset name (e.g. glue/qqp, with --split). DIR receives train.parquet and manifest.json, atomically.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from dicelab.data.resampling._presets import VARIANTS
from dicelab.data.resampling._resample import ResampleResult, resample_frame
from dicelab.data.resampling._store import MANIFEST_FILE, VARIANT_FILE, write_variant
from dicelab.errors import ConfigError, DataError

FORMATS = ("auto", "tsv", "csv", "jsonl", "parquet")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT", help="a pairs file or a hub dataset name (e.g. glue/qqp)")
    # nargs="?" plus the hidden -negative flag below: argparse takes "--variant -negative" for two options.
    parser.add_argument(
        "--variant", nargs="?", required=True, metavar="NAME", help=f"one of: {', '.join(VARIANTS)}"
    )
    parser.add_argument(
        "-negative", dest="variant", action="store_const", const="-negative", help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--out", required=True, type=Path, metavar="DIR", help="output directory (must not exist)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--size", type=int, default=None, help="number of examples (overrides the preset)")
    parser.add_argument(
        "--positive-rate", type=float, default=None, help="share of positives (overrides the preset)"
    )
    parser.add_argument("--split", default="train", help="split of a hub dataset (default train)")
    parser.add_argument(
        "--format", choices=FORMATS, default="auto", help="file format (default: from suffix)"
    )
    parser.add_argument("--positive-label", default="1", help='the positive label (default "1")')
    parser.add_argument(
        "--extractor",
        default="auto",
        help='mention extractor: "auto" (spaCy en_core_web_sm if installed, else builtin), "builtin", '
        "or a spaCy pipeline name",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace DIR if it exists")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    if args.variant is None:
        raise ConfigError(f"--variant needs a value (one of: {', '.join(VARIANTS)})")
    console = Console(stderr=True)
    with console.status(f"reading {args.input}"):
        frame = read_input(args.input, split=args.split, format=args.format)
    with console.status(f"building {args.variant} from {len(frame):,} pairs"):
        result = resample_frame(
            frame,
            args.variant,
            size=args.size,
            positive_rate=args.positive_rate,
            seed=args.seed,
            positive_label=args.positive_label,
            extractor=args.extractor,
        )
    with console.status(f"writing {args.out}"):
        write_variant(result, args.out, overwrite=args.overwrite)
    _print_summary(result, args.out)
    return 0


def read_input(name: str, *, split: str = "train", format: str = "auto") -> pd.DataFrame:
    """A pairs file (rows indexed by their line, for error messages) or one split of a hub dataset
    (a hub name, or a local directory in hub layout)."""
    from dicelab.data import read_hub_split
    from dicelab.data.readers import FILE_SUFFIXES, read_located

    path = Path(name)
    if path.is_file():
        return read_located(path, "pairs", format)
    if not path.exists() and (format != "auto" or path.suffix.lower() in FILE_SUFFIXES):
        raise DataError(f"{path}: no such file")
    return read_hub_split(name, split)


def _print_summary(result: ResampleResult, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    manifest = result.manifest
    table = Table(title=f"{manifest['variant']} -> {out / VARIANT_FILE}")
    for column in ("", "rows", *manifest["output"]["counts"], "positive rate"):
        table.add_column(column, justify="right")
    for name in ("input", "target", "output"):
        part = manifest[name]
        counts = part["counts"]
        table.add_row(
            name,
            f"{sum(counts.values()):,}",
            *(f"{n:,}" for n in counts.values()),
            f"{part['positive_rate']:.2%}",
        )
    console = Console()
    console.print(table)
    for label, stats in manifest["augmentation"].items():
        console.print(
            f"label {label}: {stats['created']:,} new pairs from {stats['used']:,} templates "
            f"({stats['skipped_no_mention']:,} without a replaceable mention, "
            f"{stats['skipped_no_new_pair']:,} without a new pair), method {manifest['method']}"
        )
    console.print(f"manifest: {out / MANIFEST_FILE}")
