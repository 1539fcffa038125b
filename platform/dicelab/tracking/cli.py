"""`dicelab ui`: the MLflow UI on the configured tracking store, bound to 127.0.0.1."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from dicelab.errors import TrackingError
from dicelab.tracking.store import check_tracking, resolve_tracking_uri

HOST = "127.0.0.1"  # never exposed beyond this machine; use infra/ for a shared server


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracking-uri",
        help="store to browse (default: env MLFLOW_TRACKING_URI, else sqlite under ./.dicelab/)",
    )
    parser.add_argument("--port", type=int, default=5000, help="port on 127.0.0.1 (default: 5000)")


def run(args: argparse.Namespace) -> int:
    uri = resolve_tracking_uri(args.tracking_uri)
    check_tracking(uri)
    if uri.startswith(("http://", "https://")):
        print(f"{uri} is an MLflow server: its UI is at {uri}", flush=True)
        return 0
    with socket.socket() as probe:
        try:
            probe.bind((HOST, args.port))
        except OSError:
            raise TrackingError(f"port {args.port} on {HOST} is in use (choose another with --port)") from None
    print(f"MLflow UI for {uri} at http://{HOST}:{args.port} (Ctrl-C to stop)", flush=True)
    # The UI replaces this process, so that stopping this process id stops the server.
    command = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", HOST]
    os.execv(sys.executable, [*command, "--port", str(args.port)])
    return 0  # not reached
