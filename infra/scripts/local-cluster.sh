#!/usr/bin/env bash
# A Ray cluster (head + N worker nodes) and an MLflow tracking server on 127.0.0.1 of this machine.
#
#   infra/scripts/local-cluster.sh up       start them, wait until they answer, print the client env
#   infra/scripts/local-cluster.sh status   addresses, and whether each recorded process is alive
#   infra/scripts/local-cluster.sh down     stop exactly the processes `up` started, nothing else
#
# Each component is started in a new session (setsid); the state dir records its leader's pid and
# start time. `down` signals only processes in those sessions, after checking the leader is still
# the process `up` started (pid reuse), and never looks processes up by name.
#
# Settings (environment):
#   DICELAB_CLUSTER_DIR     state dir: pids, logs, token, mlflow.db, artifacts (.dicelab/local-cluster)
#   DICELAB_RAY_PORT        Ray GCS port (6379)
#   DICELAB_DASHBOARD_PORT  Ray dashboard + Jobs API port (8265)
#   DICELAB_MLFLOW_PORT     MLflow server port (5000)
#   DICELAB_WORKERS         worker nodes besides the head (1)
#   DICELAB_HEAD_CPUS, DICELAB_WORKER_CPUS   CPUs each node offers to Ray (1, 1)
#   DICELAB_OBJECT_STORE_MB object store of each node (256)
#   DICELAB_PYTHON          python with dicelab, ray and mlflow installed (.venv/bin/python if present)
#   DICELAB_UP_TIMEOUT      seconds `up` waits for Ray and MLflow (300)
#   DICELAB_STOP_TIMEOUT    seconds `down` waits for a graceful exit before SIGKILL (30)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$SCRIPT_DIR/../.." && pwd)"

