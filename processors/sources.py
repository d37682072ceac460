"""Batch sources: the engine's named lists and maps, files, and a distributed number generator.

Every source emits its own slice of the data, so that each item is emitted once per job:
list items are split into contiguous runs among all processors, map entries by the partition
of their key (each member reads the partitions it owns, manual §8.2.1), files by name among the
processors, generated numbers by `n % total_parallelism` (the meta-supplier pattern, §8.7.2).

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
    Items are read `_CHUNK` at a time and offered as a batch (`offer_items`); the read position
    counts only those emitted, so a snapshot never skips items read ahead.
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

    def is_cooperative(self) -> bool:
        return self._cooperative

    def complete(self) -> bool:
        if self._items is None:
            self._items = iter(self._read_fn(self.context))
            for _ in itertools.islice(self._items, self._offset):
                pass
        chunk, position = self._chunk, self._position
        while True:
            if position == len(chunk):
                chunk, position = list(itertools.islice(self._items, _CHUNK)), 0
                self._chunk, self._plain = chunk, is_plain_batch(chunk)
                if not chunk:
                    self._position = 0
                    return True
            if self._plain:
                end = self._offer_items(chunk, position)
            else:  # None items are skipped, yet counted in the read position: one by one
                end = position
                while end < len(chunk) and (chunk[end] is None or self.try_emit(chunk[end])):
                    end += 1
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
    return lambda: SourceP(_ListSlice(name))


def read_map_p(name: str) -> ProcessorFn:
    """Emits the `(key, value)` entries of the engine's named map; each member reads only the
    partitions it owns, split among its processors as a partitioned edge would route them.
    """
    return lambda: SourceP(_MapSlice(name))


def _line(filename: str, line: str) -> str:
    return line


@dataclass(frozen=True)
class _FileLines:
    """`map_fn(filename, line)` for each line of this processor's share of the matching files."""

    directory: str
    glob: str
    charset: str
    shared_file_system: bool
    map_fn: Callable[[str, str], Any]

    def __call__(self, context: Context) -> Iterator[Any]:
        if not os.path.isdir(self.directory):
            raise FileNotFoundError(
                f"vertex '{context.vertex_name}': read_files_p directory {self.directory!r} "
                "does not exist"
            )
        names = sorted(
            name
            for name in os.listdir(self.directory)
            if fnmatch.fnmatch(name, self.glob)
            and os.path.isfile(os.path.join(self.directory, name))
        )
        if self.shared_file_system:
            index, count = context.global_processor_index, context.total_parallelism
        else:
            index, count = context.local_processor_index, context.local_parallelism
        for name in names[index::count]:
            with open(os.path.join(self.directory, name), encoding=self.charset) as file:
                for line in file:
                    yield self.map_fn(name, line.rstrip("\n"))


def read_files_p(
    directory: str,
    glob: str = "*",
    charset: str = "utf-8",
    shared_file_system: bool = False,
    map_fn: Callable[[str, str], Any] = _line,
) -> ProcessorFn:
    """Emits `map_fn(filename, line)` for each line of the files in `directory` matching `glob`.

    Non-cooperative (blocking reads). Files are split among processors by name. Without a
    shared file system every member reads its own local `directory` completely, split among its
    processors; with `shared_file_system=True` the files are split among all processors of the
    cluster, so each file is read once.
    """
    lines = _FileLines(directory, glob, charset, shared_file_system, map_fn)
    return lambda: SourceP(lines, cooperative=False)


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
