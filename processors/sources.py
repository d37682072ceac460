"""Batch sources: the engine's named lists and maps, files, and a distributed number generator.

Every source emits its own slice of the data, so that each item is emitted once per job:
list items are split into contiguous runs among all processors, map entries by the partition
of their key (each member reads the partitions it owns, manual §8.2.1), files in line-aligned
byte ranges among the processors (`file_ranges`), generated numbers by `n % total_parallelism`
(the meta-supplier pattern, §8.7.2).

Snapshot: each processor saves how many items of its slice it emitted (under a broadcast key
tagged with its index); a restored processor with the same index and total parallelism skips
that many. Restored at another parallelism the slices differ, so each processor starts its new
slice from the beginning (at-least-once: items emitted before the snapshot are emitted again).
"""

from __future__ import annotations

import fnmatch
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context, ProcessorMetaSupplierContext
from jetspark.core.outbox import Outbox, is_plain_batch, offer_items_of
from jetspark.core.processor import Processor
from jetspark.core.suppliers import ProcessorFn, ProcessorMetaSupplier, ProcessorSupplier
from jetspark.partitioning import (
    local_processor_of_partition,
    member_of_partition,
    partition_id,
)
from jetspark.processors.emission import offer_batch
from jetspark.processors.file_ranges import (
    MIN_SPLIT_BYTES,
    FileRange,
    RangeLineReader,
    plan_ranges,
    splits_lines_by_bytes,
    text_file_batches,
)
from jetspark.processors.functions import engine_stores, whole_item
from jetspark.processors.snapshots import ProcessorState

_OFFSET = ProcessorState("source_offset")
_CHUNK = 256
"""Items a source reads ahead and offers as one batch."""

ReadFn = Callable[[Context], Iterable[Any]]
"""Returns the items one source processor emits, in a deterministic order."""


class SourceP(AbstractProcessor):
    """Emits the items `read_fn(context)` returns from `complete()`, then completes.

    None items are skipped. The read position is saved to snapshots (see the module docstring).
    Items are read `_CHUNK` at a time, or as many as the outbox has room for when that is fewer
    (large items: the runtime's outbox counts bytes), and offered as a batch (`offer_items`);
    the read position counts only those emitted, so a snapshot never skips items read ahead.
    """

    def __init__(self, read_fn: ReadFn, cooperative: bool = True) -> None:
        self._read_fn = read_fn
        self._cooperative = cooperative
        self._items: Iterator[Any] | None = None
        self._chunk: list[Any] = []
        """Items read ahead; those before `_position` are emitted."""
        self._position = 0
        self._plain = True
        """The chunk holds neither None nor a Watermark: it goes to the outbox as a batch."""
        self._offset = 0
        self._foreign_state_seen = False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._offer_items = offer_items_of(outbox)
        self._room: Callable[[], int] | None = getattr(outbox, "room", None)

    def is_cooperative(self) -> bool:
        return self._cooperative

    def _read_ahead(self) -> int:
        """How many items to read next: `_CHUNK`, at most the outbox's room, at least one."""
        if self._room is None:
            return _CHUNK
        return max(1, min(_CHUNK, self._room()))

    def complete(self) -> bool:
        if self._items is None:
            self._items = iter(self._read_fn(self.context))
            for _ in itertools.islice(self._items, self._offset):
                pass
        chunk, position = self._chunk, self._position
        while True:
            if position == len(chunk):
                chunk, position = list(itertools.islice(self._items, self._read_ahead())), 0
                self._chunk, self._plain = chunk, is_plain_batch(chunk)
                if not chunk:
                    self._position = 0
                    return True
            # None items are skipped, yet counted in the read position
            end = offer_batch(self, self._offer_items, chunk, position, self._plain)
            self._offset += end - position
            position = self._position = end
            if end < len(chunk):
                return False

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot(*_OFFSET.entry(self.context, self._offset))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        saved = _OFFSET.saved(key, value)
        if ProcessorState.is_own(self.context, saved):
            self._offset = saved.value
        else:
            self._foreign_state_seen = True

    def finish_snapshot_restore(self) -> bool:
        if self._foreign_state_seen and self._offset == 0:
            self.logger.warning(
                "restored at a different parallelism: this source re-reads its slice from the "
                "beginning (at-least-once)"
            )
        return True

    def close(self) -> None:
        close = getattr(self._items, "close", None)
        if close is not None:
            close()


