"""Snapshot stores: where a job's complete snapshots are kept, in memory or in a directory.

A `Snapshot` is plain data: the snapshot id, the layout of the job when it was taken (member
count, local parallelism per vertex) and, per processor, the `(key, value)` entries it saved,
serialized with `encode_batch`, and whether it had already completed. Only complete snapshots
ever reach a store: every processor saved its share before `save()` is called, and a store
makes the new snapshot visible atomically, keeping the previous one until then. A store takes
the snapshots of one job at a time: engines lease it for a job (`store_lease.py`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import re
import secrets
import shutil
import socket
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgpack

from jetspark.core.edge_routing import Routings, routings_of
from jetspark.core.errors import SnapshotError
from jetspark.core.files import create_exclusive, fsync_directory, write_atomically
from jetspark.core.gc_pause import paused_gc
from jetspark.core.serialization import decode_batch, encode_batch
from jetspark.core.state_definition import StateDefinition, definitions_from_record
from jetspark.core.store_lease import (
    StoreHolder,
    StoreLease,
    in_use_error,
    lock_directory,
)

_log = logging.getLogger("jetspark.snapshots")
_NO_ENTRIES = encode_batch([])
"""What a processor that saved nothing stored."""

ProcessorKey = tuple[str, int]
"""(vertex name, global processor index)."""

Held = tuple[tuple[str, int, bool], ...]
"""The (vertex, global index, completed) of each processor a snapshot part holds."""


@dataclass(frozen=True)
class ProcessorSnapshot:
    """What one processor saved: its entries as `encode_batch` bytes, and whether it completed."""

    data: bytes
    completed: bool = False

    def entries(self) -> list[Any]:
        """The `(key, value)` entries, decoded (gc_pause.py: the collector waits meanwhile)."""
        with paused_gc:
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
    parts: Mapping[str, tuple[bytes, Held]] | None = field(default=None, compare=False)
    """Snapshots of a DirectorySnapshotStore: part name -> (tag, what it holds), so a Spark
    task can read its own processors' part without the driver loading any state."""
    store: Any = field(default=None, compare=False, repr=False)
    """The DirectorySnapshotStore holding the parts, when `parts` is set."""
    routing: Routings | None = field(default=None, compare=False)
    """How the job's edges routed into each vertex (edge_routing.py); None when not recorded
    (a manifest of a version before 3, or a snapshot made by hand)."""
    definitions: Mapping[str, StateDefinition] | None = field(default=None, compare=False)
    """What gave each vertex's state its meaning (state_definition.py), for the vertices whose
    definition was known; None when not recorded (a manifest before version 4, or by hand)."""

    def completed_flags(self) -> dict[ProcessorKey, bool]:
        """(vertex, global index) -> whether that processor had completed; read from the
        manifest when the snapshot has `parts` (no state is loaded)."""
        if self.parts is not None:
            return {
                (vertex, index): completed
                for _, held in self.parts.values()
                for vertex, index, completed in held
            }
        return {key: saved.completed for key, saved in self.processors.items()}

    def of_vertex(self, name: str) -> dict[int, ProcessorSnapshot]:
        """The saved processors of vertex `name`, by global index."""
        return {
            index: saved for (vertex, index), saved in self.processors.items() if vertex == name
        }

    def states_of(
        self, vertices: Iterable[str]
    ) -> Iterator[tuple[ProcessorKey, ProcessorSnapshot]]:
        """The saved processors of `vertices`; of a snapshot with `parts`, only the parts
        holding them are read (and, it may be, processors of other vertices they hold)."""
        wanted = set(vertices)
        if not wanted:
            return iter(())
        if self.parts is None:
            states: Iterable[tuple[ProcessorKey, ProcessorSnapshot]] = self.processors.items()
        else:
            store, snapshot_id = self.store, self.snapshot_id
            states = (
                state
                for part, tag in parts_holding(self.parts, sorted(wanted)).items()
                for state in store.read_part(snapshot_id, part, tag).items()
            )
        return ((key, saved) for key, saved in states if key[0] in wanted)

    def renamed(self, new_names: Mapping[str, str]) -> Snapshot:
        """This snapshot with each vertex `old` of `new_names` called `new_names[old]`. Its
        state is read through the processors, on first use (the parts keep the old names)."""
        processors = self.processors

        def name(vertex: str) -> str:
            return new_names.get(vertex, vertex)

        routing, definitions = self.routing, self.definitions
        return Snapshot(
            self.snapshot_id,
            self.member_count,
            {name(vertex): lp for vertex, lp in self.local_parallelism.items()},
            _ProcessorsOnDisk(lambda: {(name(v), i): s for (v, i), s in processors.items()}),
            routing=None if routing is None else {name(v): r for v, r in routing.items()},
            definitions=(
                None if definitions is None else {name(v): d for v, d in definitions.items()}
            ),
        )

    def vertices_with_entries(self, vertices: Iterable[str]) -> list[str]:
        """Those of `vertices` some processor of which saved at least one entry (read from
        the parts holding them, never decoded)."""
        return sorted(
            {vertex for (vertex, _), saved in self.states_of(vertices) if saved.data != _NO_ENTRIES}
        )

    def without(self, vertices: Iterable[str]) -> Snapshot:
        """This snapshot as if it knew nothing of `vertices`: their processors start empty and
        run. Its state is read through the processors, on first use."""
        gone = set(vertices)
        processors = self.processors
        return Snapshot(
            self.snapshot_id,
            self.member_count,
            {vertex: lp for vertex, lp in self.local_parallelism.items() if vertex not in gone},
            _ProcessorsOnDisk(lambda: {k: s for k, s in processors.items() if k[0] not in gone}),
            routing=self.routing,
            definitions=self.definitions,
        )

    def size(self) -> int:
        """The serialized bytes of all saved state."""
        return sum(len(saved.data) for saved in self.processors.values())

    def __repr__(self) -> str:
        return (
            f"Snapshot({self.snapshot_id}, members={self.member_count}, "
            f"vertices={sorted(self.local_parallelism)}, bytes={self.size()})"
        )


