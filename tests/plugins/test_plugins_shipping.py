"""Where a plugin's code travels: a `dicelab submit` job's runtime env and sweep command, a saved model."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from tests.plugins.conftest import poly1_source, write

from dicelab.plugins import PluginError, load_plugins, pins, py_modules
from dicelab.plugins.copies import copy_plugins
from dicelab.plugins.loading import digest_of
from dicelab.sweeps.submit import SubmitOptions, entrypoint, runtime_env

pytestmark = pytest.mark.usefixtures("isolated_plugins")


def test_a_submitted_job_gets_the_plugin_files_and_loads_them_by_module_name(tmp_path: Path) -> None:
    package = write(tmp_path / "lab" / "my_losses" / "__init__.py", poly1_source("poly_pkg"))
    load_plugins([str(write(tmp_path / "poly1.py", poly1_source())), str(package.parent)])
    env = runtime_env(tmp_path / "work", py_modules(pins()))
    assert env["py_modules"][1:] == [str(tmp_path / "poly1.py"), str(tmp_path / "lab" / "my_losses")]
    words = shlex.split(
        entrypoint("sweep.yaml", SubmitOptions("sweep.yaml", "http://x"), None, ["poly1", "my_losses"])
    )
    assert words[words.index("--set") + 1] == "plugins=[poly1, my_losses]"


def test_a_saved_model_carries_a_copy_of_its_plugins(tmp_path: Path) -> None:
    plugin = write(tmp_path / "src" / "poly1.py", poly1_source())
    load_plugins([str(plugin)])
    bundle = tmp_path / "bundle"
    assert copy_plugins([str(plugin)], bundle) == ["plugins/poly1.py"]
    assert digest_of(bundle / "plugins" / "poly1.py") == digest_of(plugin)
    plugin.write_text(poly1_source() + "# changed after it was loaded\n")
    with pytest.raises(PluginError, match=r"^plugin poly1: .*poly1.py changed since it was loaded"):
        copy_plugins([str(plugin)], tmp_path / "bundle-2")
