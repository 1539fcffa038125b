"""Where a sweep invocation lives on disk, and what `--resume` needs to continue it.

    <storage>/<sweep name>/<YYYYmmdd-HHMMSS>-<id8>/     the Tune experiment (trials, checkpoints, state)
                                        sweep.json     sweep id, MLflow parent run, config digest
                                        config.yaml    the sweep config as it ran

Every invocation gets its own directory, so starting a sweep again never mixes with an earlier one;
`--resume` continues the newest.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from dicelab.errors import ConfigError

STATE_FILE = "sweep.json"
CONFIG_FILE = "config.yaml"


@dataclass(frozen=True)
class SweepState:
    sweep_id: str
    name: str
    experiment_id: str
    parent_run_id: str
    tracking_uri: str
    config_digest: str
    started: str

    @staticmethod
    def digest(config_yaml: str) -> str:
        return hashlib.sha256(config_yaml.encode("utf-8")).hexdigest()[:16]

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex

    @staticmethod
    def new_directory(sweep_root: Path, sweep_id: str) -> Path:
        return sweep_root / f"{time.strftime('%Y%m%d-%H%M%S')}-{sweep_id[:8]}"

    def save(self, directory: Path, config_yaml: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in ((CONFIG_FILE, config_yaml), (STATE_FILE, json.dumps(asdict(self), indent=2))):
            partial = directory / f".{name}.tmp"
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, directory / name)

    @classmethod
    def latest(cls, sweep_root: Path) -> tuple[SweepState, Path]:
        """The newest invocation of a sweep (for --resume)."""
        found = sorted(path.parent for path in sweep_root.glob(f"*/{STATE_FILE}"))
        if not found:
            raise ConfigError(f"--resume: no sweep to resume under {sweep_root} (start it without --resume)")
        directory = found[-1]
        return cls(**json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))), directory

    def check_same_config(self, directory: Path, config_yaml: str) -> None:
        if self.digest(config_yaml) != self.config_digest:
            raise ConfigError(
                f"--resume: the config (with its --set values) differs from the one sweep {self.name!r} "
                f"started with ({directory / CONFIG_FILE}); resume with the same config, or start a new sweep"
            )
