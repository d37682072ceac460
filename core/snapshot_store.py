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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
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
    files: Mapping[str, tuple[PartFile, ...]] | None = field(default=None, compare=False)
    """Snapshots of a DirectorySnapshotStore: vertex -> the files holding its processors, so a
    Spark task can read its own vertices' state without the driver loading any of it."""
    directory: str | None = field(default=None, compare=False)
    """The snapshot's directory, when `files` is set."""

    def of_vertex(self, name: str) -> dict[int, ProcessorSnapshot]:
        """The saved processors of vertex `name`, by global index."""
        return {
            index: saved for (vertex, index), saved in self.processors.items() if vertex == name
        }

    def completed_flags(self) -> dict[ProcessorKey, bool]:
        """(vertex, global index) -> whether that processor had completed, read from the
        manifest when the snapshot has `files` (no state is loaded)."""
        if self.files is not None and all(
            part[3] is not None for parts in self.files.values() for part in parts
        ):
            return {
                (name, index): completed
                for name, parts in self.files.items()
                for part in parts
                for index, completed in part[3]
            }
        return {key: saved.completed for key, saved in self.processors.items()}

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


PartFile = tuple[str, int, int, tuple[tuple[int, bool], ...]]
"""A file of a snapshot: (name in the snapshot's directory, size in bytes, CRC-32, and the
(global index, completed) of each processor whose state it holds)."""

_FORMAT_ONE_FILE_PER_VERTEX = "jetspark-snapshot-1"
_FORMAT = "jetspark-snapshot-2"
_MANIFEST = "MANIFEST"


def snapshot_path(directory: str, snapshot_id: int) -> str:
    """The directory of snapshot `snapshot_id` in a DirectorySnapshotStore at `directory`."""
    return os.path.join(directory, f"snapshot-{snapshot_id:010d}")


def write_snapshot_part(
    directory: str,
    snapshot_id: int,
    vertex_number: int,
    part: int | None,
    processors: Iterable[tuple[int, ProcessorSnapshot]],
) -> PartFile:
    """Writes some processors' states of one vertex as a part of a snapshot not yet committed.

    A Spark task calls it for the processors it ran (`part` = its member), so state never
    passes through the driver; writing the same part again (a retried task) replaces it.
    The snapshot becomes visible only when `DirectorySnapshotStore.commit` lists the part.
    """
    target = snapshot_path(directory, snapshot_id)
    os.makedirs(target, exist_ok=True)
    processors = list(processors)
    data = encode_batch((index, p.completed, p.data) for index, p in processors)
    held = tuple((index, p.completed) for index, p in processors)
    name = f"vertex-{vertex_number}.bin" if part is None else f"vertex-{vertex_number}-{part}.bin"
    write_atomically(os.path.join(target, name), data)
    return (name, len(data), zlib.crc32(data), held)


def read_snapshot_files(
    path: str, files: Iterable[PartFile]
) -> Iterator[tuple[int, ProcessorSnapshot]]:
    """The `(global index, state)` of every processor in the given files of a snapshot,
    each file checked against the size and CRC-32 its manifest recorded."""
    for filename, size, crc, _ in files:
        with open(os.path.join(path, filename), "rb") as file:
            data = file.read()
        if len(data) != size or zlib.crc32(data) != crc:
            raise SnapshotError(f"{filename} does not match the manifest (size or CRC-32)")
        for index, completed, entries in decode_batch(data):
            yield index, ProcessorSnapshot(entries, completed)


