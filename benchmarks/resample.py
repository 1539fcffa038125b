"""Time and peak memory to build each Table 8 variant from a 400,000-pair synthetic QQP-layout file.

    .venv/bin/python benchmarks/resample.py [--pairs 400000] [--workdir .dicelab/bench-resample]

The input is `dicelab.data.synthetic.generate_pairs` (37% positive, entity-dense paraphrase pairs)
written as a GLUE QQP TSV (id qid1 qid2 question1 question2 is_duplicate), generated once and kept in
the working directory. Each measurement runs in its own process pinned to one CPU core (pyarrow limited
to one thread): read the TSV, build the variant with the built-in extractor, write Parquet + manifest.
The baseline, in the same run, only reads the TSV and writes it as Parquet. Peak memory is the process's
maximum resident set size. CPU seconds are the honest single-core figure on a shared machine; wall
seconds include time spent waiting for the core. Goal: every variant under 60 s on one core.
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

BASELINE = "baseline"


def make_input(path: Path, pairs: int, positive_rate: float, seed: int) -> None:
    from dicelab.data.synthetic import generate_pairs

    frame = generate_pairs(pairs, positive_rate, seed)
    lines = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"]
    lines += [
        f"{index}\t{2 * index}\t{2 * index + 1}\t{text_a}\t{text_b}\t{label}"
        for index, (text_a, text_b, label) in enumerate(frame.itertuples(index=False))
    ]
    staging = path.with_suffix(".partial")
    staging.write_text("\n".join(lines) + "\n", encoding="utf-8")
    staging.rename(path)


def measure(variant: str, source: Path, out: Path) -> dict:
    """One measurement, in this (child) process, pinned to one core."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import pyarrow as pa

    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    from dicelab.data.readers import read_located
    from dicelab.data.resampling import resample_frame, write_variant

    wall, cpu = time.perf_counter(), time.process_time()
    frame = read_located(source, "pairs")
    read_s = time.perf_counter() - wall
    if variant == BASELINE:
        out.mkdir(parents=True)
        frame.to_parquet(out / "train.parquet", index=False)
        rows, rate, added, build_s = len(frame), float((frame["label"] == "1").mean()), 0, 0.0
    else:
        start = time.perf_counter()
        result = resample_frame(frame, variant, extractor="builtin")
        build_s = time.perf_counter() - start
        write_variant(result, out)
        output = result.manifest["output"]
        rows, rate, added = output["rows"], output["positive_rate"], output["augmented_rows"]
    return {
        "variant": variant,
        "rows": rows,
        "positive_rate": rate,
        "added": added,
        "read_s": read_s,
        "build_s": build_s,
        "total_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
    }


def run_child(variant: str, source: Path, out: Path) -> dict:
    command = [sys.executable, __file__, f"--child={variant}", "--input", str(source), "--out", str(out)]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    finished = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if finished.returncode != 0:
        raise SystemExit(f"{variant}: failed\n{finished.stderr}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def table(results: list[dict]) -> str:
    baseline = next(result for result in results if result["variant"] == BASELINE)
    lines = [
        "| variant | rows | positive rate | new pairs | build s | total s (wall) | total CPU s | "
        "x baseline (CPU) | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        name = (
            "baseline: read TSV + write Parquet"
            if result["variant"] == BASELINE
            else f"`{result['variant']}`"
        )
        lines.append(
            f"| {name} | {result['rows']:,} | {result['positive_rate']:.1%} | {result['added']:,} | "
            f"{result['build_s']:.1f} | {result['total_s']:.1f} | {result['cpu_s']:.1f} | "
            f"{result['cpu_s'] / baseline['cpu_s']:.1f} | {result['peak_mib']:,.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=400_000)
    parser.add_argument("--positive-rate", type=float, default=0.37)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path(".dicelab/bench-resample"))
    parser.add_argument("--variants", nargs="*", default=None, help="default: all")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.input, args.out)))
        return

    from rich.console import Console

    from dicelab.data.resampling import VARIANTS

    console = Console(stderr=True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    source = args.workdir / f"qqp-{args.pairs}-{args.positive_rate}-{args.seed}.tsv"
    if not source.exists():
        with console.status(f"generating {args.pairs:,} synthetic pairs -> {source}"):
            make_input(source, args.pairs, args.positive_rate, args.seed)
    results = []
    for variant in [BASELINE, *(args.variants or VARIANTS)]:
        out = args.workdir / "out" / variant
        if out.exists():
            shutil.rmtree(out)
        with console.status(f"measuring {variant}"):
            results.append(run_child(variant, source, out))
        result = results[-1]
        console.print(f"{variant}: {result['total_s']:.1f} s wall, {result['cpu_s']:.1f} s CPU")
    print(f"{args.pairs:,} synthetic QQP-layout pairs, {args.positive_rate:.0%} positive, one core per run\n")
    print(table(results))


if __name__ == "__main__":
    main()
