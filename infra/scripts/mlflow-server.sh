#!/usr/bin/env bash
# A team's MLflow tracking server on this machine: PostgreSQL 15 + `mlflow server` with basic auth and
# proxied artifacts, on 127.0.0.1 only (free ports). For a real deployment use infra/mlflow/docker-compose.yaml;
# both run `mlflow server` with the same flags (dicelab.tracking.team_server.SERVER_FLAGS, checked by tests/infra).
#
#   export MLFLOW_TRACKING_USERNAME=admin MLFLOW_TRACKING_PASSWORD=...   # the first admin (from your secrets)
#   infra/scripts/mlflow-server.sh start  [DIR]   initialise (first time) and start; prints the client env
#   infra/scripts/mlflow-server.sh status [DIR]   whether each recorded process is alive
#   infra/scripts/mlflow-server.sh stop   [DIR]   stop MLflow, then PostgreSQL, by their recorded process ids
#
# DIR (default: $DICELAB_SERVER_DIR, else /tmp/dicelab-team-server) holds the database, the artifacts, the logs
# and the pids; as root, PostgreSQL runs as the `postgres` user, so DIR's parents must let it pass.
# DICELAB_PYTHON: a python with dicelab installed (default: the repository's .venv).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"
if [[ -n "${DICELAB_PYTHON:-}" ]]; then
    PYTHON="$DICELAB_PYTHON"
elif [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then
    PYTHON="$REPO_ROOT/.venv/bin/python"
else
    PYTHON="$(command -v python3)"
fi

case "${1:-}" in
    start | stop | status)
        exec "$PYTHON" -m dicelab.tracking.team_server "$1" \
            --dir "${2:-${DICELAB_SERVER_DIR:-/tmp/dicelab-team-server}}"
        ;;
    *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
