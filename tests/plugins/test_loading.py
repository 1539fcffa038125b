"""Plugins load from a config's `plugins:`, `--plugin`, DICELAB_PLUGINS and entry points; each bad plugin
is one line, exit 2."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest
from tests.plugins.conftest import poly1_source, write

from dicelab.cli import dispatch
from dicelab.errors import ConfigError
from dicelab.experiment import load_experiment
from dicelab.losses import LOSSES, build_loss
from dicelab.plugins import PluginError, fingerprint, import_pinned, load_plugins, loading, pins

pytestmark = pytest.mark.usefixtures("isolated_plugins")

CONFIG = """name: plugged
{plugins}
data: {{source: synthetic_pairs, synthetic: {{n_train: 40, n_dev: 20}}}}
model: {{backbone: tiny-bert}}
loss: {{name: {loss}}}
"""


def config_file(tmp_path: Path, plugins: str = "", loss: str = "poly1") -> Path:
    return write(tmp_path / "configs" / "trial.yaml", CONFIG.format(plugins=plugins, loss=loss))


def test_a_config_names_a_plugin_file_relative_to_itself(tmp_path: Path) -> None:
    write(tmp_path / "configs" / "poly1.py", poly1_source())
    config = load_experiment(config_file(tmp_path, "plugins: [poly1.py]"), ["loss.epsilon=2"])
    assert config.plugins == [str(tmp_path / "configs" / "poly1.py")]
    assert LOSSES.origin("poly1") == "poly1" and LOSSES.origin("dsc") == "built-in"
    assert build_loss("poly1", epsilon=2.0).options["epsilon"] == 2.0
    with pytest.raises(ConfigError, match=r"config key 'loss.epsilonn': epsilonn is not a parameter of loss"):
        load_experiment(config_file(tmp_path, "plugins: [poly1.py]"), ["loss.epsilonn=2"])


def test_plugin_flag_and_environment_variable_add_to_the_configs_own(tmp_path: Path, monkeypatch) -> None:
    write(tmp_path / "a" / "poly_a.py", poly1_source("poly_a"))
    write(tmp_path / "b" / "poly_b.py", poly1_source("poly_b"))
    write(tmp_path / "c" / "poly_c.py", poly1_source("poly_c"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DICELAB_PLUGINS", os.pathsep.join(["b/poly_b.py", "c/poly_c.py"]))
    config = load_experiment(config_file(tmp_path, loss="poly_b"), plugins=["a/poly_a.py"])
    assert [Path(entry).name for entry in config.plugins] == ["poly_a.py", "poly_b.py", "poly_c.py"]
    assert {"poly_a", "poly_b", "poly_c"} <= set(LOSSES)
    assert fingerprint().count("=") == 3


def test_a_package_directory_and_a_module_name(tmp_path: Path, monkeypatch) -> None:
    write(tmp_path / "mylab" / "__init__.py", "from mylab import extra\n")
    write(tmp_path / "mylab" / "extra.py", poly1_source("poly_pkg"))
    write(tmp_path / "site" / "named_plugin.py", poly1_source("poly_named"))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    load_plugins([str(tmp_path / "mylab"), "named_plugin"])
    assert LOSSES.origin("poly_pkg") == "mylab" and LOSSES.origin("poly_named") == "named_plugin"
    assert {plugin.root for plugin in loading.loaded()} >= {
        tmp_path / "mylab",
        tmp_path / "site" / "named_plugin.py",
    }


def test_an_installed_distribution_declares_its_plugin_by_entry_point(tmp_path: Path, monkeypatch) -> None:
    site = tmp_path / "site"
    write(site / "lab_losses.py", poly1_source("poly_installed"))
    write(
        site / "lab_losses-1.0.dist-info" / "METADATA",
        "Metadata-Version: 2.1\nName: lab-losses\nVersion: 1.0\n",
    )
    write(site / "lab_losses-1.0.dist-info" / "entry_points.txt", "[dicelab.plugins]\nlab = lab_losses\n")
    monkeypatch.syspath_prepend(str(site))
    loading._ENTRY_POINTS_LOADED = False
    load_experiment(config_file(tmp_path, loss="poly_installed"))
    assert LOSSES.origin("poly_installed") == "lab_losses"


def bad_plugins(tmp_path: Path) -> list[tuple[str, str]]:
    """(plugin entry, the one line expected)"""
    write(tmp_path / "name_error.py", "import torch\n\nvalue = undefined_name + 1\n")
    write(tmp_path / "syntax_error.py", "def f(:\n    pass\n")
    write(tmp_path / "missing_dependency.py", "import torch\nimport no_such_dependency_xyz\n")
    write(tmp_path / "takes_dsc.py", poly1_source("dsc"))
    write(tmp_path / "poly1.py", poly1_source())
    write(tmp_path / "again" / "poly1_again.py", poly1_source())
    plugin = f"plugin {tmp_path}"
    return [
        (
            "name_error.py",
            rf"{plugin}/name_error.py: cannot import it: NameError: name 'undefined_name' is not "
            rf"defined \({tmp_path}/name_error.py:3\)",
        ),
        (
            "syntax_error.py",
            rf"{plugin}/syntax_error.py: cannot import it: SyntaxError: .* \({tmp_path}/syntax_error.py:1\)",
        ),
        (
            "missing_dependency.py",
            rf"{plugin}/missing_dependency.py: cannot import it: ModuleNotFoundError: "
            rf"No module named 'no_such_dependency_xyz' \({tmp_path}/missing_dependency.py:2\)",
        ),
        ("takes_dsc.py", rf"{plugin}/takes_dsc.py: loss 'dsc' of plugin takes_dsc collides with a built-in"),
        (
            "poly1.py,again/poly1_again.py",
            rf"{plugin}/again/poly1_again.py: loss 'poly1' of plugin poly1_again "
            "collides with plugin poly1",
        ),
        ("gone.py", rf"{plugin}/gone.py: no such file or directory"),
        (
            "no_such_plugin_module",
            r"plugin no_such_plugin_module: no module named 'no_such_plugin_module' "
            r"\(not installed, not on the Python path\)",
        ),
    ]


def test_each_bad_plugin_is_one_line_with_exit_2_and_nothing_recorded(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    config = config_file(tmp_path, loss="ce")
    monkeypatch.chdir(tmp_path)
    for entries, expected in bad_plugins(tmp_path):
        flags = [word for entry in entries.split(",") for word in ("--plugin", entry)]
        code = dispatch.main(["trial", str(config), *flags, "--tracking-uri", f"sqlite:///{tmp_path}/m.db"])
        error = capsys.readouterr().err
        assert code == 2, error
        assert error.count("\n") == 1, error
        assert re.fullmatch(f"dicelab trial: error: {expected}\n", error), error
    assert not (tmp_path / "m.db").exists()
    assert not (tmp_path / ".dicelab").exists()


def test_a_worker_refuses_a_plugin_other_than_the_drivers(tmp_path: Path) -> None:
    plugin = write(tmp_path / "poly1.py", poly1_source())
    load_plugins([str(plugin)])
    pinned = pins()
    import_pinned(pinned)  # the same version: nothing to do
    # a worker whose copy differs from the one the driver validated
    loading._LOADED.clear()
    LOSSES._entries.pop("poly1")
    del sys.modules["poly1"]
    plugin.write_text(poly1_source() + "\n# edited\n")
    elsewhere = write(tmp_path / "worker" / "poly1.py", poly1_source() + "\n# edited\n")
    sys.path.insert(0, str(elsewhere.parent))
    try:
        with pytest.raises(
            PluginError, match=r"^plugin poly1: this worker imported .*/worker/poly1.py \(source hash "
        ):
            import_pinned(pinned)
    finally:
        sys.path.remove(str(elsewhere.parent))


NAN_LOSS = """
import torch