class SnapshotStore(Protocol):
    """Keeps the complete snapshots of a job (and of the jobs restarted from them).

    A store may also offer `acquire(job_name) -> StoreLease`, as both stores here do: engines
    take it through `store_lease.acquire_store` for each job they run on it.
    """

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
    """LocalEngine's default store: the last complete snapshot, held in this process.

    `acquire(job_name)` leases it to one job (StoreLease; SnapshotError naming the job that
    holds it when another does), until the lease's `release()`.
    """

    def __init__(self) -> None:
        self._latest: Snapshot | None = None
        self._lock = threading.Lock()
        self._holder: StoreHolder | None = None

    def latest(self, *, skip_damaged: bool = False) -> Snapshot | None:
        """The last complete snapshot, or None (a snapshot in memory is never damaged, so
        `skip_damaged` changes nothing)."""
        with self._lock:
            return self._latest

    def acquire(self, job_name: str) -> StoreLease:
        """Takes the store for the job `job_name` until the lease is released; SnapshotError
        naming the holder when another job has it."""
        holder = StoreHolder.here(job_name)
        with self._lock:
            if self._holder is not None:
                raise in_use_error(self, self._holder)
            self._holder = holder

        def release() -> None:
            with self._lock:
                self._holder = None

        return StoreLease(holder, release)

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


_FORMAT = "jetspark-snapshot-4"
_FORMAT_WITHOUT_DEFINITIONS = "jetspark-snapshot-3"
"""Manifests before state definitions were recorded: still read, their `definitions` None."""
_FORMAT_WITHOUT_ROUTING = "jetspark-snapshot-2"
"""Manifests before edge routing was recorded: still read, their `routing` None too."""
_PART_FORMAT = "jetspark-snapshot-part-2"
_INPUT_FORMAT = "jetspark-batch-input-1"
_PUBLICATIONS_FORMAT = "jetspark-publications-1"
_PUBLICATIONS = "PUBLICATIONS"
_COMMITTED_FORMAT = "jetspark-committed-1"
_COMMITTED = "COMMITTED"
_MANIFEST = "MANIFEST"
_KEY = "KEY"
_KEY_BYTES = 32
_TAG_BYTES = hashlib.sha256().digest_size
_SNAPSHOT_DIR = re.compile(r"snapshot-(\d{10,})")
_VERSIONED_FORMAT = re.compile(r"(jetspark-[a-z-]+)-(\d{1,9})")
_PART_NAME = re.compile(r"[A-Za-z0-9_-]{1,100}")
_PRIVATE_FILE = 0o600
_PRIVATE_DIRECTORY = 0o700
_uncommitted_noted: set[str] = set()
"""Snapshot directories already noted as never committed."""


