"""Durable, safe file operations shared by snapshot stores and file sinks.

Temporary files get unpredictable names and are created exclusively (`O_CREAT | O_EXCL`, plus
`O_NOFOLLOW`): a file or symbolic link planted at the name makes the creation fail instead of
being written through, so nobody can steer a job's writes into another file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from typing import IO

_EXCLUSIVE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_EXCLUSIVE |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def create_exclusive(directory: str, prefix: str, mode: int = 0o666) -> tuple[str, IO[bytes]]:
    """Creates a new file `<prefix>.<random>.tmp` in `directory` (permissions `mode`, less the
    umask) and returns its path and a binary file open for writing; never opens an existing
    file or follows a symbolic link."""
    while True:
        path = os.path.join(directory, f"{prefix}.{secrets.token_hex(16)}.tmp")
        try:
            descriptor = os.open(path, _EXCLUSIVE, mode)
        except FileExistsError:
            continue  # 128 random bits: only a name planted on purpose gets here
        return path, os.fdopen(descriptor, "wb")


def write_atomically(path: str, data: bytes, mode: int = 0o666, *, replace: bool = True) -> bool:
    """Writes `data` to `path` through a fsynced temporary file and a rename: a reader (or a
    process restarted after a crash) sees the old file or the whole new one, never a part.
    With `replace=False` an existing file stays as it is (the first writer wins, atomically
    even among processes) and False is returned. The temporary file is always removed."""
    return write_atomically_with(path, lambda file: file.write(data), mode, replace=replace)


def write_atomically_with(
    path: str, write: Callable[[IO[bytes]], object], mode: int = 0o666, *, replace: bool = True
) -> bool:
    """`write_atomically` with the content streamed by `write(file)` into the temporary binary
    file, for content too large to hold in memory at once (an index export)."""
    directory, name = os.path.split(path)
    temporary, file = create_exclusive(directory or ".", f".{name}", mode)
    try:
        with file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        if replace:
            os.replace(temporary, path)
            return True
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        finally:
            os.remove(temporary)
        return True
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


def fsync_directory(path: str) -> None:
    """Makes the creations, renames and deletions inside directory `path` durable."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
