"""Fixtures of the infra tests: the repository's pins, and readers for the files under infra/."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

REPO_ROOT = Path(__file__).resolve().parents[2]
INFRA_DIR = REPO_ROOT / "infra"
LAUNCHER_CONFIGS = sorted((INFRA_DIR / "ray").glob("*.yaml"))


class InfraFiles:
    """The files under infra/ and the pyproject pins they must agree with."""

    root = INFRA_DIR

    def __init__(self) -> None:
        self.pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())

    def requirement(self, name: str) -> Requirement:
        """The pyproject dependency on `name`; e.g. requirement("ray").specifier is >=2.55,<2.61."""
        for line in self.pyproject["project"]["dependencies"]:
            req = Requirement(line)
            if req.name == name:
                return req
        raise KeyError(f"pyproject.toml has no dependency on {name}")

    @property
    def ray_pin(self) -> str:
        """The Ray of dicelab's image (infra/docker/Dockerfile), which every infra file pins: one release
        inside pyproject's range (a cluster runs one Ray version; the driver installs that one)."""
        (arg,) = [
            a
            for k, a in self.dockerfile_instructions(INFRA_DIR / "docker" / "Dockerfile")
            if k == "ARG" and a.startswith("RAY_VERSION=")
        ]
        version = arg.partition("=")[2]
        spec = self.requirement("ray").specifier
        assert spec.contains(version), f"the image's Ray {version} is outside pyproject.toml's {spec}"
        return version

    @property
    def version(self) -> str:
        return self.pyproject["project"]["version"]

    @staticmethod
    def load_yaml(path: Path) -> dict:
        return yaml.safe_load(path.read_text())

    @staticmethod
    def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
        """(INSTRUCTION, arguments) pairs: comments dropped, continuation lines joined."""
        instructions: list[tuple[str, str]] = []
        pending = ""
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            keyword, _, arguments = (pending + line).partition(" ")
            instructions.append((keyword.upper(), arguments.strip()))
            pending = ""
        return instructions

    def dockerfile_args(self, path: Path) -> dict[str, str]:
        """Default values of the Dockerfile's ARGs (a re-declaration without a value keeps the first)."""
        defaults: dict[str, str] = {}
        for keyword, arguments in self.dockerfile_instructions(path):
            if keyword == "ARG" and "=" in arguments:
                name, value = arguments.split("=", 1)
                defaults.setdefault(name, value.strip('"'))
        return defaults

    @staticmethod
    def substitute(text: str, values: dict[str, str]) -> str:
        """Expand ${NAME} and $NAME the way Docker expands ARG values."""
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values[m.group(1) or m.group(2)], text)


@pytest.fixture(scope="session")
def infra() -> InfraFiles:
    return InfraFiles()


@pytest.fixture(params=LAUNCHER_CONFIGS, ids=lambda path: path.name)
def launcher_path(request) -> Path:
    return request.param