class DirectorySnapshotStore:
    """Snapshots as files in `directory`, so a job can be restarted by another process.

    Layout (docs/fault_tolerance.md): `KEY`, the store's secret (0600, made on first use);
    one directory `snapshot-<id, at least 10 digits>/` per snapshot, holding its parts
    (`write_part`: the states of some processors, one part per member when `save` writes)
    and the `MANIFEST` (`commit`); `COMMITTED`, the id of the last snapshot committed; each
    file an HMAC-SHA256 tag under the key, then msgpack. So a store that never committed a
    snapshot (empty) is told apart from one that lost the manifest, the directory of its last
    snapshot or its key: `latest()` and the constructor raise naming what is missing.
    Nothing is decoded before its tag checks out, and the entries of a processor
    (`encode_batch` bytes, which may be pickle) only after that, so files planted in the
    directory can never run code; the directory must not be writable by other users.
    Every file is written to a temporary name (0600), fsynced and renamed; the manifest is
    written last, so a snapshot without a valid manifest, or whose parts do not match it, is
    one a process died writing and is never used. Older snapshot directories are removed only
    after the new manifest is in place, so the last complete snapshot survives until the next
    one is complete.

    `acquire(job_name)` leases the store to one job (StoreLease), across processes: the file
    `LOCK`, locked with `flock` and naming the job, its process id and host; SnapshotError
    naming them when another job holds it; a lock left by a process that is gone is taken over
    (logged). Every process that writes the store runs as its owner: a copy unpickled in
    another process (a Spark executor) checks the directory again, as the constructor does.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, mode=_PRIVATE_DIRECTORY, exist_ok=True)
        _refuse_if_others_can_write(self.directory)
        key = os.path.join(self.directory, _KEY)
        if not os.path.lexists(key):
            self._refuse_if_key_lost()
        self._key = _load_or_create_key(key)

    def _refuse_if_key_lost(self) -> None:
        """SnapshotError when the directory, which has no key, holds anything of a snapshot:
        its key was lost, and a new key would make every snapshot unreadable."""
        if self._ids() or os.path.lexists(os.path.join(self.directory, _COMMITTED)):
            raise SnapshotError(
                f"{self} lost its {_KEY} file: it holds snapshots, which cannot be "
                f"authenticated without the key they were written with. Put {_KEY} back (from "
                "a backup), or remove the directory to start the job afresh"
            )

    @classmethod
    def open_existing(cls, directory: str | os.PathLike[str]) -> DirectorySnapshotStore:
        """The store in `directory`, for reading: creates nothing, and raises SnapshotError when
        the directory or its key is missing (or when the constructor would refuse them)."""
        path = os.fspath(directory)
        if not os.path.isdir(path):
            raise SnapshotError(f"no snapshot store at {path!r}: no such directory")
        _refuse_if_others_can_write(path)
        store = cls.__new__(cls)
        store.directory = path
        key = os.path.join(path, _KEY)
        if not os.path.lexists(key):
            store._refuse_if_key_lost()
            raise SnapshotError(f"{path!r} is not a snapshot store: it has no {_KEY} file")
        store._key = _read_key(key)
        return store

    def snapshot_ids(self) -> list[int]:
        """The ids of the snapshot directories present, committed or not, in ascending order."""
        return sorted(self._ids())

    def snapshot_directory(self, snapshot_id: int) -> str:
        """The directory holding the files of snapshot `snapshot_id`."""
        return self._path(snapshot_id)

    def __getstate__(self) -> dict[str, Any]:
        return {"directory": self.directory, "key": self._key}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """The copy another process (a Spark executor) unpickles: the directory must be there,
        and be as the constructor requires, before anything is written into it."""
        self.directory = state["directory"]
        self._key = state["key"]
        if not os.path.isdir(self.directory):
            raise SnapshotError(
                f"snapshot store {self.directory!r} does not exist on {socket.gethostname()}: "
                "the driver and every executor must reach it at the same path (shared storage)"
            )
        _refuse_if_others_can_write(self.directory)

    def acquire(self, job_name: str) -> StoreLease:
        """Takes the store for the job `job_name` until the lease is released (class
        docstring); SnapshotError naming the job, process and host that hold it otherwise."""
        return lock_directory(self, self.directory, job_name)

    def latest(self, *, skip_damaged: bool = False) -> Snapshot | None:
        """The newest committed snapshot, once its manifest and parts are found intact and
        authentic; None when the store never committed one.

        SnapshotError, saying which snapshot and why, when that snapshot is damaged or lost
        (its manifest or directory gone, though `COMMITTED` records it): restoring an older one
        instead would redo or lose what the newest recorded. With `skip_damaged` the newest
        intact snapshot is returned (None when none is left), and every damaged one skipped is
        logged as an error. A manifest of a newer format is no damage: SnapshotError naming
        the format, whatever `skip_damaged` says. A directory without a manifest that the store
        never recorded as committed is a snapshot whose writer stopped first: it is skipped,
        noted once in the debug log. A save running meanwhile may commit a newer snapshot and
        delete the one being read; the directory is then listed again.
        """
        while True:
            recorded = self.recorded_commit()
            try:
                return self._latest_since(recorded, skip_damaged)
            except SnapshotError:
                if self.recorded_commit() == recorded:
                    raise
                # a snapshot was committed meanwhile, removing older ones: look again

    def _latest_since(self, recorded: int | None, skip_damaged: bool) -> Snapshot | None:
        """`latest()` for a store whose `COMMITTED` names `recorded`."""
        tried: set[int] = set()
        lost = recorded is not None and recorded not in self._ids()
        while candidates := sorted(set(self._ids()) - tried, reverse=True):
            snapshot_id = candidates[0]
            tried.add(snapshot_id)
            if lost and recorded is not None and snapshot_id < recorded:
                self._damaged(recorded, self._lost_directory(recorded), skip_damaged)
                lost = False
            try:
                snapshot = self.verified(snapshot_id, recorded)
            except NewerFormatError:
                raise
            except (OSError, ValueError, SnapshotError) as problem:
                superseded = not os.path.isdir(self._path(snapshot_id)) or any(
                    other > snapshot_id for other in set(self._ids()) - tried
                )
                if not superseded:  # else a newer snapshot was committed meanwhile: look at it
                    self._damaged(snapshot_id, problem, skip_damaged)
                continue
            if snapshot is not None:
                return snapshot
            self._note_uncommitted(snapshot_id)
        if lost and recorded is not None:
            self._damaged(recorded, self._lost_directory(recorded), skip_damaged)
        return None

    def _lost_directory(self, snapshot_id: int) -> SnapshotError:
        return SnapshotError(
            f"its directory {_dir_name(snapshot_id)} is missing, though {_COMMITTED} records it"
        )

    def _damaged(self, snapshot_id: int, problem: Exception, skip_damaged: bool) -> None:
        """Raises the error for the newest snapshot `snapshot_id` being damaged or lost, or
        with `skip_damaged` logs it."""
        if skip_damaged:
            _log.error(
                "%s: snapshot %d is damaged (%s): skipped for an older one",
                self,
                snapshot_id,
                problem,
            )
            return
        older = [other for other in self._ids() if other < snapshot_id]
        if any(self._intact(other) for other in older):
            hint = "call latest(skip_damaged=True) to take the newest intact snapshot instead"
        else:
            hint = (
                "no older intact snapshot is left: put the lost or damaged file back (from a "
                "backup), or remove the store's directory to start the job afresh"
            )
        raise SnapshotError(
            f"{self}: snapshot {snapshot_id}, the newest, is damaged ({problem}); restoring an "
            f"older one would redo or lose what it recorded: {hint}"
        ) from problem

    def _intact(self, snapshot_id: int) -> bool:
        try:
            return self.verified(snapshot_id) is not None
        except (OSError, ValueError, SnapshotError):
            return False

    def verified(self, snapshot_id: int, recorded: int | None = None) -> Snapshot | None:
        """Snapshot `snapshot_id` once its manifest and every part are found intact and
        authentic; None when it was never committed (no manifest, and `COMMITTED` names no
        later one: `recorded`, read when not given). SnapshotError saying why otherwise
        (NewerFormatError for a manifest of a newer format); FileNotFoundError when it is
        removed while being read. What `latest()` and `jetspark snapshots` go by."""
        if not os.path.lexists(os.path.join(self._path(snapshot_id), _MANIFEST)):
            if recorded is None:
                recorded = self.recorded_commit()
            if recorded is None or snapshot_id > recorded:
                return None
            if not os.path.isdir(self._path(snapshot_id)):
                raise FileNotFoundError(self._path(snapshot_id))
            raise SnapshotError(
                f"its {_MANIFEST} is missing, though {_COMMITTED} records snapshot {recorded} "
                "committed"
            )
        return self._load(snapshot_id, check_parts=True)

    def recorded_commit(self) -> int | None:
        """The id of the last snapshot committed, as `COMMITTED` records it (None: the store
        never committed one); SnapshotError when that record is damaged."""
        path = os.path.join(self.directory, _COMMITTED)
        try:
            record = _unpack(self._authentic(path))
        except FileNotFoundError:
            return None
        _check_format(record, _COMMITTED_FORMAT, path)
        if len(record) != 2 or not isinstance(record[1], int):
            raise SnapshotError(f"{path} is not a record of the last committed snapshot")
        return record[1]

    def _note_uncommitted(self, snapshot_id: int) -> None:
        path = self._path(snapshot_id)
        if path not in _uncommitted_noted:  # once per directory, whichever store object reads
            _uncommitted_noted.add(path)
            _log.debug("%s: snapshot %d was never committed (no manifest)", self, snapshot_id)

    def next_id(self) -> int:
        """One more than the highest snapshot directory present, complete or not, and than
        the last snapshot committed."""
        return max([*self._ids(), self.recorded_commit() or 0]) + 1

    def save(self, snapshot: Snapshot) -> None:
        """Writes `snapshot` (one part per member, then the manifest); removes older ones."""
        existing = self._ids()
        if existing and snapshot.snapshot_id <= max(existing):
            raise SnapshotError(
                f"{self}: snapshot {snapshot.snapshot_id} must be newer than every snapshot "
                f"present (highest {max(existing)})"
            )
        by_member: dict[str, dict[ProcessorKey, ProcessorSnapshot]] = {}
        for (vertex, index), saved in snapshot.processors.items():
            member = index // snapshot.local_parallelism[vertex]
            by_member.setdefault(f"member-{member}", {})[(vertex, index)] = saved
        parts = {
            name: (self.write_part(snapshot.snapshot_id, name, processors), held_by(processors))
            for name, processors in sorted(by_member.items())
        }
        self.commit(
            snapshot.snapshot_id,
            snapshot.member_count,
            snapshot.local_parallelism,
            parts,
            snapshot.routing,
            snapshot.definitions,
        )

    def write_part(
        self,
        snapshot_id: int,
        name: str,
        processors: Mapping[ProcessorKey, ProcessorSnapshot],
    ) -> bytes:
        """Writes the file `part-<name>.bin` of snapshot `snapshot_id`, holding what the given
        processors saved (a Spark task would write its member's; `name` is letters, digits,
        `-` and `_`); creates the snapshot's directory if needed. Any process holding the
        store's key may call it. Returns the part's tag, which `commit` records."""
        if not _PART_NAME.fullmatch(name):
            raise ValueError(f"a part name is letters, digits, '-' and '_', got {name!r}")
        target = self._path(snapshot_id)
        os.makedirs(target, mode=_PRIVATE_DIRECTORY, exist_ok=True)
        entries = [
            (vertex, index, saved.completed, saved.data)
            for (vertex, index), saved in sorted(processors.items())
        ]
        body = _pack([_PART_FORMAT, snapshot_id, name, entries])
        tag = self._tag(body)
        write_atomically(os.path.join(target, f"part-{name}.bin"), tag + body, _PRIVATE_FILE)
        return tag

    def check_part(self, snapshot_id: int, name: str, tag: bytes) -> None:
        """SnapshotError saying why, unless this process can open part `name` of snapshot
        `snapshot_id` and finds it to begin with `tag`, the tag `write_part` returned where it
        was written: what a committer checks of each part before it writes the manifest. Only
        the tag is read; whoever reads the part authenticates the rest."""
        path = os.path.join(self._path(snapshot_id), f"part-{name}.bin")
        try:
            with open(path, "rb") as file:
                found = file.read(_TAG_BYTES)
        except OSError as error:
            raise SnapshotError(f"{path}: {error.strerror or error}") from error
        if not hmac.compare_digest(found, tag):
            raise SnapshotError(f"{path} is another file than the part that was written")

    def read_part(
        self, snapshot_id: int, name: str, tag: bytes | None = None
    ) -> dict[ProcessorKey, ProcessorSnapshot]:
        """The processors' states `write_part` wrote, after checking the file's tag (and that
        it is `tag`, when given); SnapshotError when it is not authentic or not that part."""
        if not _PART_NAME.fullmatch(name):
            raise SnapshotError(f"{name!r} is no part name")
        filename = f"part-{name}.bin"
        part = _unpack(self._authentic(os.path.join(self._path(snapshot_id), filename), tag))
        if len(part) != 4 or part[:3] != (_PART_FORMAT, snapshot_id, name):
            raise SnapshotError(f"{filename} is not part {name!r} of snapshot {snapshot_id}")
        return {
            (vertex, index): ProcessorSnapshot(data, completed)
            for vertex, index, completed, data in part[3]
        }

    def record_batch_input(
        self, snapshot_id: int, name: str, emitted: Mapping[ProcessorKey, int]
    ) -> dict[ProcessorKey, int]:
        """Records how many items the source processors of task `name` emitted in the batch
        ending with snapshot `snapshot_id`, unless a run of that task recorded it first;
        returns the record that stands (see `recorded_batch_input`)."""
        if not _PART_NAME.fullmatch(name):
            raise ValueError(f"a task name is letters, digits, '-' and '_', got {name!r}")
        os.makedirs(self._path(snapshot_id), mode=_PRIVATE_DIRECTORY, exist_ok=True)
        entries = sorted((vertex, index, count) for (vertex, index), count in emitted.items())
        body = _pack([_INPUT_FORMAT, snapshot_id, name, entries])
        path = self._input_path(snapshot_id, name)
        if write_atomically(path, self._tag(body) + body, _PRIVATE_FILE, replace=False):
            return dict(emitted)
        recorded = self.recorded_batch_input(snapshot_id, name)
        assert recorded is not None
        return recorded

    def recorded_batch_input(self, snapshot_id: int, name: str) -> dict[ProcessorKey, int] | None:
        """What `record_batch_input` recorded for task `name` of the batch (None: no run of
        the task got that far), once authenticated: a task run again, as Spark does after a
        lost executor while other tasks have read the first run's output, must emit exactly
        the same input, not what its sources hold by now."""
        path = self._input_path(snapshot_id, name)
        try:
            record = _unpack(self._authentic(path))
        except FileNotFoundError:
            return None
        if len(record) != 4 or record[:3] != (_INPUT_FORMAT, snapshot_id, name):
            raise SnapshotError(f"{path} is not the input record of task {name!r}")
        return {(vertex, index): count for vertex, index, count in record[3]}

    def _input_path(self, snapshot_id: int, name: str) -> str:
        return os.path.join(self._path(snapshot_id), f"input-{name}.bin")

    def record_publications(self, snapshot_id: int, files: Sequence[tuple[str, str]]) -> None:
        """Records, before snapshot `snapshot_id` is committed, the (temporary, final) names of
        the files its transactional sinks sealed, which are renamed once it is: a driver that
        stops between the commit and the renames does them when it starts again."""
        body = _pack([_PUBLICATIONS_FORMAT, snapshot_id, sorted(files)])
        os.makedirs(self._path(snapshot_id), mode=_PRIVATE_DIRECTORY, exist_ok=True)
        path = os.path.join(self._path(snapshot_id), _PUBLICATIONS)
        write_atomically(path, self._tag(body) + body, _PRIVATE_FILE)

    def recorded_publications(self, snapshot_id: int) -> list[tuple[str, str]]:
        """What `record_publications` recorded for snapshot `snapshot_id` (empty: nothing),
        once authenticated."""
        path = os.path.join(self._path(snapshot_id), _PUBLICATIONS)
        try:
            record = _unpack(self._authentic(path))
        except FileNotFoundError:
            return []
        if len(record) != 3 or record[:2] != (_PUBLICATIONS_FORMAT, snapshot_id):
            raise SnapshotError(f"{path} is not the publications of snapshot {snapshot_id}")
        return [(temporary, final) for temporary, final in record[2]]

    def commit(
        self,
        snapshot_id: int,
        member_count: int,
        local_parallelism: Mapping[str, int],
        parts: Mapping[str, tuple[bytes, Held]],
        routing: Routings | None = None,
        definitions: Mapping[str, StateDefinition] | None = None,
    ) -> None:
        """Makes snapshot `snapshot_id` complete: writes its manifest, naming every part (name
        -> the tag `write_part` returned and `held_by` its processors), the routing of the
        edges into each vertex and the vertices' state definitions (None: unknown), then
        removes the older snapshots."""
        target = self._path(snapshot_id)
        os.makedirs(target, mode=_PRIVATE_DIRECTORY, exist_ok=True)
        fsync_directory(target)
        body = _pack(
            [
                _FORMAT,
                snapshot_id,
                member_count,
                sorted(local_parallelism.items()),
                sorted((name, tag, tuple(held)) for name, (tag, held) in parts.items()),
                None if routing is None else sorted(routing.items()),
                None if definitions is None else sorted(definitions.items()),
            ]
        )
        write_atomically(os.path.join(target, _MANIFEST), self._tag(body) + body, _PRIVATE_FILE)
        fsync_directory(target)
        record = _pack([_COMMITTED_FORMAT, snapshot_id])
        write_atomically(
            os.path.join(self.directory, _COMMITTED), self._tag(record) + record, _PRIVATE_FILE
        )
        for old in self._ids():
            if old < snapshot_id:
                shutil.rmtree(self._path(old), ignore_errors=True)

    def _ids(self) -> list[int]:
        return [
            int(match.group(1))
            for name in os.listdir(self.directory)
            if (match := _SNAPSHOT_DIR.fullmatch(name)) and name == _dir_name(int(match.group(1)))
        ]

    def _path(self, snapshot_id: int) -> str:
        return os.path.join(self.directory, _dir_name(snapshot_id))

    def _tag(self, body: bytes) -> bytes:
        return hmac.digest(self._key, body, "sha256")

    def _authentic(self, path: str, expected: bytes | None = None) -> bytes:
        """The body of the file at `path` once its tag checks out under the store's key."""
        with open(path, "rb") as file:
            data = file.read()
        tag, body = data[:_TAG_BYTES], data[_TAG_BYTES:]
        if len(tag) != _TAG_BYTES or not hmac.compare_digest(tag, self._tag(body)):
            raise SnapshotError(
                f"{os.path.basename(path)} fails authentication: it was not written with this "
                "store's key (damaged, planted, or from another store)"
            )
        if expected is not None and not hmac.compare_digest(tag, expected):
            raise SnapshotError(f"{os.path.basename(path)} is not the part the manifest names")
        return body

    def committed(self, snapshot_id: int) -> Snapshot:
        """Snapshot `snapshot_id` as its manifest describes it, its parts unread: what the
        writer of the manifest hands on (a reader authenticates each part as it reads it)."""
        return self._load(snapshot_id, check_parts=False)

    def _check_file(self, path: str, expected: bytes) -> None:
        """SnapshotError unless the file at `path` carries the tag `expected` and its content
        matches it; reads the file in chunks, keeping none of it."""
        mac = hmac.new(self._key, digestmod="sha256")
        with open(path, "rb") as file:
            tag = file.read(_TAG_BYTES)
            while chunk := file.read(1 << 20):
                mac.update(chunk)
        if not (hmac.compare_digest(tag, expected) and hmac.compare_digest(tag, mac.digest())):
            raise SnapshotError(
                f"{os.path.basename(path)} fails authentication or is not the part the "
                "manifest names (damaged, planted, or from another store)"
            )

    def _load(self, snapshot_id: int, *, check_parts: bool) -> Snapshot:
        """The snapshot its authentic manifest describes. Its processors' state is read and
        decoded on first use, so a driver never holds what only tasks need; `check_parts`
        authenticates every part now (streaming through the files), so a damaged snapshot is
        skipped for the previous one."""
        path = os.path.join(self._path(snapshot_id), _MANIFEST)
        manifest = _unpack(self._authentic(path))
        if isinstance(manifest, tuple) and manifest[:1] == (_FORMAT_WITHOUT_ROUTING,):
            manifest = (*manifest, None, None)
        elif isinstance(manifest, tuple) and manifest[:1] == (_FORMAT_WITHOUT_DEFINITIONS,):
            manifest = (*manifest, None)
        else:
            _check_format(manifest, _FORMAT, path)
        if len(manifest) != 7 or manifest[1] != snapshot_id:
            raise SnapshotError(f"not a manifest of snapshot {snapshot_id} ({_FORMAT})")
        _, _, member_count, parallelism, listed, routing, definitions = manifest
        parts = {name: (tag, tuple(map(tuple, held))) for name, tag, held in listed}
        for name, (tag, _) in parts.items():
            path = os.path.join(self._path(snapshot_id), f"part-{name}.bin")
            if not os.path.exists(path):
                raise SnapshotError(f"part {name!r} of snapshot {snapshot_id} is missing")
            if check_parts:
                self._check_file(path, tag)

        def load() -> dict[ProcessorKey, ProcessorSnapshot]:
            processors: dict[ProcessorKey, ProcessorSnapshot] = {}
            for name, (tag, _) in parts.items():
                processors.update(self.read_part(snapshot_id, name, tag))
            return processors

        return Snapshot(
            snapshot_id,
            member_count,
            dict(parallelism),
            _ProcessorsOnDisk(load),
            parts=parts,
            store=self,
            routing=None if routing is None else routings_of(routing),
            definitions=None if definitions is None else definitions_from_record(definitions),
        )

    def __repr__(self) -> str:
        return f"DirectorySnapshotStore({self.directory!r})"