STATE_DIR="${DICELAB_CLUSTER_DIR:-.dicelab/local-cluster}"
[[ "$STATE_DIR" == /* ]] || STATE_DIR="$PWD/$STATE_DIR"
PIDS_FILE="$STATE_DIR/pids"
ENV_FILE="$STATE_DIR/env"
TOKEN_FILE="$STATE_DIR/auth_token"
LOG_DIR="$STATE_DIR/logs"

RAY_PORT="${DICELAB_RAY_PORT:-6379}"
DASHBOARD_PORT="${DICELAB_DASHBOARD_PORT:-8265}"
MLFLOW_PORT="${DICELAB_MLFLOW_PORT:-5000}"
WORKERS="${DICELAB_WORKERS:-1}"
HEAD_CPUS="${DICELAB_HEAD_CPUS:-1}"
WORKER_CPUS="${DICELAB_WORKER_CPUS:-1}"
OBJECT_STORE_MB="${DICELAB_OBJECT_STORE_MB:-256}"
UP_TIMEOUT="${DICELAB_UP_TIMEOUT:-300}"
STOP_TIMEOUT="${DICELAB_STOP_TIMEOUT:-30}"
if [[ -n "${DICELAB_PYTHON:-}" ]]; then
    PYTHON="$DICELAB_PYTHON"
elif [[ -x "$REPO_ROOT/.venv/bin/python" ]]; then
    PYTHON="$REPO_ROOT/.venv/bin/python"
else
    PYTHON="$(command -v python3)"
fi

die() { echo "local-cluster: $*" >&2; exit 1; }

# The start time tells a recorded process apart from a later one that reuses its pid.
start_time() { ps -o lstart= -p "$1" 2>/dev/null | tr -s ' ' || true; }

# Recorded leader still running and still the process `up` started?
is_ours() { [[ -n "$2" && "$(start_time "$1")" == "$2" ]]; }

# Every process in session $1. Only the recorded leader's descendants can be in it (unless they left
# with their own setsid), and its id is not reused while any member lives.
session_members() { ps -A -o pid= -o sid= | awk -v sid="$1" '$2 == sid { print $1 }'; }

# Start "$@" as the leader of a new session, output to $LOG_DIR/$1.log; record "<name> <pid> <start>".
start_detached() {
    local name="$1"; shift
    "$PYTHON" -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' "$@" \
        >"$LOG_DIR/$name.log" 2>&1 </dev/null &
    local pid=$!
    local started=""
    for _ in 1 2 3 4 5 6 7 8 9 10; do  # ps may not see the child for a moment
        started="$(start_time "$pid")"
        [[ -n "$started" ]] && break
        sleep 0.1
    done
    echo "$name $pid $started" >>"$PIDS_FILE"
}

port_is_free() {
    "$PYTHON" - "$1" <<'EOF'
import socket, sys
with socket.socket() as sock:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is no conflict
    try:
        sock.bind(("127.0.0.1", int(sys.argv[1])))
    except OSError:
        sys.exit(1)
EOF
}

# Wait until MLflow answers and Ray wrote its ready file; fail as soon as either process exits.
wait_until_up() {
    local deadline=$((SECONDS + UP_TIMEOUT)) mlflow_up="" name
    while :; do
        if [[ -z "$mlflow_up" ]] && "$PYTHON" -c \
            'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' \
            "http://127.0.0.1:$MLFLOW_PORT/health" 2>/dev/null; then
            mlflow_up=1
        fi
        [[ -n "$mlflow_up" && -e "$STATE_DIR/ray.ready" ]] && return 0
        for name in ray mlflow; do
            if ! kill -0 "$(pid_of "$name")" 2>/dev/null; then
                tail -n 20 "$LOG_DIR/$name.log" >&2
                echo "local-cluster: $name exited during start-up" >&2
                return 1
            fi
        done
        if ((SECONDS >= deadline)); then
            echo "local-cluster: not up after ${UP_TIMEOUT}s (DICELAB_UP_TIMEOUT)" >&2
            return 1
        fi
        sleep 1
    done
}

pid_of() { awk -v name="$1" '$1 == name { print $2 }' "$PIDS_FILE"; }

write_env_file() {
    local gcs_address="$1"
    cat >"$ENV_FILE.tmp" <<EOF
# Client settings for the local cluster: source this file.
export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN_PATH=$TOKEN_FILE
export RAY_API_SERVER_ADDRESS=http://127.0.0.1:$DASHBOARD_PORT
export MLFLOW_TRACKING_URI=http://127.0.0.1:$MLFLOW_PORT
# Only for GCS clients (ray status, ray.init): Ray would otherwise swap 127.0.0.1 for this
# machine's network address, where the cluster does not listen.
export RAY_ADDRESS=$gcs_address
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
EOF
    mv "$ENV_FILE.tmp" "$ENV_FILE"
}

cmd_up() {
    if [[ -s "$PIDS_FILE" ]]; then
        local name pid started
        while read -r name pid started; do
            is_ours "$pid" "$started" && die "already up ($name is pid $pid); run 'down' first"
        done <"$PIDS_FILE"
        cmd_down >/dev/null  # leftovers of a cluster that died on its own
    fi
    local setting
    for setting in "DICELAB_RAY_PORT=$RAY_PORT" "DICELAB_DASHBOARD_PORT=$DASHBOARD_PORT" \
        "DICELAB_MLFLOW_PORT=$MLFLOW_PORT"; do
        port_is_free "${setting#*=}" \
            || die "port ${setting#*=} on 127.0.0.1 is in use; choose another with ${setting%%=*}"
    done
    # found, not imported: importing them costs seconds of CPU that the servers spend again anyway
    "$PYTHON" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("ray") and u.find_spec("mlflow")))' \
        2>/dev/null || die "$PYTHON has no ray and mlflow installed; set DICELAB_PYTHON"

    mkdir -p "$LOG_DIR" "$STATE_DIR/mlartifacts"
    rm -f "$STATE_DIR/ray.ready" "$ENV_FILE"
    : >"$PIDS_FILE"
    # From here on, any failure, interrupt or closed terminal/pipe stops whatever was started.
    trap 'exit 130' INT TERM HUP PIPE
    trap 'if [[ -z "${UP_DONE:-}" ]]; then
              echo "local-cluster: up failed; stopping what was started (logs: $LOG_DIR)" >&2
              cmd_down >&2 || true
          fi' EXIT
    # A fresh token per cluster, readable by this user only.
    (umask 077 && "$PYTHON" -c 'import secrets; print(secrets.token_hex(32), end="")' >"$TOKEN_FILE")
    # Ray's temp dirs (one per node) hold its sockets, and Unix socket paths are short: keep it near /.
    local ray_tmp
    ray_tmp="$(mktemp -d "${TMPDIR:-/tmp}/dicelab-ray.XXXXXX")"
    echo "$ray_tmp" >"$STATE_DIR/ray_tmpdir"

    # Everything below inherits this environment: the Ray nodes, their workers, the job drivers.
    export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$TOKEN_FILE"
    export RAY_USAGE_STATS_ENABLED=0
    export MLFLOW_TRACKING_URI="http://127.0.0.1:$MLFLOW_PORT"
    PATH="$(dirname "$PYTHON"):$PATH"  # job entrypoints find `dicelab` and `python`
    export PATH
    export DICELAB_LOCAL_CLUSTER="$STATE_DIR"  # marks every process of this cluster

    start_detached ray "$PYTHON" "$SCRIPT_DIR/local_ray_cluster.py" \
        --port "$RAY_PORT" --dashboard-port "$DASHBOARD_PORT" --workers "$WORKERS" \
        --head-cpus "$HEAD_CPUS" --worker-cpus "$WORKER_CPUS" --object-store-mb "$OBJECT_STORE_MB" \
        --temp-dir "$ray_tmp" --ready-file "$STATE_DIR/ray.ready" --timeout "$UP_TIMEOUT"
    # MLflow's job runner (GenAI evaluation jobs, several processes) is not used by dicelab.
    start_detached mlflow env MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false \
        "$PYTHON" -m mlflow server --host 127.0.0.1 --port "$MLFLOW_PORT" --workers 1 \
        --backend-store-uri "sqlite:///$STATE_DIR/mlflow.db" --artifacts-destination "$STATE_DIR/mlartifacts"

    echo "local-cluster: starting Ray (head + $WORKERS workers) and MLflow; logs in $LOG_DIR"
    wait_until_up
    UP_DONE=1

    write_env_file "$("$PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["gcs_address"])' \
        "$STATE_DIR/ray.ready")"
    cmd_status
}

cmd_status() {
    if [[ ! -s "$PIDS_FILE" ]]; then
        echo "local-cluster: down (no processes recorded in $STATE_DIR)"
        return 3
    fi
    local name pid started all_alive=0
    while read -r name pid started; do
        if is_ours "$pid" "$started"; then
            printf '%-7s pid %-8s alive   (%s processes in its session)\n' \
                "$name" "$pid" "$(session_members "$pid" | wc -l | tr -d ' ')"
        else
            printf '%-7s pid %-8s dead\n' "$name" "$pid"
            all_alive=1
        fi
    done <"$PIDS_FILE"
    if [[ -f "$ENV_FILE" ]]; then  # the addresses `up` used, whatever this shell's settings are
        (
            # shellcheck source=/dev/null
            source "$ENV_FILE"
            echo "Ray dashboard / Jobs API: $RAY_API_SERVER_ADDRESS"
            echo "Ray GCS address:          $RAY_ADDRESS"
            echo "MLflow UI / tracking URI: $MLFLOW_TRACKING_URI"
        )
        echo "Client environment (source $ENV_FILE):"
        grep '^export' "$ENV_FILE" | sed 's/^/  /'
    fi
    return "$all_alive"
}

# SIGTERM the leader (Ray and MLflow shut their children down), then whatever is left in its session.
stop_session() {
    local name="$1" pid="$2" started="$3"
    if is_ours "$pid" "$started"; then
        kill -TERM "$pid" 2>/dev/null || true
        local waited=0
        while kill -0 "$pid" 2>/dev/null && ((waited < STOP_TIMEOUT * 10)); do
            sleep 0.1
            waited=$((waited + 1))
        done
    elif kill -0 "$pid" 2>/dev/null; then
        # Same pid, another process: the leader is gone, so no member of its session can remain either.
        echo "local-cluster: pid $pid is no longer $name; leaving it alone"
        return 0
    fi
    local signal member
    for signal in TERM KILL; do
        for member in $(session_members "$pid"); do
            kill -"$signal" "$member" 2>/dev/null || true
        done
        [[ -z "$(session_members "$pid")" ]] && break
        sleep 2
    done
    echo "local-cluster: stopped $name (pid $pid)"
}

cmd_down() {
    if [[ ! -s "$PIDS_FILE" ]]; then
        echo "local-cluster: nothing recorded in $STATE_DIR; nothing to stop"
        return 0
    fi
    local name pid started
    while read -r name pid started; do
        stop_session "$name" "$pid" "$started"
    done <"$PIDS_FILE"
    if [[ -f "$STATE_DIR/ray_tmpdir" ]]; then
        local ray_tmp
        ray_tmp="$(cat "$STATE_DIR/ray_tmpdir")"
        [[ "$(basename "$ray_tmp")" == dicelab-ray.* ]] && rm -rf "$ray_tmp"
    fi
    rm -f "$PIDS_FILE" "$TOKEN_FILE" "$ENV_FILE" "$STATE_DIR/ray.ready" "$STATE_DIR/ray_tmpdir"
}

case "${1:-}" in
    up) cmd_up ;;
    status) cmd_status ;;
    down) cmd_down ;;
    *) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
