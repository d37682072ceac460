"""Durable file operations shared by snapshot stores and transactional sinks."""

from __future__ import annotations

import os
import uuid


def write_atomically(path: str, data: bytes) -> None:
    """Writes `data` to `path` through a fsynced temporary file and a rename: a reader (or a
    process restarted after a crash) sees the old file or the whole new one, never a part."""
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def fsync_directory(path: str) -> None:
    """Makes the creations, renames and deletions inside directory `path` durable."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