def parts_holding(
    parts: Mapping[str, tuple[bytes, Held]], vertices: Sequence[str]
) -> dict[str, bytes]:
    """Part name -> tag, for the parts (as a manifest lists them) that hold processors of
    `vertices`: the only ones a task running those vertices needs to read."""
    wanted = set(vertices)
    return {
        name: tag for name, (tag, held) in parts.items() if any(v in wanted for v, _, _ in held)
    }


def held_by(processors: Mapping[ProcessorKey, ProcessorSnapshot]) -> Held:
    """What a part holding `processors` records in the manifest."""
    return tuple(
        (vertex, index, saved.completed) for (vertex, index), saved in sorted(processors.items())
    )


class _ProcessorsOnDisk(Mapping[ProcessorKey, ProcessorSnapshot]):
    """The processors of a snapshot, loaded on first use (a stored one's: read from its parts)."""

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


class NewerFormatError(SnapshotError):
    """A store file written by a newer version of jetspark, in a format this one cannot read."""


def _check_format(record: Any, expected: str, path: str) -> None:
    """NewerFormatError when the authentic `record` read from `path` is of a newer version of
    the format `expected`; SnapshotError when it is of no version of it."""
    found = record[0] if isinstance(record, tuple) and record else None
    if found == expected:
        return
    wanted = _VERSIONED_FORMAT.fullmatch(expected)
    assert wanted is not None
    seen = _VERSIONED_FORMAT.fullmatch(found) if isinstance(found, str) else None
    if seen and seen.group(1) == wanted.group(1) and int(seen.group(2)) > int(wanted.group(2)):
        raise NewerFormatError(
            f"{os.path.basename(path)} is of the format {found}, written by a newer version of "
            f"jetspark (this one reads {expected}): read it with that version or a later one; "
            "the file is not damaged"
        )
    raise SnapshotError(f"{os.path.basename(path)} is not of the format {expected}")


