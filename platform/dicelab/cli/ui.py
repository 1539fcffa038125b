"""`dicelab ui`: the MLflow UI on the configured tracking store, bound to 127.0.0.1."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from dicelab.errors import TrackingError
from dicelab.tracking import links
from dicelab.tracking.store import (
    ARTIFACTS_DIR,
    check_tracking,
    mark_training_experiment,
    require_store_file,
    resolve_tracking_uri,
    sqlite_path,
)

HOST = "127.0.0.1"  # never exposed beyond this machine; use infra/ for a shared server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracking-uri",
        help="store to browse (default: env MLFLOW_TRACKING_URI, else sqlite under ./.dicelab/)",
    )
    parser.add_argument("--port", type=port, default=5000, help="port on 127.0.0.1 (default: 5000)")
    parser.add_argument(
        "--experiment", metavar="NAME", help="the sweep whose runs to link to (default: the newest sweep)"
    )


def port(text: str) -> int:
    """--port's type: argparse says "invalid port value" for a non-number, this the range (a port of 70000
    would end in socket's OverflowError)."""
    number = int(text)
    if not 1 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{number} is not a port (1 to 65535)")
    return number


def run(args: argparse.Namespace) -> int:
    uri = resolve_tracking_uri(args.tracking_uri)
    if uri.startswith(("http://", "https://")):
        check_tracking(uri)
        sweep = _sweep_line(uri, uri, args.experiment)  # an unknown --experiment fails before any line
        print(f"{uri} is an MLflow server: its UI is at {uri}", flush=True)
        print(sweep, flush=True)
        return 0
    with socket.socket() as probe:
        try:
            probe.bind((HOST, args.port))
        except OSError:
            raise TrackingError(f"port {args.port} on {HOST} is taken (choose another with --port)") from None
    require_store_file(uri)  # a mistyped path would open an empty store of its own
    check_tracking(uri)
    base = f"http://{HOST}:{args.port}"
    sweep = _sweep_line(uri, base, args.experiment)  # an unknown --experiment fails before the UI starts
    print(f"MLflow UI for {uri} at {base} (Ctrl-C to stop)", flush=True)
    print(sweep, flush=True)
    # `mlflow ui` is `mlflow server` with 4 workers and a job runner; one worker starts faster and is plenty.
    command = [
        *(sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri),
        *("--host", HOST, "--port", str(args.port), "--workers", "1"),
        *("--artifacts-destination", str(sqlite_path(uri).parent / ARTIFACTS_DIR)),
    ]
    os.environ["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    # The server replaces this process, so that stopping this process id stops the server.
    os.execv(sys.executable, command)
    return 0  # not reached


def _sweep_line(uri: str, base: str, name: str | None) -> str:
    """The line linking to the runs of the named (or newest) sweep, best first, or saying that the store has
    no sweep yet; an error naming the stores' experiments when `name` is not one of them."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = links.find_experiment(client, name)
    if experiment is None:
        return "no sweep in this store yet (run one: dicelab sweep CONFIG)"
    mark_training_experiment(client, experiment)  # so the UI opens on the runs, also for older stores
    metric = links.sweep_metric(client, experiment.experiment_id)
    params = links.swept_params(client, experiment.experiment_id)
    url = links.trials_view_url(client, base, experiment.experiment_id, metric, params)
    return f"sweep {experiment.name!r}: {url}"  # its trials, best first
