"""Read a YAML config, apply `--set a.b=value` overrides, check the schema, and report errors on one line."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from dicelab.config.schema import ExperimentConfig
from dicelab.errors import ConfigError


def read_yaml(path: str | Path, _seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read a config mapping; `extends: other.yaml` (relative to this file) is read first, then merged."""
    path = Path(path)
    data = _read_mapping(path)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ConfigError(f"{path}: config key 'extends' must be a file name, got {parent!r}")
    parent_path = (path.parent / parent).resolve()
    if parent_path in _seen:
        raise ConfigError(f"{path}: config key 'extends': {parent} extends itself")
    return deep_merge(read_yaml(parent_path, (*_seen, parent_path)), data)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; any other value in `override` replaces the one in `base`."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read config ({error.strerror or error})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"{where}: invalid YAML ({getattr(error, 'problem', error)})") from None
    if data is None:
        raise ConfigError(f"{path}: config file is empty")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: config must be a mapping of sections, got {type(data).__name__}")
    return data


def parse_override(text: str) -> tuple[str, Any]:
    """`train.lr=3e-5` -> ("train.lr", 3e-05); the value is parsed as YAML (numbers, lists, null)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE with a dotted key, e.g. train.epochs=2")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(f"config key {key!r}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value


def apply_overrides(data: dict[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    data = copy.deepcopy(data)
    for text in overrides or []:
        set_dotted(data, *parse_override(text))
    return data


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the section at `loc` (for "unknown key" messages)."""
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return sorted(model.model_fields)


def format_validation_error(error: ValidationError, model: type[BaseModel] = ExperimentConfig) -> str:
    first = error.errors()[0]
    loc = tuple(first["loc"])
    key = ".".join(str(part) for part in loc) or "<config>"
    if first["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, loc)
        return f"config key {key!r} is not allowed (allowed: {', '.join(allowed)})"
    if first["type"] == "missing":
        return f"config key {key!r} is required"
    return f"config key {key!r}: {first['msg']} (got {first.get('input')!r})"


def parse_config(data: dict[str, Any], source: str = "<config>") -> ExperimentConfig:
    """The schema check only; `dicelab.experiment` adds the registry checks (known loss, task, source)."""
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{source}: {format_validation_error(error)}") from None


def read_config(path: str | Path, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read a config file, apply the overrides and check the schema (see `parse_config`)."""
    return parse_config(apply_overrides(read_yaml(path), overrides), str(path))


def config_to_dict(config: ExperimentConfig) -> dict[str, Any]:
    return config.model_dump(mode="json")


def config_to_yaml(config: ExperimentConfig) -> str:
    return yaml.safe_dump(config_to_dict(config), sort_keys=False, allow_unicode=True)


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"loss": {"name": "dsc"}} -> {"loss.name": "dsc"} (lists and scalars are leaves)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def flatten_config(config: ExperimentConfig) -> dict[str, Any]:
    """Flattened params for tracking: `loss.name`, `loss.alpha`, `data.variant`, `train.seed`, ..."""
    data = config_to_dict(config)
    data.pop("paper", None)
    data.pop("search", None)
    data.pop("description", None)
    return flatten(data)
