"""`stream_files_p`: Jet's unbounded file source (manual §5.7), replayable.

Each processor owns some of the files of `directory` that match `glob` (by a hash of the file
name: spread over every processor of the cluster with a shared file system, and always on
SparkEngine, whose members are tasks that may run on any executor; otherwise each member reads
the whole directory, as in Jet). It polls the directory and emits every complete line (ended by
a line break) appended to its files, and the lines of new files; a line still being written is
read once its line break is there. The directory being deleted completes the source, as in Jet.

Beyond Jet, it is replayable: a snapshot saves, per file, the byte offset of the first line not
yet emitted (under a broadcast key), so a restored job goes on exactly after it, at any
parallelism, and with a transactional sink the job is exactly-once. `only_new=True` is Jet's
behaviour: only content added after the job first started is read.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections import deque
from typing import Any

import mmh3

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.outbox import Outbox
from jetspark.core.snapshot_keys import BroadcastKey, broadcast_key
from jetspark.core.suppliers import ProcessorFn, unbounded
from jetspark.processors.file_ranges import RangeLineReader

_KEY = "stream_file"


class StreamFilesP(AbstractProcessor):
    """Emits the lines appended to the files it owns (module docstring). Non-cooperative."""

    poll_seconds: float = 0.1
    """How often a processor with nothing to emit looks at the directory again."""

    def __init__(
        self, directory: str, glob: str, charset: str, only_new: bool, shared_file_system: bool
    ) -> None:
        super().__init__()
        self._directory = directory
        self._glob = glob
        self._charset = charset
        self._only_new = only_new
        self._shared = shared_file_system
        self._offsets: dict[str, int] = {}
        """File name -> offset of its first line not yet read."""
        self._aligned: set[str] = set()
        """Files whose offset is known to be a line start (not an `only_new` start size)."""
        self._skips: dict[str, int] = {}
        """File -> lines to skip at its restored offset (emitted before the snapshot)."""
        self._restored = False
        self._started = False
        self._queue: deque[tuple[str, int, int, list[str]]] = deque()
        """Batches read and not yet emitted: (file, start offset, end offset, lines)."""
        self._skipped: deque[int] = deque()
        """Per queued batch: the lines skipped at its start (emitted before a restore)."""
        self._emitted = 0
        """Lines of the queue's first batch already emitted."""
        self._next_poll = 0.0

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        spark = hasattr(context.stores, "rdd_input")  # SparkEngine hands tasks their input
        if self._shared or spark:
            self._readers, self._reader = context.total_parallelism, context.global_processor_index
        else:
            self._readers, self._reader = context.local_parallelism, context.local_processor_index

    def _owned(self) -> list[str]:
        names = sorted(
            name
            for name in os.listdir(self._directory)
            if fnmatch.fnmatch(name, self._glob)
            and os.path.isfile(os.path.join(self._directory, name))
        )
        return [n for n in names if file_owner(n, self._readers) == self._reader]

    def complete(self) -> bool:
        queue = self._queue
        if not queue:
            if not os.path.isdir(self._directory):
                if self._started or self._restored:
                    return True  # the directory was deleted: the source completes, as in Jet
                raise FileNotFoundError(
                    f"vertex '{self.context.vertex_name}': stream_files_p's directory "
                    f"{self._directory!r} does not exist (or is not a directory)"
                )
            if not self._started:
                self._start()
            now = time.monotonic()
            if now < self._next_poll:
                return False  # nothing now: a micro-batch may end here
            self._next_poll = now + self.poll_seconds
            self._read_new()
        while queue:
            name, _, end, lines = queue[0]
            while self._emitted < len(lines):
                if not self.try_emit(lines[self._emitted]):
                    return False
                self._emitted += 1
            self._offsets[name] = end
            self._aligned.add(name)
            self._emitted = 0
            queue.popleft()
            self._skipped.popleft()
        return False

    def _start(self) -> None:
        """`only_new` on a fresh start: the files' current ends are where reading begins."""
        self._started = True
        if self._only_new and not self._restored:
            for name in self._owned():
                self._offsets[name] = os.path.getsize(os.path.join(self._directory, name))

    def _read_new(self) -> None:
        """Queues the complete lines appended to the owned files since they were last read."""
        for name in self._owned():
            path = os.path.join(self._directory, name)
            start = self._offsets.get(name, 0)
            if os.path.getsize(path) <= start:
                continue
            reader = RangeLineReader(
                path,
                start,
                None,
                self._charset,
                aligned=name in self._aligned or start == 0,
                complete_last_line=False,
            )
            batches = list(reader.batches())
            if not batches:
                continue  # only a line still being written
            ends = [position for position, _ in batches[1:]] + [reader.position]
            for (position, lines), end in zip(batches, ends, strict=True):
                skip = self._skips.pop(name, 0)
                self._queue.append((name, position, end, lines[skip:]))
                self._skipped.append(skip)

    def save_to_snapshot(self) -> bool:
        positions = {
            name: (offset, self._skips.get(name, 0), name in self._aligned)
            for name, offset in self._offsets.items()
        }
        if self._queue:  # the batch being emitted: its start, and its lines already out
            name, start, _, _ = self._queue[0]
            positions[name] = (start, self._skipped[0] + self._emitted, True)
        return all(
            self.try_emit_to_snapshot(broadcast_key((_KEY, name)), value)
            for name, value in sorted(positions.items())
        )

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if not isinstance(key, BroadcastKey) or key.key[0] != _KEY:
            raise ValueError(f"unexpected snapshot entry {key!r}: expected a file position")
        self._restored = True
        name = key.key[1]
        if file_owner(name, self._readers) != self._reader:
            return
        offset, skip, aligned = value
        self._offsets[name] = offset
        if aligned:
            self._aligned.add(name)
        if skip:
            self._skips[name] = skip
        else:
            self._skips.pop(name, None)


def file_owner(name: str, readers: int) -> int:
    """The index, among `readers` processors, of the one that reads the file called `name`.

    MurmurHash3, as for partitions: CRC-32 put f0.log ... f7.log all on the first of two."""
    return mmh3.hash(name.encode("utf-8", "surrogateescape"), signed=False) % readers


def stream_files_p(
    directory: str,
    glob: str = "*",
    charset: str = "utf-8",
    *,
    only_new: bool = False,
    shared_file_system: bool = False,
) -> ProcessorFn:
    """Jet's `streamFiles`: the lines of the files of `directory` matching `glob`, then every
    line appended to them or to new files, until the directory is deleted; replayable from
    snapshots (module docstring)."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError(f"stream_files_p: {directory!r} is not a directory")
    return unbounded(lambda: StreamFilesP(directory, glob, charset, only_new, shared_file_system))
