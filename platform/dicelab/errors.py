"""Errors a user can fix: the CLI prints them as one line and exits with code 2."""

from __future__ import annotations


class DicelabError(Exception):
    """Base class of every error caused by user input (config, data files, CLI arguments)."""

    exit_code = 2


class ConfigError(DicelabError, ValueError):
    """A config key is unknown or has a bad value. The message names the key."""


class DataError(DicelabError, ValueError):
    """A data file or dataset is unreadable or malformed. The message names the file and line."""


class TrackingError(DicelabError):
    """The MLflow tracking store cannot be reached or used."""


def first_line(error: BaseException, *, with_type: bool = False) -> str:
    """An error as one line: the first non-blank line of its message (its type when there is none).

    Used wherever a third-party error is reported on one line (CLI errors, a FAILED run's reason).
    """
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    return f"{type(error).__name__}: {lines[0]}" if with_type else lines[0]


class TrialFailed(RuntimeError):
    """A trial stopped for a reason recorded on its run (non-finite loss, crash)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
