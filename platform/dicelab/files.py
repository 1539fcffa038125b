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


def unwritable_reason(error: OSError) -> str:
    """Why a folder could not be made or written into, in the user's terms: a folder whose name a file
    already has is "Not a directory" (mkdir's own words, "File exists", suggest the folder is there)."""
    if isinstance(error, FileExistsError):
        return os.strerror(errno.ENOTDIR)
    return error.strerror or str(error)


def _unwritable(path: Path, error: OSError) -> OutputError:
    code = errno.ENOTDIR if isinstance(error, FileExistsError) else error.errno
    return OutputError(code, f"{path}: cannot write there ({unwritable_reason(error)})")
