"""Snapshot stores: where a job's complete snapshots are kept, in memory or in a directory.

A `Snapshot` is plain data: the snapshot id, the layout of the job when it was taken (member
count, local parallelism per vertex) and, per processor, the `(key, value)` entries it saved,
serialized with `encode_batch`, and whether it had already completed. Only complete snapshots
ever reach a store: every processor saved its share before `save()` is called, and a store
makes the new snapshot visible atomically, keeping the previous one until then.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from jetspark.core.errors import SnapshotError
from jetspark.core.files import fsync_directory, write_atomically
from jetspark.core.serialization import decode_batch, encode_batch

_log = logging.getLogger("jetspark.snapshots")

ProcessorKey = tuple[str, int]
"""(vertex name, global processor index)."""


@dataclass(frozen=True)
class ProcessorSnapshot:
    """What one processor saved: its entries as `encode_batch` bytes, and whether it completed."""

    data: bytes
    completed: bool = False

    def entries(self) -> list[Any]:
        """The `(key, value)` entries, decoded."""
        return decode_batch(self.data)


@dataclass(frozen=True)
class Snapshot:
    """A complete snapshot of a job: every processor's state at one consistent cut."""

    snapshot_id: int
    member_count: int
    local_parallelism: Mapping[str, int]
    """Vertex name -> its local parallelism when the snapshot was taken."""
    processors: Mapping[ProcessorKey, ProcessorSnapshot]
    """(vertex name, global processor index) -> what that processor saved."""

    def of_vertex(self, name: str) -> dict[int, ProcessorSnapshot]:
        """The saved processors of vertex `name`, by global index."""
        return {
            index: saved for (vertex, index), saved in self.processors.items() if vertex == name
        }

    def size(self) -> int:
        """The serialized bytes of all saved state."""
        return sum(len(saved.data) for saved in self.processors.values())

    def __repr__(self) -> str:
        return (
            f"Snapshot({self.snapshot_id}, members={self.member_count}, "
            f"vertices={sorted(self.local_parallelism)}, bytes={self.size()})"
        )


class SnapshotStore(Protocol):
    """Keeps the complete snapshots of a job (and of the jobs restarted from them)."""

    def latest(self) -> Snapshot | None:
        """The last complete snapshot, or None when there is none."""
        ...

    def next_id(self) -> int:
        """An id higher than that of every snapshot the store holds or has begun to write."""
        ...

    def save(self, snapshot: Snapshot) -> None:
        """Stores a complete snapshot; afterwards `latest()` returns it and older ones may go."""
        ...


class InMemorySnapshotStore:
    """LocalEngine's default store: the last complete snapshot, held in this process."""

    def __init__(self) -> None:
        self._latest: Snapshot | None = None
        self._lock = threading.Lock()

    def latest(self) -> Snapshot | None:
        """The last complete snapshot, or None."""
        with self._lock:
            return self._latest

    def next_id(self) -> int:
        """One more than the last snapshot's id (1 for an empty store)."""
        with self._lock:
            return 1 if self._latest is None else self._latest.snapshot_id + 1

    def save(self, snapshot: Snapshot) -> None:
        """Replaces the last snapshot with `snapshot` (snapshot ids only grow)."""
        with self._lock:
            if self._latest is not None and snapshot.snapshot_id <= self._latest.snapshot_id:
                raise SnapshotError(
                    f"snapshot {snapshot.snapshot_id} is not newer than the stored snapshot "
                    f"{self._latest.snapshot_id}"
                )
            self._latest = snapshot

    def __repr__(self) -> str:
        return f"InMemorySnapshotStore(latest={self._latest!r})"


_FORMAT = "jetspark-snapshot-1"
_MANIFEST = "MANIFEST"
_SNAPSHOT_DIR = re.compile(r"snapshot-(\d{10})")


