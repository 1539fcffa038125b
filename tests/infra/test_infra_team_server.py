"""The local team server (infra/scripts/mlflow-server.sh, dicelab.tracking.team_server) runs `mlflow server`
as the compose file does: the same flags, environment and login settings (one deployment, two starts)."""

from __future__ import annotations

import configparser
import subprocess

from dicelab.tracking import team_server

# Differ per deployment: where it listens and where artifacts go (MinIO there, a directory here).
DEPLOYMENT_FLAGS = ("--host", "--port", "--artifacts-destination")


def _compose_mlflow(infra) -> dict:
    return infra.load_yaml(infra.root / "mlflow" / "docker-compose.yaml")["services"]["mlflow"]


def test_server_flags_equal_the_compose_files(infra):
    command = _compose_mlflow(infra)["command"]
    assert command[:2] == ["mlflow", "server"]
    flags = [flag for flag in command[2:] if flag.split("=", 1)[0] not in DEPLOYMENT_FLAGS]
    assert sorted(flags) == sorted(team_server.SERVER_FLAGS)
    assert "--serve-artifacts" in flags and "--app-name=basic-auth" in flags


def test_fewer_workers_change_only_the_workers_flag(monkeypatch, tmp_path):
    monkeypatch.delenv(team_server.WORKERS_VARIABLE, raising=False)
    assert team_server.TeamServer(tmp_path).server_flags == team_server.SERVER_FLAGS
    one = [flag for flag in team_server.SERVER_FLAGS if not flag.startswith("--workers=")] + ["--workers=1"]
    assert sorted(team_server.TeamServer(tmp_path, workers=1).server_flags) == sorted(one)
    monkeypatch.setenv(team_server.WORKERS_VARIABLE, "1")
    assert sorted(team_server.TeamServer(tmp_path).server_flags) == sorted(one)
    assert team_server.TeamServer(tmp_path, workers=3).server_flags.count("--workers=3") == 1


def test_server_environment_equals_the_compose_files(infra):
    environment = _compose_mlflow(infra)["environment"]
    for key, value in team_server.SERVER_ENVIRONMENT.items():
        assert environment[key] == value, key


def test_login_settings_equal_the_compose_files(infra):
    auth = configparser.ConfigParser()
    auth.read(infra.root / "mlflow" / "basic_auth.ini")
    settings = dict(auth["mlflow"])
    settings.pop("database_uri")  # a volume of the container there, the server's directory here
    assert settings == team_server.AUTH_SETTINGS


def test_the_script_prints_its_usage_without_an_action(infra):
    done = subprocess.run(
        [str(infra.root / "scripts" / "mlflow-server.sh")], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    assert "mlflow-server.sh start" in done.stderr and "MLFLOW_TRACKING_PASSWORD" in done.stderr
