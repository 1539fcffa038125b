"""Run a Ray head and N worker nodes on this machine, every port on 127.0.0.1, until SIGTERM.

Started by `local-cluster.sh up` (read that script first). `ray start` cannot do this: for a
multi-node cluster on Linux it replaces 127.0.0.1 with the machine's network address, so the GCS
and the raylets would listen on every interface. Ray's own launcher for several nodes on one
machine (`ray.cluster_utils.Cluster`), run with Ray's single-machine switch
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, keeps every node on loopback.

Token authentication comes from the environment (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN_PATH), which
every Ray process started here inherits, as do MLFLOW_TRACKING_URI and PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

LOOPBACK = "127.0.0.1"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="GCS port of the head node")
    parser.add_argument("--dashboard-port", type=int, required=True, help="dashboard and Jobs API port")
    parser.add_argument("--workers", type=int, default=1, help="number of worker nodes")
    parser.add_argument("--head-cpus", type=int, default=1)
    parser.add_argument("--worker-cpus", type=int, default=1)
    parser.add_argument("--object-store-mb", type=int, default=256, help="object store size of each node")
    parser.add_argument("--temp-dir", type=Path, required=True, help="each node gets its own dir below it")
    parser.add_argument("--ready-file", type=Path, required=True, help="written once the cluster is up")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the Jobs API")
    return parser.parse_args(argv)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def wait_for_jobs_api(url: str, timeout: float, stop: threading.Event) -> bool:
    """The Jobs API is what `dicelab submit` talks to: the cluster is up once it answers (with the token).

    Returns False when asked to stop first.
    """
    from ray.job_submission import JobSubmissionClient

    deadline = time.monotonic() + timeout
    while not stop.is_set():
        try:
            JobSubmissionClient(url).list_jobs()
            return True
        except Exception as error:  # connection refused / 503 while the dashboard modules start
            if time.monotonic() > deadline:
                message = f"the Jobs API at {url} did not answer in {timeout:.0f}s: {error}"
                raise TimeoutError(message) from error
            stop.wait(1.0)
    return False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Read when ray is imported, and inherited by every process started here:
    # - single-machine mode keeps every node address on 127.0.0.1;
    # - the default temp dir (the head node's, and the cluster's address file) is ours, so no
    #   `ray.init()` elsewhere on this machine finds this cluster;
    # - free metrics ports: the fixed defaults (44217, 44227) clash with any other Ray here.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_TMPDIR"] = str(args.temp_dir)
    os.environ.setdefault("AUTOSCALER_METRIC_PORT", str(free_port()))
    os.environ.setdefault("DASHBOARD_METRIC_PORT", str(free_port()))
    from ray.cluster_utils import Cluster

    object_store_bytes = args.object_store_mb * 1024 * 1024
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "node_ip_address": LOOPBACK,
            "gcs_server_port": args.port,
            "include_dashboard": True,
            "dashboard_host": LOOPBACK,
            "dashboard_port": args.dashboard_port,
            "dashboard_agent_listen_port": None,  # a free port, not the fixed default
            "num_cpus": args.head_cpus,
            "object_store_memory": object_store_bytes,
        },
    )
    # A temp dir per node, as on separate machines: each node's runtime-env agent deletes the job
    # packages its node no longer uses, and in a shared dir that would pull them from under the others.
    for index in range(1, args.workers + 1):
        cluster.add_node(
            node_ip_address=LOOPBACK,
            num_cpus=args.worker_cpus,
            object_store_memory=object_store_bytes,
            temp_dir=str(args.temp_dir / f"worker-{index}"),
        )

    stop = threading.Event()
    # Installed after the nodes exist: until then Ray's own handlers tear down what was started.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())

    dashboard_url = f"http://{LOOPBACK}:{args.dashboard_port}"
    if wait_for_jobs_api(dashboard_url, args.timeout, stop):
        ready = {"gcs_address": cluster.address, "dashboard_url": dashboard_url, "nodes": 1 + args.workers}
        temp_path = args.ready_file.with_suffix(".tmp")
        temp_path.write_text(json.dumps(ready))
        temp_path.replace(args.ready_file)
        print(f"local Ray cluster up: {ready}", flush=True)
        while not stop.wait(timeout=1.0):  # a timeout keeps the main thread responsive to signals
            continue
    print("stopping the local Ray cluster", flush=True)
    cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