from dicelab.losses import LOSSES, Loss


@LOSSES.register("nan_loss")
class NanLoss(Loss):
    def forward(self, logits, target):
        return logits.sum() * float("nan")
"""


def test_a_plugin_loss_that_returns_nan_ends_its_trial_as_non_finite(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)  # the feature cache (.dicelab/cache) goes there
    write(tmp_path / "nan_loss.py", NAN_LOSS)
    config = write(
        tmp_path / "nan.yaml",
        "name: nan\nplugins: [nan_loss.py]\nloss: {name: nan_loss}\n"
        "data: {source: synthetic_pairs, synthetic: {n_train: 16, n_dev: 8}, max_length: 16}\n"
        "model: {backbone: tiny-bert, tiny_bert: {hidden_size: 32, num_layers: 1, num_heads: 2}}\n"
        "train: {epochs: 1, batch_size: 8}\n",
    )
    assert dispatch.main(["trial", str(config), "--no-tracking", "--quiet", "--json"]) == 1
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["outcome"] == "non_finite", result


def test_a_sweep_with_a_bad_plugin_stops_before_ray_and_records_nothing(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    config = write(tmp_path / "sweep.yaml", CONFIG.format(plugins="", loss="ce") + "search: {seeds: [1]}\n")
    uri = f"sqlite:///{tmp_path}/m.db"
    assert dispatch.main(["sweep", str(config), "--plugin", "gone.py", "--tracking-uri", uri]) == 2
    assert (
        capsys.readouterr().err
        == f"dicelab sweep: error: plugin {tmp_path}/gone.py: no such file or directory\n"
    )
    assert not (tmp_path / "m.db").exists()


def test_a_notebooks_config_names_plugins_relative_to_its_working_directory(
    tmp_path: Path, monkeypatch
) -> None:
    import yaml

    from dicelab.api import _config_path  # the file dicelab.sweep hands the driver

    monkeypatch.chdir(tmp_path)
    path = _config_path({"name": "notebook", "plugins": ["poly1.py", "my_lab.losses"]})
    assert yaml.safe_load(path.read_text())["plugins"] == [str(tmp_path / "poly1.py"), "my_lab.losses"]
