"""`dicelab analyze` of a 1,000-trial sweep in a SQLite store, two ways alternated ABBA in fresh processes
(`command_ab`), for the keep-or-delete decision on a speed-up (it stays only at >= 20 % less wall time):

- `--compare sql`: the analysis reading MLflow's tables with SQL (the default for a database URI) against
  MLflow's public client on the same URI (`DICELAB_ANALYSIS_SQL=0`).

    .venv/bin/python tests/analysis/large_experiment.py /tmp/dl-ab/mlflow.db --trials 1000
    .venv/bin/python benchmarks/analyze_ab.py --compare sql --pairs 4 -- analyze --experiment big \\
        --tracking-uri sqlite:////tmp/dl-ab/mlflow.db --out /tmp/dl-ab/report

The result (medians, ratios of the second way to the first: below 1, the second is faster) is printed and
written to benchmarks/results/analyze_ab_<compare>.json (or --result) with the date and the machine. A command
that fails stops the benchmark with its last line, exit code 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

from command_ab import CommandFailed, alternate

RUN = "from dicelab.cli.dispatch import program; program()"
PUBLIC = "import os; os.environ['DICELAB_ANALYSIS_SQL'] = '0'"
COMPARISONS = {"sql": {"public client": f"{PUBLIC}; {RUN}", "sql": RUN}}
RESULTS = Path(__file__).resolve().parent / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", choices=sorted(COMPARISONS), required=True)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument(
        "--result", type=Path, help="the JSON file (default: results/analyze_ab_<compare>.json)"
    )
    parser.add_argument("command", nargs="+", help="the `dicelab analyze` command's arguments (after --)")
    args = parser.parse_args()
    try:
        result = alternate(COMPARISONS[args.compare], args.command, args.pairs)
    except CommandFailed as failed:
        print(f"analyze_ab.py: {failed}", file=sys.stderr)
        return 2
    result = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared with other jobs",
        "reproduce": f"benchmarks/analyze_ab.py --compare {args.compare} --pairs {args.pairs} -- "
        + " ".join(args.command),
        **result,
    }
    out = args.result or RESULTS / f"analyze_ab_{args.compare}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
