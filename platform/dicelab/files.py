"""Writing a user's output file so that it appears whole or not at all (no half-written file on an error)."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


class OutputError(OSError):
    """An output file that cannot be written where it was asked for (its folder cannot be made or written,
    it is a directory, the disk is full): the commands say so in one line, exit code 2."""


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to a temporary file beside `path`, renamed over it once written; OutputError naming
    `path` when that fails (nothing is left behind)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, scratch = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except FileExistsError:  # the folder's name is taken by a file: mkdir's own words would be "File exists"
        raise _unwritable(path, NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))) from None
    except OSError as error:
        raise _unwritable(path, error) from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(scratch, path)
    except BaseException as error:
        Path(scratch).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise _unwritable(path, error) from None
        raise


def _unwritable(path: Path, error: OSError) -> OutputError:
    return OutputError(error.errno, f"{path}: cannot write there ({error.strerror or error})")