class _ProcessorsOnDisk(Mapping[ProcessorKey, ProcessorSnapshot]):
    """The processors of a stored snapshot, read from its files on first use."""

    def __init__(self, load: Callable[[], dict[ProcessorKey, ProcessorSnapshot]]) -> None:
        self._load = load
        self._loaded: dict[ProcessorKey, ProcessorSnapshot] | None = None

    def _all(self) -> dict[ProcessorKey, ProcessorSnapshot]:
        if self._loaded is None:
            self._loaded = self._load()
        return self._loaded

    def __getitem__(self, key: ProcessorKey) -> ProcessorSnapshot:
        return self._all()[key]

    def __iter__(self) -> Iterator[ProcessorKey]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


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
        self._check_newest(snapshot.snapshot_id)
        files: dict[str, tuple[PartFile, ...]] = {}
        for number, name in enumerate(sorted(snapshot.local_parallelism)):
            saved = sorted(snapshot.of_vertex(name).items())
            files[name] = (
                write_snapshot_part(self.directory, snapshot.snapshot_id, number, None, saved),
            )
        self.commit(snapshot.snapshot_id, snapshot.member_count, snapshot.local_parallelism, files)

    def commit(
        self,
        snapshot_id: int,
        member_count: int,
        local_parallelism: Mapping[str, int],
        files: Mapping[str, Iterable[PartFile]],
    ) -> None:
        """Makes snapshot `snapshot_id` complete: writes its manifest, listing the part files
        already written into its directory (`write_snapshot_part`), then removes older snapshots.
        """
        self._check_newest(snapshot_id, parts_written=True)
        target = snapshot_path(self.directory, snapshot_id)
        os.makedirs(target, exist_ok=True)
        fsync_directory(target)
        vertices = tuple(
            (name, local_parallelism[name], tuple(sorted(files.get(name, ()))))
            for name in sorted(local_parallelism)
        )
        manifest = encode_batch([_FORMAT, snapshot_id, member_count, vertices])
        write_atomically(os.path.join(target, _MANIFEST), manifest)
        fsync_directory(target)
        for old in self._ids():
            if old < snapshot_id:
                shutil.rmtree(snapshot_path(self.directory, old), ignore_errors=True)

    def _check_newest(self, snapshot_id: int, *, parts_written: bool = False) -> None:
        """Refuses an id not above every snapshot directory present (but its own, when its
        parts were written into it before the commit)."""
        present = [i for i in self._ids() if not (parts_written and i == snapshot_id)]
        if present and snapshot_id <= max(present):
            raise SnapshotError(
                f"{self}: snapshot {snapshot_id} must be newer than every snapshot "
                f"present (highest {max(present)})"
            )

    def _ids(self) -> list[int]:
        return [
            int(match.group(1))
            for name in os.listdir(self.directory)
            if (match := _SNAPSHOT_DIR.fullmatch(name))
        ]

    def _load(self, snapshot_id: int) -> Snapshot:
        """The snapshot's manifest, checked; its processors' state is read on first use."""
        path = snapshot_path(self.directory, snapshot_id)
        with open(os.path.join(path, _MANIFEST), "rb") as file:
            manifest = decode_batch(file.read())
        if (
            len(manifest) != 4
            or manifest[1] != snapshot_id
            or manifest[0]
            not in (
                _FORMAT,
                _FORMAT_ONE_FILE_PER_VERTEX,
            )
        ):
            raise SnapshotError(f"not a manifest of snapshot {snapshot_id} ({_FORMAT})")
        format_tag, _, member_count, vertices = manifest
        if format_tag == _FORMAT_ONE_FILE_PER_VERTEX:
            vertices = [(name, lp, ((f, size, crc, None),)) for name, lp, f, size, crc in vertices]
        parallelism = {name: lp for name, lp, _ in vertices}
        files = {name: tuple(tuple(f) for f in parts) for name, _, parts in vertices}
        for parts in files.values():
            for filename, size, _, _ in parts:
                if os.path.getsize(os.path.join(path, filename)) != size:
                    raise SnapshotError(f"{filename} does not match the manifest (size)")

        def load() -> dict[ProcessorKey, ProcessorSnapshot]:
            return {
                (name, index): saved
                for name, parts in files.items()
                for index, saved in read_snapshot_files(path, parts)  # type: ignore[arg-type]
            }

        return Snapshot(
            snapshot_id,
            member_count,
            parallelism,
            _ProcessorsOnDisk(load),
            files=files,  # type: ignore[arg-type]
            directory=path,
        )

    def __repr__(self) -> str:
        return f"DirectorySnapshotStore({self.directory!r})"
