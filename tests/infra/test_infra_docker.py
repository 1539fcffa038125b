"""The Dockerfiles: base image and pins agree with pyproject.toml, non-root, no secrets (static checks:
Docker cannot build here)."""

from __future__ import annotations

import re

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|CREDENTIAL|PRIVATE|(^|_)KEY($|_)", re.IGNORECASE)


@pytest.fixture
def dicelab_dockerfile(infra):
    return infra.root / "docker" / "Dockerfile"


@pytest.fixture
def mlflow_dockerfile(infra):
    return infra.root / "mlflow" / "Dockerfile"


def base_image(infra, path) -> str:
    (from_args,) = [args for keyword, args in infra.dockerfile_instructions(path) if keyword == "FROM"]
    return infra.substitute(from_args, infra.dockerfile_args(path))


def test_base_image_is_rays_gpu_image_of_the_pinned_ray(infra, dicelab_dockerfile):
    image = base_image(infra, dicelab_dockerfile)
    match = re.fullmatch(r"rayproject/ray:(?P<ray>[\w.]+)-py(?P<py>\d)(?P<minor>\d+)-gpu", image)
    assert match, f"expected Ray's GPU image, got {image}"
    assert match["ray"] == infra.ray_pin
    python = Version(f"{match['py']}.{match['minor']}")
    assert python in SpecifierSet(infra.pyproject["project"]["requires-python"])


def test_pinned_versions_satisfy_pyproject(infra, dicelab_dockerfile, mlflow_dockerfile):
    args = infra.dockerfile_args(dicelab_dockerfile)
    assert args["RAY_VERSION"] == infra.ray_pin
    assert Version(args["TORCH_VERSION"]) in infra.requirement("torch").specifier
    assert Version(args["MLFLOW_VERSION"]) in infra.requirement("mlflow").specifier
    # The tracking server speaks the same MLflow as the clients logging to it.
    assert infra.dockerfile_args(mlflow_dockerfile)["MLFLOW_VERSION"] == args["MLFLOW_VERSION"]


def test_installs_this_checkout_with_cuda_torch(infra, dicelab_dockerfile):
    instructions = infra.dockerfile_instructions(dicelab_dockerfile)
    args = infra.dockerfile_args(dicelab_dockerfile)
    runs = [arguments for keyword, arguments in instructions if keyword == "RUN"]
    torch_index = [run for run in runs if "download.pytorch.org/whl/" in run]
    assert torch_index, "CUDA torch must come from PyTorch's index"
    assert "https://download.pytorch.org/whl/${TORCH_CUDA}" in torch_index[0]
    assert re.fullmatch(r"cu\d{3}", args["TORCH_CUDA"])
    assert any(re.search(r"pip install \.(\s|$)", run) for run in runs), "the image must pip install the repo"
    # Torch is installed before the package, else `pip install .` pulls PyPI's default wheel.
    assert runs.index(torch_index[0]) < next(i for i, run in enumerate(runs) if "pip install ." in run)
    copied = " ".join(arguments for keyword, arguments in instructions if keyword == "COPY")
    for source in ("pyproject.toml", "README.md", "platform/"):
        assert source in copied


def test_build_context_holds_only_what_the_image_copies(infra, dicelab_dockerfile):
    ignore = (dicelab_dockerfile.parent / "Dockerfile.dockerignore").read_text().splitlines()
    rules = [line.strip() for line in ignore if line.strip() and not line.startswith("#")]
    assert rules[0] == "*", "exclude everything (.venv, .git, data), then re-include the sources"
    included = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    copied = set()
    for keyword, arguments in infra.dockerfile_instructions(dicelab_dockerfile):
        if keyword == "COPY":
            sources = [part for part in arguments.split() if not part.startswith("--")][:-1]
            copied.update(source.rstrip("/") for source in sources)
    assert included == copied


@pytest.mark.parametrize("name", ["dicelab_dockerfile", "mlflow_dockerfile"])
def test_runs_as_a_non_root_user(request, infra, name):
    instructions = infra.dockerfile_instructions(request.getfixturevalue(name))
    users = [arguments.split(":")[0] for keyword, arguments in instructions if keyword == "USER"]
    assert users, "set a USER: images run as root otherwise"
    assert users[-1] not in {"root", "0"}


@pytest.mark.parametrize("name", ["dicelab_dockerfile", "mlflow_dockerfile"])
def test_holds_no_secrets(request, infra, name):
    for keyword, arguments in infra.dockerfile_instructions(request.getfixturevalue(name)):
        if keyword in {"ARG", "ENV"}:
            names = re.findall(r"(\w+)=", arguments) or [arguments.split()[0]]
            assert not [n for n in names if SECRET_NAME.search(n)], f"{keyword} {arguments}"