@dataclass(frozen=True)
class SourceFn:
    """The processor factory of a source vertex, declaring the engine's named stores it reads
    (`("list", name)` or `("map", name)` pairs): SparkEngine ships only those into the job."""

    make: Callable[[], Processor]
    store_reads: tuple[tuple[str, str], ...] = ()

    def __call__(self) -> Processor:
        return self.make()


@dataclass(frozen=True)
class _ListSlice:
    """This processor's contiguous run of the named list's items."""

    name: str

    def __call__(self, context: Context) -> Iterator[Any]:
        items = engine_stores(context).get_list(self.name)
        count, total = len(items), context.total_parallelism
        index = context.global_processor_index
        start = index * count // total
        for position, item in enumerate(
            itertools.islice(items, start, (index + 1) * count // total), start
        ):
            if item is None:
                raise ValueError(
                    f"vertex '{context.vertex_name}': read_list_p({self.name!r}) found None at "
                    f"position {position} of the list; None cannot be an item (an inbox cannot "
                    "hold it, as in Jet), so wrap it or leave it out"
                )
            yield item


@dataclass(frozen=True)
class _MapSlice:
    """The named map's entries whose key partition this processor owns, as (key, value)."""

    name: str

    def __call__(self, context: Context) -> Iterable[Any]:
        entries = list(engine_stores(context).get_map(self.name).items())
        members, local = context.member_count, context.local_parallelism
        for key, value in entries:
            partition = partition_id(key, context.partition_count)
            if (
                member_of_partition(partition, members) == context.member_index
                and local_processor_of_partition(partition, members, local)
                == context.local_processor_index
            ):
                yield (key, value)


def read_list_p(name: str) -> ProcessorFn:
    """Emits the items of the engine's named list, split into contiguous runs among processors.
    A None item fails the job, naming the vertex and its position (None is no item)."""
    return SourceFn(partial(SourceP, _ListSlice(name)), (("list", name),))


def read_map_p(name: str) -> ProcessorFn:
    """Emits the `(key, value)` entries of the engine's named map; each member reads only the
    partitions it owns, split among its processors as a partitioned edge would route them.
    """
    return SourceFn(partial(SourceP, _MapSlice(name)), (("map", name),))


def _line(filename: str, line: str) -> str:
    return line


_FILE_POSITION = ProcessorState("file_position")

_Batch = tuple[int, list[str]]
"""(position of the first line, lines): a byte offset, or a line number for text reads."""


@dataclass(frozen=True)
class _FileShares:
    """Which files a read_files_p processor reads, and which part of each."""

    directory: str
    glob: str
    charset: str
    shared_file_system: bool
    min_split_bytes: int

    def ranges(self, context: Context) -> list[FileRange]:
        """The processor's ranges: the plan every processor of the vertex computes alike."""
        if not os.path.isdir(self.directory):
            raise FileNotFoundError(
                f"vertex '{context.vertex_name}': read_files_p directory {self.directory!r} "
                "does not exist"
            )
        sizes = []
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if fnmatch.fnmatch(name, self.glob) and os.path.isfile(path):
                sizes.append((name, os.path.getsize(path)))
        if self.shared_file_system or _members_are_spark_tasks(context):
            index, count = context.global_processor_index, context.total_parallelism
        else:
            index, count = context.local_processor_index, context.local_parallelism
        splittable = splits_lines_by_bytes(self.charset)
        return plan_ranges(sizes, count, self.min_split_bytes, splittable)[index]

    def batches(self, file_range: FileRange, resume_at: int | None) -> Iterator[_Batch]:
        """The range's lines in batches, from `resume_at` (a batch position) if given."""
        path = os.path.join(self.directory, file_range.name)
        if not splits_lines_by_bytes(self.charset):
            return text_file_batches(path, self.charset, resume_at or 0)
        start = file_range.start if resume_at is None else resume_at
        reader = RangeLineReader(
            path, start, file_range.end, self.charset, aligned=resume_at is not None
        )
        return reader.batches()


def _members_are_spark_tasks(context: Context) -> bool:
    """True inside a SparkEngine task, whose stores carry the task's RDD input.

    A Spark member is a task that may run on any executor (and again on another after a
    failure), not a machine with a disk of its own: its files must be reachable from every
    executor, so read_files_p splits them among all processors of the job.
    """
    return hasattr(context.stores, "rdd_input")


class ReadFilesP(AbstractProcessor):
    """read_files_p: emits `map_fn(file name, line)` for the lines of its share of the files.

    Reads its ranges in order, a block of lines at a time, offered as one batch; None results
    of `map_fn` are skipped. Snapshot: (range number, position of the current batch, items of
    it emitted); a processor restored with the same index and total parallelism (and files
    unchanged) reopens the range at that position. At another parallelism the ranges differ and
    the processor reads its new share from the start (at-least-once), as the other sources do.
    """

    def __init__(self, shares: _FileShares, map_fn: Callable[[str, str], Any]) -> None:
        self._shares = shares
        self._map_fn = None if map_fn is _line else map_fn
        self._ranges: list[FileRange] | None = None
        self._range_index = 0
        self._batches: Iterator[_Batch] | None = None
        self._resume_at: int | None = None
        self._skip = 0
        """Items from the resume position on that a restored snapshot says were emitted."""
        self._batch_position = 0
        self._items: list[Any] = []
        self._emitted = 0
        self._plain = True
        self._foreign_state_seen = False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._offer_items = offer_items_of(outbox)

    def is_cooperative(self) -> bool:
        return False

    def complete(self) -> bool:
        if self._ranges is None:
            self._ranges = self._shares.ranges(self.context)
        while True:
            if self._emitted == len(self._items) and not self._next_batch():
                return True
            items = self._items
            end = offer_batch(self, self._offer_items, items, self._emitted, self._plain)
            self._emitted = end
            if end < len(items):
                return False

    def _next_batch(self) -> bool:
        """Loads the next batch with anything left to emit; False when every range is read."""
        assert self._ranges is not None
        while self._range_index < len(self._ranges):
            file_range = self._ranges[self._range_index]
            if self._batches is None:
                self._batches = self._shares.batches(file_range, self._resume_at)
                self._resume_at = None
            batch = next(self._batches, None)
            if batch is None:
                self._batches = None
                self._range_index += 1
                continue
            self._batch_position, lines = batch
            items: list[Any] = lines
            if self._map_fn is not None:
                map_fn, name = self._map_fn, file_range.name
                items = [item for line in lines if (item := map_fn(name, line)) is not None]
            if self._skip >= len(items):
                self._skip -= len(items)
                continue
            self._items, self._emitted, self._skip = items, self._skip, 0
            self._plain = self._map_fn is None or is_plain_batch(items)
            return True
        self._items, self._emitted = [], 0
        return False

    def save_to_snapshot(self) -> bool:
        position: tuple[int, int | None, int] = (
            self._range_index,
            self._batch_position,
            self._emitted,
        )
        if self._skip or self._resume_at is not None:  # restored, nothing read since
            position = (self._range_index, self._resume_at, self._skip)
        return self.try_emit_to_snapshot(*_FILE_POSITION.entry(self.context, position))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        saved = _FILE_POSITION.saved(key, value)
        if ProcessorState.is_own(self.context, saved):
            self._range_index, self._resume_at, self._skip = saved.value
        else:
            self._foreign_state_seen = True

    def finish_snapshot_restore(self) -> bool:
        if self._foreign_state_seen and self._range_index == 0 and self._resume_at is None:
            self.logger.warning(
                "restored at a different parallelism: this source re-reads its files from the "
                "beginning (at-least-once)"
            )
        return True

    def close(self) -> None:
        close = getattr(self._batches, "close", None)
        if close is not None:
            close()


def read_files_p(
    directory: str,
    glob: str = "*",
    charset: str = "utf-8",
    shared_file_system: bool = False,
    map_fn: Callable[[str, str], Any] = _line,
    *,
    min_split_bytes: int = MIN_SPLIT_BYTES,
) -> ProcessorFn:
    """Emits `map_fn(filename, line)` for each line of the files in `directory` matching `glob`.

    Non-cooperative (blocking reads). Lines end at `\\n`, `\\r\\n` or `\\r`, which are
    removed. Files larger than `min_split_bytes` are cut into line-aligned byte ranges (each
    line read by the range where it starts, see `file_ranges`), smaller ones stay whole, and the
    ranges are spread evenly over the readers. With `shared_file_system=True` the readers are
    all processors of the job, so each line is read once. Without it, on LocalEngine, each
    member reads its own local `directory` completely (Jet's rule), split among its processors.
    On SparkEngine a member is a Spark task, not a machine, so the files are always split among
    all processors: the directory must be readable at the same path by every executor.
    """
    if min_split_bytes < 1:
        raise ValueError(f"min_split_bytes must be at least 1, got {min_split_bytes}")
    shares = _FileShares(directory, glob, charset, shared_file_system, min_split_bytes)
    return SourceFn(partial(ReadFilesP, shares, map_fn))


@dataclass(frozen=True)
class _Numbers:
    """`map_fn(n)` for n in `range(first, count, step)`: one processor's share of the numbers."""

    count: int
    first: int
    step: int
    map_fn: Callable[[int], Any]

    def __call__(self, context: Context) -> Iterator[Any]:
        return map(self.map_fn, range(self.first, self.count, self.step))


@dataclass
class _GenerateSupplier(ProcessorSupplier):
    """One member's generators: global processor `base + i` emits the numbers n with
    n % total_parallelism == base + i.
    """

    count: int
    base: int
    total: int
    map_fn: Callable[[int], Any]

    def get(self, count: int) -> list[Processor]:
        return [
            SourceP(_Numbers(self.count, self.base + i, self.total, self.map_fn))
            for i in range(count)
        ]


class GenerateMetaSupplier(ProcessorMetaSupplier):
    """The manual's distributed number generator (§8.7.2): the meta-supplier learns the total
    and local parallelism, and gives each member a supplier for its global processor indexes.
    """

    store_reads = ()

    def __init__(self, count: int, map_fn: Callable[[int], Any]) -> None:
        self.count = count
        self.map_fn = map_fn
        self._total = 1
        self._local = 1

    def init(self, context: ProcessorMetaSupplierContext) -> None:
        self._total = context.total_parallelism
        self._local = context.local_parallelism

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], ProcessorSupplier]:
        count, total, local, map_fn = self.count, self._total, self._local, self.map_fn
        return lambda member_index: _GenerateSupplier(count, member_index * local, total, map_fn)