def _dir_name(snapshot_id: int) -> str:
    return f"snapshot-{snapshot_id:010d}"


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True, unicode_errors="surrogatepass")


def _unpack(body: bytes) -> Any:
    try:
        return msgpack.unpackb(
            body, raw=False, use_list=False, strict_map_key=False, unicode_errors="surrogatepass"
        )
    except (ValueError, msgpack.UnpackException) as error:
        problem = f"{type(error).__name__}: {error}"
        raise SnapshotError(f"unreadable snapshot file ({problem})") from error


def _refuse_if_others_can_write(directory: str) -> None:
    """SnapshotError when users other than this one could plant or replace files there."""
    if not hasattr(os, "getuid"):
        return  # no POSIX permissions to check
    info = os.stat(directory)
    if not stat.S_ISDIR(info.st_mode):
        raise SnapshotError(f"snapshot store {directory!r} is not a directory")
    if info.st_uid != os.getuid():
        raise SnapshotError(
            f"snapshot store {directory!r} belongs to uid {info.st_uid}, but this process runs "
            f"as uid {os.getuid()}: only the store's owner may write it, since others could "
            "plant state there. Run the driver and every executor as one user (Spark on "
            "Kubernetes or YARN often runs executors as another one, such as uid 185: see "
            "'Executors running as another user' in docs/fault_tolerance.md)"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SnapshotError(
            f"snapshot store {directory!r} is writable by other users (mode "
            f"{stat.S_IMODE(info.st_mode):o}); restrict it (chmod 700) or use another directory"
        )


def _load_or_create_key(path: str) -> bytes:
    """The store's secret key, created (0600) when the store is new: written whole to a
    temporary file, then linked to `path`, so a process starting at the same time reads either
    no key (and makes its own, losing the race to link it) or the whole one."""
    if not os.path.lexists(path):
        key = secrets.token_bytes(_KEY_BYTES)
        temporary, file = create_exclusive(os.path.dirname(path), f".{_KEY}", _PRIVATE_FILE)
        try:
            with file:
                file.write(key)
                file.flush()
                os.fsync(file.fileno())
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass
            except OSError:  # no hard links on this file system: create the key in place
                with contextlib.suppress(FileExistsError):
                    _create_key_in_place(path, key)
        finally:
            os.remove(temporary)
    return _read_key(path)


def _read_key(path: str) -> bytes:
    """The store's key at `path`, once it is found to be private to this user and whole."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        key = file.read()
    if hasattr(os, "getuid") and (
        info.st_uid != os.getuid() or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    ):
        raise SnapshotError(
            f"the snapshot store's key {path!r} must belong to you and be readable by you "
            f"alone (mode 600), it has mode {stat.S_IMODE(info.st_mode):o}"
        )
    if len(key) != _KEY_BYTES:
        raise SnapshotError(f"the snapshot store's key {path!r} is damaged ({len(key)} bytes)")
    return key


def _create_key_in_place(path: str, key: bytes) -> None:
    """Creates the key file exclusively and writes `key` into it (FileExistsError if present)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _PRIVATE_FILE)
    with os.fdopen(descriptor, "wb") as file:
        file.write(key)
        file.flush()
        os.fsync(file.fileno())
