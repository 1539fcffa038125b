"""The MLflow tracking server compose file (infra/mlflow/): valid Compose, PostgreSQL + MinIO stores,
credentials only from the environment, login required, published on loopback only."""

from __future__ import annotations

import configparser
import importlib.resources
import json
import re

import jsonschema
import pytest

REQUIRED_VARIABLE = re.compile(r"\$\{(\w+):\?[^}]*\}")  # ${NAME:?message}: compose fails if NAME is unset
SECRET_NAME = re.compile(r"PASSWORD|SECRET|ACCESS_KEY|USER|STORE_URI", re.IGNORECASE)


@pytest.fixture
def compose(infra) -> dict:
    return infra.load_yaml(infra.root / "mlflow" / "docker-compose.yaml")


def test_matches_the_compose_specification(compose):
    # The Compose Specification's JSON schema, as vendored by check-jsonschema (dev dependency).
    vendor = pytest.importorskip("check_jsonschema.builtin_schemas.vendor")
    schema = json.loads((importlib.resources.files(vendor) / "compose-spec.json").read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(compose)


def test_credentials_come_only_from_the_environment(compose, infra):
    for name, service in compose["services"].items():
        for key, value in service.get("environment", {}).items():
            if SECRET_NAME.search(key):
                literal = REQUIRED_VARIABLE.sub("", str(value))
                # What is left around the variables may be a URL's scheme and host, never a credential.
                assert re.fullmatch(r"(postgresql://:@[\w.:/-]+)?", literal), f"{name}.{key} = {value}"
        assert not SECRET_NAME.search(json.dumps(service.get("command", ""))), f"{name} command"
    directory = infra.root / "mlflow"
    assert not list(directory.glob(".env*")), "no env file next to the compose file"
    auth = configparser.ConfigParser()
    auth.read(directory / "basic_auth.ini")
    assert "admin_password" not in auth["mlflow"]


def test_only_mlflow_is_published_and_on_loopback_by_default(compose):
    services = compose["services"]
    assert [name for name, service in services.items() if service.get("ports")] == ["mlflow"]
    for port in services["mlflow"]["ports"]:
        assert port.startswith("${MLFLOW_BIND_ADDRESS:-127.0.0.1}:"), port


def test_tracking_server_stores_and_login(compose, infra):
    mlflow = compose["services"]["mlflow"]
    environment = mlflow["environment"]
    assert environment["MLFLOW_BACKEND_STORE_URI"].startswith("postgresql://")
    assert "@postgres:5432/" in environment["MLFLOW_BACKEND_STORE_URI"]
    assert environment["MLFLOW_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert "--artifacts-destination=s3://mlflow/artifacts" in mlflow["command"]
    assert "--app-name=basic-auth" in mlflow["command"], "the server must ask for a login"
    # The users database lives on the server's volume, so accounts survive a restart.
    auth = configparser.ConfigParser()
    auth.read(infra.root / "mlflow" / "basic_auth.ini")
    database = auth["mlflow"]["database_uri"].removeprefix("sqlite:///")
    mounts = [volume.split(":")[1] for volume in mlflow["volumes"]]
    assert any(database.startswith(mount + "/") for mount in mounts), (database, mounts)
    assert environment["MLFLOW_AUTH_CONFIG_PATH"] == "/etc/mlflow/basic_auth.ini"
    assert mlflow["depends_on"]["create-bucket"]["condition"] == "service_completed_successfully"
