"""Read a YAML config, apply `--set a.b=value` overrides, check the schema, report every error (a line each).

YAML is read with YAML 1.2 numbers (`1e-4` is a float: `dicelab.config.yaml_loader`)."""

from __future__ import annotations

import copy
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from dicelab.config.schema import ExperimentConfig
from dicelab.config.yaml_loader import load_yaml
from dicelab.errors import ConfigError
from dicelab.plugins.loading import environment_entries, resolve_entries


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
    if not parent_path.is_file():  # named from the file that extends it: that is the line to fix
        raise ConfigError(f"{path}: config key 'extends': no such file {parent_path}")
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
        data = load_yaml(text)
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
    """`train.lr=3e-5` -> ("train.lr", 3e-05); the value is parsed as YAML (YAML 1.2 numbers, lists, null)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE with a dotted key, e.g. train.epochs=2")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


DIMENSION_KINDS = ("grid", "choice", "uniform", "loguniform", "int")  # a search dimension's one key
_KEYED_BY_CONFIG_KEY = ("space", "tied")  # search sections whose keys are dotted config keys themselves


def override_target(key: str, value: Any) -> tuple[list[str], Any]:
    """Where `--set KEY=VALUE` goes: the path of sections, and the value. The keys of `search.space` and
    `search.tied` (also a `search.conditional.<loss>`'s) are dotted config keys themselves, so
    `search.space.loss.alpha.grid=[0.1, 0.5]` sets the dimension `loss.alpha` to that grid (replacing what
    it was) and `search.tied.loss.beta=1 - loss.alpha` the tied key `loss.beta`."""
    parts = key.split(".")
    at = None  # the index of the section keyed by config keys
    if parts[0] == "search" and len(parts) > 2 and parts[1] in _KEYED_BY_CONFIG_KEY:
        at = 1
    elif (
        parts[0] == "search"
        and len(parts) > 4
        and parts[1] == "conditional"
        and parts[3] in _KEYED_BY_CONFIG_KEY
    ):
        at = 3
    if at is None:
        return parts, value
    section, rest = parts[: at + 1], parts[at + 1 :]
    if section[-1] == "space" and len(rest) > 1 and rest[-1] in DIMENSION_KINDS:
        return [*section, ".".join(rest[:-1])], {rest[-1]: value}
    return [*section, ".".join(rest)], value


def set_dotted(data: dict[str, Any], key: str, value: Any, parts: list[str] | None = None) -> None:
    """Set `key` (dotted) in `data`, creating sections; `parts`: its path when not `key.split(".")`."""
    node = data
    parts = parts or key.split(".")
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
        key, value = parse_override(text)
        parts, value = override_target(key, value)
        set_dotted(data, key, value, parts)
    return data


def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, also through `X | None`, `dict[str, X]` and `list[X]`; None for values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation)[::-1]:  # dict[str, X]: the value type is last
        found = _section_model(argument)
        if found is not None:
            return found
    return None


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names of the section at `loc` (for "unknown key" messages)."""
    section: type[BaseModel] | None = model
    for part in loc[:-1]:
        assert section is not None
        field = _fields_by_key(section).get(str(part))
        if field is None:  # a key of a dict of sections (search.space.<key>): the same section
            continue
        section = _section_model(field.annotation)
        if section is None:
            return []
    return sorted(_fields_by_key(section)) if section is not None else []


def _fields_by_key(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A section's fields by the key a config uses (the alias where there is one: `int` for `int_range`)."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def _user_loc(loc: tuple[Any, ...], data: Any, error_type: str) -> tuple[Any, ...]:
    """`loc` without pydantic's union-member tags ("str", "dict[str,str]"): the parts the user wrote.

    A part is kept when it indexes the input (a key of a mapping, an index of a list); the last part of a
    missing key is kept too. Without the input, `loc` is returned as it is.
    """
    if data is None:
        return loc
    kept: list[Any] = []
    node = data
    for index, part in enumerate(loc):
        in_mapping = isinstance(node, dict) and part in node
        in_list = isinstance(node, list | tuple) and isinstance(part, int) and 0 <= part < len(node)
        if in_mapping or in_list:
            kept.append(part)
            node = node[part]
        elif error_type == "missing" and index == len(loc) - 1:
            kept.append(part)
    return tuple(kept)


def _short_repr(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int beyond Python's 4,300-digit limit of int -> str
        return f"a {type(value).__name__} too long to show"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def validation_problems(
    error: ValidationError, model: type[BaseModel] = ExperimentConfig, data: Any = None
) -> list[str]:
    """One line per key that failed, in the schema's order: "config key 'train.epochs': ... (got 0)".

    Pydantic reports a value that matches no member of a union (`str | int`) once per member: those are one
    line, their reasons joined. `data` is the validated input, used to name keys as the user wrote them.
    """
    messages: dict[str, list[str]] = {}  # key -> pydantic's messages about its value
    lines: dict[str, str] = {}
    for problem in error.errors(include_url=False):
        loc = _user_loc(tuple(problem["loc"]), data, problem["type"])
        key = ".".join(str(part) for part in loc) or "<config>"
        if problem["type"] == "extra_forbidden":
            allowed = ", ".join(_allowed_keys(model, loc))
            lines[key] = f"config key {key!r} is not allowed (allowed: {allowed})"
        elif problem["type"] == "missing":
            lines[key] = f"config key {key!r} is required"
        elif (message := _message(problem)) not in messages.setdefault(key, []):
            messages[key].append(message)
            got = _short_repr(problem.get("input"))
            lines[key] = f"config key {key!r}: {'; '.join(messages[key])} (got {got})"
    return list(lines.values())


def _message(problem: Any) -> str:
    """Pydantic's message, but a validator's own sentence without the "Value error, " pydantic puts first."""
    error = problem.get("ctx", {}).get("error") if problem["type"] == "value_error" else None
    return str(error) if error is not None else str(problem["msg"])


def format_validation_error(
    error: ValidationError, model: type[BaseModel] = ExperimentConfig, data: Any = None
) -> str:
    """Every problem of a config: one line when there is one, else a count and then one line per key."""
    lines = validation_problems(error, model, data)
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} config errors:\n" + "\n".join(f"  {line}" for line in lines)


def parse_config(data: dict[str, Any], source: str = "<config>") -> ExperimentConfig:
    """The schema check only; `dicelab.experiment` adds the registry checks (known loss, task, source).

    Every schema problem is reported at once (see `format_validation_error`)."""
    try:
        return ExperimentConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(f"{source}: {format_validation_error(error, ExperimentConfig, data)}") from None


def read_config(
    path: str | Path, overrides: list[str] | None = None, plugins: list[str] | None = None
) -> ExperimentConfig:
    """Read a config file, apply the overrides and check the schema (see `parse_config`).

    The config's `plugins:` then holds every plugin the run loads (`with_plugins`)."""
    config = parse_config(apply_overrides(read_yaml(path), overrides), str(path))
    return with_plugins(config, Path(path).parent, plugins)


def with_plugins(config: ExperimentConfig, base: Path, plugins: list[str] | None = None) -> ExperimentConfig:
    """The config's plugin entries (paths made absolute against `base`, the config's directory), then
    `plugins` (`--plugin`, relative to the working directory), then `DICELAB_PLUGINS`', each once: what a
    trial or an exported config loads, wherever it runs. Loading them is `dicelab.experiment`'s."""
    entries = [
        *resolve_entries(config.plugins, base),
        *resolve_entries(plugins or [], Path.cwd()),
        *environment_entries(),
    ]
    config.plugins = list(dict.fromkeys(entries))
    return config


def config_to_dict(config: ExperimentConfig) -> dict[str, Any]:
    data = config.model_dump(mode="json")
    if not data["plugins"]:  # configs without plugins read as they always have
        del data["plugins"]
    return data


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
    data.pop(
        "plugins", None
    )  # a run's plugins are its tag (`dicelab.plugins.PLUGINS_TAG`), with their hashes
    return flatten(data)
