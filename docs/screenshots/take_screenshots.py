"""Screenshots of the MLflow UI on a dicelab store, by headless Chromium (run on demand, not in tests).

    .venv/bin/python docs/screenshots/take_screenshots.py [--tracking-uri URI] [--experiment NAME]

Starts `dicelab ui` on a free port of 127.0.0.1 over the store (default: ./.dicelab/mlflow.db, as `make demo`
leaves it), opens the sweep's runs (best first), its chart view, its best trial and the parent run's report
artifact, writes one PNG per page next to this script, and stops the server by its process group id.
Needs Chromium (`apt-get install -y chromium`, or --chromium PATH). It is also how to check the UI in a real
browser after a change to what dicelab records. On a loaded machine a page may be captured before it has
drawn (charts still loading, an empty report pane): look at every PNG and retake (`--out` to another folder
keeps the good ones).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from mlflow import MlflowClient

from dicelab.tracking import conventions as names
from dicelab.tracking import links, resolve_tracking_uri

HERE = Path(__file__).resolve().parent
WINDOW = "1600,1000"
RENDER_MS = 20000  # virtual time for the single-page app to fetch and draw (Chromium fast-forwards idle time)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI, else ./.dicelab/mlflow.db")
    parser.add_argument("--experiment", help="the sweep to show (default: the newest sweep in the store)")
    parser.add_argument("--out", type=Path, default=HERE, help=f"folder for the PNGs (default: {HERE})")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = parser.parse_args()
    if not args.chromium:
        parser.error("no chromium on PATH (apt-get install -y chromium, or pass --chromium)")
    uri = resolve_tracking_uri(args.tracking_uri)
    client = MlflowClient(uri)
    experiment = links.find_experiment(client, args.experiment)
    if experiment is None:
        parser.error(f"no sweep in {uri}: run `make demo` first")
    pages = _pages(client, experiment.experiment_id)

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "dicelab.cli", "ui", "--tracking-uri", uri, "--port", str(port)]
    server = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        _wait_healthy(base, server)
        args.out.mkdir(parents=True, exist_ok=True)
        for name, path in pages.items():
            target = args.out / f"{name}.png"
            _screenshot(args.chromium, f"{base}/{path}", target)
            print(f"{target}  <-  {base}/{path}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    return 0


def _pages(client: MlflowClient, experiment_id: str) -> dict[str, str]:
    """PNG name -> path in the UI (after the server root)."""
    parents = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{names.ROLE}` = '{names.ROLE_PARENT}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if not parents:
        raise SystemExit(f"experiment {experiment_id} has no sweep parent run")
    parent = parents[0]
    metric = parent.data.tags.get(names.PRIMARY_METRIC, "f1")
    best = client.search_runs(
        [experiment_id],
        filter_string=(
            f"tags.`{names.ROLE}` = '{names.ROLE_TRIAL}' and "
            f"tags.`{names.SWEEP_ID}` = '{parent.data.tags[names.SWEEP_ID]}'"
        ),
        order_by=[f"metrics.`{names.best_metric(metric)}` DESC"],
        max_results=1,
    )
    # what `dicelab ui` links to: the trials only, best first, the metric and swept parameters as columns
    params = links.swept_params(client, experiment_id)
    runs = links.trials_view_url(client, "", experiment_id, metric, params).lstrip("/")
    pages = {
        "runs": runs,
        "chart": f"{runs}&compareRunsMode=CHART",
        "report": f"#/experiments/{experiment_id}/runs/{parent.info.run_id}/artifactPath/"
        f"{names.REPORT_DIR}/report.html?{links.TRAINING_VIEW}",  # as training, not a GenAI evaluation
    }
    if best:
        pages["trial"] = links.run_url("", experiment_id, best[0].info.run_id).lstrip("/")
    return pages


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_healthy(base: str, server: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit("dicelab ui exited before answering")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the UI at {base} did not answer within {timeout_s:.0f} s")


def _screenshot(chromium: str, url: str, target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="dicelab-chromium-") as profile:
        subprocess.run(
            [
                chromium,
                "--headless=new",
                "--no-sandbox",  # running as root in a container
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={WINDOW}",
                f"--virtual-time-budget={RENDER_MS}",
                f"--screenshot={target}",
                url,
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )


if __name__ == "__main__":
    sys.exit(main())