def generate_p(count: int, map_fn: Callable[[int], Any] = whole_item) -> GenerateMetaSupplier:
    """Emits `map_fn(n)` for n in `range(count)`, each n exactly once cluster-wide."""
    if type(count) is not int:
        raise TypeError(f"generate_p: count must be an int, got {type(count).__name__} {count!r}")
    if count < 0:
        raise ValueError(f"generate_p: count must not be negative, got {count}")
    if not callable(map_fn):
        raise TypeError(f"generate_p: map_fn must be callable, got {map_fn!r}")
    return GenerateMetaSupplier(count, map_fn)


class ReadRddMetaSupplier(ProcessorMetaSupplier):
    """Feeds an existing PySpark RDD into a vertex (`read_rdd_p`).

    On SparkEngine the vertex's stage reads the RDD's partitions directly: member m's task gets
    a share of them, coalesced without a shuffle, and nothing passes through the driver. The RDD
    itself stays on the driver (it is dropped when the supplier is pickled into tasks). On
    LocalEngine the RDD is read through `toLocalIterator()` by processor 0.
    """

    store_reads = ()

    def __init__(self, rdd: Any) -> None:
        self.source_rdd = rdd

    def preferred_local_parallelism(self) -> int:
        """One reader per member: the task's partition iterator cannot be shared."""
        return 1

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], ProcessorSupplier]:
        """The same supplier on every member; each processor reads what its task was given."""
        supplier = ProcessorSupplier.of(lambda: SourceP(self._items))
        return lambda member_index: supplier

    def _items(self, context: Context) -> Iterable[Any]:
        task_input = getattr(context.stores, "rdd_input", None)
        if task_input is not None:
            return task_input if context.local_processor_index == 0 else ()
        if self.source_rdd is None:
            raise RuntimeError(
                f"vertex '{context.vertex_name}': read_rdd_p has no RDD here; it runs on "
                "SparkEngine (which hands each task its partitions) or on LocalEngine in the "
                "driver process"
            )
        return self.source_rdd.toLocalIterator() if context.global_processor_index == 0 else ()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "source_rdd": None}


def read_rdd_p(rdd: Any) -> ReadRddMetaSupplier:
    """Emits the items of a PySpark RDD; on Spark each member reads its share of the partitions."""
    return ReadRddMetaSupplier(rdd)
