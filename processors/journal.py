"""Replayable sources: a journal read by offset, so a restored job re-reads exactly what follows
its snapshot (manual §3.5, §7.5: "the source must be able to replay the data it emitted after
the last checkpoint").

A journal is a sequence addressed by offset: the engine's named list (items appended to it
while the job runs are read too), or `item_fn(offset)`, a pure function giving the item at each
offset (an endless event stream that is the same on every replay). Like Jet's event journal it
is split into `partition_count` journal partitions: offset n is in partition n % partition_count,
and processor i of a vertex with total parallelism T reads the partitions p with p % T == i,
in offset order. A list's None items are skipped; an endless `item_fn` returning None means that
the offset's item is not there yet: the source emits nothing further for now and asks again at
its next call, so the function can follow a feed that grows (and the loop never spins on it).

Snapshot: every processor saves the next offset of each partition it reads, under the broadcast
key `("journal_offset", partition_count, p)`; a restored processor takes the offsets of the
partitions it now reads, so restoring at another parallelism or member count loses and repeats
nothing. At-least-once and exactly-once alike, the source re-emits exactly the items after the
snapshot.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.outbox import Outbox
from jetspark.core.snapshot_keys import BroadcastKey, broadcast_key
from jetspark.core.suppliers import ProcessorFn, unbounded
from jetspark.processors.emission import ResumableEmission
from jetspark.processors.functions import engine_stores

DEFAULT_JOURNAL_PARTITIONS = 16
"""Journal partitions unless told otherwise: the most processors a journal source keeps busy."""

_OFFSET_KEY = "journal_offset"

ItemFn = Callable[[int], Any]
"""offset -> the item at that offset (pure: the same item on every call)."""


class _Journal(Protocol):
    """Where the items come from."""

    @property
    def waits_on_none(self) -> bool:
        """True when a None item means "not there yet" rather than "skip this offset"."""
        ...

    def read(self, context: Context) -> tuple[float, Callable[[int], Any]]:
        """How many offsets can be read now, and the function giving the item at an offset."""
        ...


@dataclass(frozen=True)
class _ListJournal:
    """The engine's named list; its current length bounds what can be read now."""

    name: str
    waits_on_none = False

    def read(self, context: Context) -> tuple[float, Callable[[int], Any]]:
        items = engine_stores(context).get_list(self.name)
        return len(items), items.__getitem__


@dataclass(frozen=True)
class _FunctionJournal:
    """`item_fn(offset)` for offsets below `count` (None: every offset)."""

    item_fn: ItemFn
    count: int | None

    @property
    def waits_on_none(self) -> bool:
        return self.count is None

    def read(self, context: Context) -> tuple[float, Callable[[int], Any]]:
        return (float("inf") if self.count is None else self.count), self.item_fn


class JournalSourceP(AbstractProcessor):
    """Emits its journal partitions' items in offset order (see the module docstring).

    Bounded: `complete()` returns True once every partition it reads is exhausted. Unbounded
    (streaming): `complete()` never returns True; with nothing new to read it returns False
    without emitting, and the engine calls it again later, until the job is cancelled.
    """

    def __init__(self, journal: _Journal, partition_count: int, bounded: bool) -> None:
        self._journal = journal
        self._partition_count = partition_count
        self._bounded = bounded
        self._next: dict[int, int] = {}
        """Journal partition this processor reads -> the next offset to read in it."""
        self._heap: list[tuple[int, int]] = []
        """(next offset, partition) of every partition read, smallest offset first."""
        self._snapshot = ResumableEmission(self.emit_from_traverser_to_snapshot)

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        total, index = context.total_parallelism, context.global_processor_index
        self._next = {p: p for p in range(self._partition_count) if p % total == index}
        self._rebuild_heap()

    def _rebuild_heap(self) -> None:
        self._heap = [(offset, p) for p, offset in self._next.items()]
        heapq.heapify(self._heap)

    def complete(self) -> bool:
        heap = self._heap
        if not heap:
            return self._bounded
        length, item_at = self._journal.read(self.context)
        step = self._partition_count
        next_offsets = self._next
        offer = self.outbox.offer
        waits_on_none = self._journal.waits_on_none
        while True:
            offset, partition = heap[0]
            if offset >= length:
                return self._bounded
            item = item_at(offset)
            if item is None:
                if waits_on_none:
                    return False  # not there yet: asked again at the next call
            elif not offer(item):
                return False
            next_offsets[partition] = offset + step
            heapq.heapreplace(heap, (offset + step, partition))

    def save_to_snapshot(self) -> bool:
        return self._snapshot.emit(self._entries)

    def _entries(self) -> list[tuple[BroadcastKey, int]]:
        count = self._partition_count
        return [(broadcast_key((_OFFSET_KEY, count, p)), n) for p, n in self._next.items()]

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if not isinstance(key, BroadcastKey) or key.key[0] != _OFFSET_KEY:
            raise ValueError(f"unexpected snapshot entry {key!r}: expected a journal offset")
        _, count, partition = key.key
        if count != self._partition_count:
            raise ValueError(
                f"vertex '{self.context.vertex_name}': the snapshot was taken of a journal of "
                f"{count} partitions, this one has {self._partition_count}; offsets do not carry "
                "over to another partition count"
            )
        if partition in self._next:
            self._next[partition] = value

    def finish_snapshot_restore(self) -> bool:
        self._rebuild_heap()
        return True


def _journal_of(journal: str | ItemFn, count: int | None) -> _Journal:
    if isinstance(journal, str):
        if count is not None:
            raise ValueError("count applies to an item function; a list's journal is the list")
        return _ListJournal(journal)
    if not callable(journal):
        raise TypeError(
            f"journal must be a list name or an item function, got {type(journal).__name__}"
        )
    return _FunctionJournal(journal, count)


def _check_partitions(partition_count: int) -> None:
    if not isinstance(partition_count, int) or partition_count < 1:
        raise ValueError(f"partition_count must be an int >= 1, got {partition_count!r}")


def read_journal_p(
    journal: str | ItemFn,
    *,
    count: int | None = None,
    partition_count: int = DEFAULT_JOURNAL_PARTITIONS,
) -> ProcessorFn:
    """A bounded replayable source: the engine's named list `journal` up to its end, or
    `journal(offset)` for offsets below `count`; it completes when everything is read.
    """
    _check_partitions(partition_count)
    if not isinstance(journal, str) and (count is None or count < 0):
        raise ValueError(f"a bounded journal of an item function needs a count >= 0, got {count}")
    source = _journal_of(journal, count)
    return lambda: JournalSourceP(source, partition_count, bounded=True)


def stream_journal_p(
    journal: str | ItemFn, *, partition_count: int = DEFAULT_JOURNAL_PARTITIONS
) -> ProcessorFn:
    """An unbounded replayable source: the engine's named list `journal`, polled for items
    appended to it, or `journal(offset)` for every offset (None: not there yet, asked again
    later); it runs until the job is cancelled.
    """
    _check_partitions(partition_count)
    source = _journal_of(journal, None)
    return unbounded(lambda: JournalSourceP(source, partition_count, bounded=False))
