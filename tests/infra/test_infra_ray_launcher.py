"""Ray cluster launcher configs (infra/ray/*.yaml): valid for the installed Ray's launcher schema and for
the checks `ray up` runs before it contacts a cloud, pinned like pyproject.toml, secure by default."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import ray.autoscaler
from packaging.requirements import Requirement
from ray.autoscaler._private.util import prepare_config, validate_config

SCHEMA = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())


def test_the_launcher_configs_exist(infra):
    names = {path.name for path in (infra.root / "ray").glob("*.yaml")}
    assert {"aws-gpu.yaml", "gcp-gpu.yaml", "onprem.yaml"} <= names


def test_matches_the_schema_shipped_with_ray(infra, launcher_path):
    jsonschema.validate(infra.load_yaml(launcher_path), SCHEMA)


def test_passes_the_checks_of_ray_up(infra, launcher_path):
    # What `ray up` does with the file before it starts anything: defaults merged, then validated.
    validate_config(prepare_config(infra.load_yaml(launcher_path)))


def test_schema_rejects_a_misspelled_field(infra, launcher_path):
    config = copy.deepcopy(infra.load_yaml(launcher_path))
    config["max_worker"] = config.pop("max_workers", 2)
    with pytest.raises(jsonschema.ValidationError, match="max_worker"):
        jsonschema.validate(config, SCHEMA)


def test_runs_the_dockerfiles_base_image(infra, launcher_path):
    dockerfile = infra.root / "docker" / "Dockerfile"
    (from_args,) = [a for k, a in infra.dockerfile_instructions(dockerfile) if k == "FROM"]
    base = infra.substitute(from_args, infra.dockerfile_args(dockerfile))
    assert infra.load_yaml(launcher_path)["docker"]["image"] == base


def pinned(commands: list[str], name: str) -> str:
    """The version pinned for `name` in quoted requirements like "torch==2.13.0" inside commands."""
    versions = set()
    for command in commands:
        for quoted in command.split('"')[1::2]:
            try:
                req = Requirement(quoted)
            except ValueError:
                continue
            if req.name == name:
                (spec,) = req.specifier
                versions.add(spec.version)
    assert len(versions) == 1, f"{name} pinned as {versions or 'nothing'} in {commands}"
    return versions.pop()


def test_setup_installs_this_dicelab_with_the_images_pins(infra, launcher_path):
    config = infra.load_yaml(launcher_path)
    commands = config["setup_commands"]
    assert config["file_mounts"]["~/dicelab"] == ".", "the checkout `ray up` runs from is installed"
    assert any("pip install --no-cache-dir ~/dicelab " in command for command in commands)
    args = infra.dockerfile_args(infra.root / "docker" / "Dockerfile")
    assert pinned(commands, "ray") == infra.ray_pin
    assert pinned(commands, "torch") == args["TORCH_VERSION"]
    assert pinned(commands, "mlflow") == args["MLFLOW_VERSION"]
    assert any(f"https://download.pytorch.org/whl/{args['TORCH_CUDA']}" in command for command in commands)
    # The last command fails the node's setup if another dicelab or Ray ended up installed.
    assert f"('{infra.version}', '{infra.ray_pin}')" in commands[-1]


def test_all_launchers_install_the_same_way(infra):
    paths = (infra.root / "ray").glob("*.yaml")
    setups = {path.name: infra.load_yaml(path)["setup_commands"] for path in paths}
    assert len({json.dumps(commands) for commands in setups.values()}) == 1, setups


def test_dashboard_stays_on_loopback_and_token_auth_is_on(infra, launcher_path):
    config = infra.load_yaml(launcher_path)
    head_start = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start
    assert "0.0.0.0" not in json.dumps(config)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        assert "RAY_AUTH_MODE=token ray start" in " ".join(config[key])
    assert "--env RAY_AUTH_MODE=token" in config["docker"]["run_options"]  # job drivers and workers too
    assert config["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"


@pytest.mark.parametrize("name", ["aws-gpu.yaml", "gcp-gpu.yaml"])
def test_cloud_clusters_have_a_cpu_head_and_autoscaled_gpu_workers(infra, name):
    config = infra.load_yaml(infra.root / "ray" / name)
    node_types = config["available_node_types"]
    head = node_types[config["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0
    gpu_types = {n: t for n, t in node_types.items() if t["resources"].get("GPU", 0) >= 1}
    assert len(gpu_types) >= 1
    for node_type in gpu_types.values():
        assert node_type["min_workers"] == 0 < node_type["max_workers"] <= config["max_workers"]
    assert config["idle_timeout_minutes"] > 0