class DirectorySnapshotStore:
    """Snapshots as files in `directory`, so a job can be restarted by another process.

    Layout: one directory `snapshot-<id, 10 digits>/` per snapshot, holding one file per vertex
    (`vertex-<n>.bin`: `encode_batch` of `(global index, completed, entries bytes)` per
    processor) and `MANIFEST` (`encode_batch` of the format tag, the snapshot id, the member count
    and, per vertex, its name, local parallelism, file name, size and CRC-32). Every file is
    written to a temporary name, fsynced and renamed; the manifest is written last, so a
    snapshot without a valid manifest, or whose files do not match it, is one a process died
    writing and is never used. Older snapshot directories are removed only after the new
    manifest is in place, so the last complete snapshot survives until the next one is complete.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)

    def latest(self) -> Snapshot | None:
        """The newest snapshot whose manifest and files are intact, or None.

        A save running meanwhile may complete a newer snapshot and delete the older ones while
        this reads them; the directory is then listed again, so a complete snapshot is found.
        """
        tried: set[int] = set()
        while candidates := sorted(set(self._ids()) - tried, reverse=True):
            for snapshot_id in candidates:
                tried.add(snapshot_id)
                try:
                    return self._load(snapshot_id)
                except (OSError, ValueError, SnapshotError) as problem:
                    _log.warning(
                        "skipping incomplete snapshot %d in %s: %s", snapshot_id, self, problem
                    )
        return None

    def next_id(self) -> int:
        """One more than the highest snapshot directory present, complete or not."""
        return max(self._ids(), default=0) + 1

    def save(self, snapshot: Snapshot) -> None:
        """Writes `snapshot` (vertex files, then the manifest), then removes older snapshots."""
        existing = self._ids()
        if existing and snapshot.snapshot_id <= max(existing):
            raise SnapshotError(
                f"{self}: snapshot {snapshot.snapshot_id} must be newer than every snapshot "
                f"present (highest {max(existing)})"
            )
        target = self._path(snapshot.snapshot_id)
        os.makedirs(target)
        vertices = []
        for number, name in enumerate(sorted(snapshot.local_parallelism)):
            saved = sorted(snapshot.of_vertex(name).items())
            data = encode_batch((index, p.completed, p.data) for index, p in saved)
            filename = f"vertex-{number}.bin"
            write_atomically(os.path.join(target, filename), data)
            vertices.append(
                (name, snapshot.local_parallelism[name], filename, len(data), zlib.crc32(data))
            )
        fsync_directory(target)
        manifest = encode_batch(
            [_FORMAT, snapshot.snapshot_id, snapshot.member_count, tuple(vertices)]
        )
        write_atomically(os.path.join(target, _MANIFEST), manifest)
        fsync_directory(target)
        for old in existing:
            shutil.rmtree(self._path(old), ignore_errors=True)

    def _ids(self) -> list[int]:
        return [
            int(match.group(1))
            for name in os.listdir(self.directory)
            if (match := _SNAPSHOT_DIR.fullmatch(name))
        ]

    def _path(self, snapshot_id: int) -> str:
        return os.path.join(self.directory, f"snapshot-{snapshot_id:010d}")

    def _load(self, snapshot_id: int) -> Snapshot:
        path = self._path(snapshot_id)
        with open(os.path.join(path, _MANIFEST), "rb") as file:
            manifest = decode_batch(file.read())
        if len(manifest) != 4 or manifest[0] != _FORMAT or manifest[1] != snapshot_id:
            raise SnapshotError(f"not a manifest of snapshot {snapshot_id} ({_FORMAT})")
        _, _, member_count, vertices = manifest
        parallelism: dict[str, int] = {}
        processors: dict[ProcessorKey, ProcessorSnapshot] = {}
        for name, local_parallelism, filename, size, crc in vertices:
            with open(os.path.join(path, filename), "rb") as file:
                data = file.read()
            if len(data) != size or zlib.crc32(data) != crc:
                raise SnapshotError(f"{filename} does not match the manifest (size or CRC-32)")
            parallelism[name] = local_parallelism
            for index, completed, entries in decode_batch(data):
                processors[(name, index)] = ProcessorSnapshot(entries, completed)
        return Snapshot(snapshot_id, member_count, parallelism, processors)

    def __repr__(self) -> str:
        return f"DirectorySnapshotStore({self.directory!r})"
