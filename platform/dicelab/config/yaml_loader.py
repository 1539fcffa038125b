"""YAML as users write numbers: `1e-4`, `3e-5`, `+1e3` and `.5` are floats (YAML 1.2), not strings.

PyYAML implements YAML 1.1, whose floats need a dot and a signed exponent (`1.0e-4`), so `lr: 1e-4` would be
read as the string "1e-4": a loss parameter or a grid value then fails with "must be a number, got '1e-4'".
`ConfigLoader` is PyYAML's safe loader with YAML 1.2's core-schema floats added to the 1.1 forms it already
reads, so nothing that was a float before stops being one; ints, booleans and nulls are unchanged.
Every place that reads a config, a `--set` value or a search space loads through `load_yaml`.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

FLOAT_TAG = "tag:yaml.org,2002:float"

# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution), plus `.nan`/`.inf` spellings.
YAML12_FLOAT = r"""[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN)"""


def _yaml11_float() -> re.Pattern[str]:
    for resolvers in yaml.SafeLoader.yaml_implicit_resolvers.values():
        for tag, pattern in resolvers:
            if tag == FLOAT_TAG:
                return pattern
    raise RuntimeError("PyYAML's SafeLoader has no float resolver")  # a PyYAML that changed its internals


class ConfigLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader whose floats are YAML 1.1's and YAML 1.2's."""


# The float resolver goes after the int and timestamp ones of each first character: the 1.2 pattern also
# matches plain digits ("10"), which must stay ints.
ConfigLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != FLOAT_TAG]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
ConfigLoader.add_implicit_resolver(
    FLOAT_TAG,
    re.compile(rf"^(?:{_yaml11_float().pattern.strip('^$')}|{YAML12_FLOAT})$", re.X),
    list("-+0123456789."),
)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load` with YAML 1.2 floats (see the module docstring); raises only `yaml.YAMLError`.

    A scalar PyYAML matches but cannot build (the date 2001-13-01, an int of more than 4,300 digits) and
    nesting deeper than Python's recursion limit are YAML errors too, not a ValueError from inside PyYAML.
    """
    try:
        return yaml.load(text, Loader=ConfigLoader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError:
        raise
    except ValueError as error:
        raise yaml.YAMLError(str(error)) from None
    except RecursionError:
        raise yaml.YAMLError("nested too deeply") from None
