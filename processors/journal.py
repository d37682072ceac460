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

Event time (`event_time_policy`, what `add_timestamps` right after a journal source becomes): the
source emits the watermarks itself, no vertex after it. Its partitions are read in offset order,
so they never drift apart: one watermark over all of them is exact, where one per partition
would only hold the others back while a partition is quiet. A processor with no new item for
the policy's idle timeout is marked idle, and one that reads no partition is idle at once
(`EventTimeMapper`).

Snapshot: every processor saves the next offset of each partition it reads, under the broadcast
key `("journal_offset", partition_count, p)`, with event time the pair (offset, the processor's
watermark); a restored processor takes the offsets of the partitions it now reads (and resumes
from the lowest of their watermarks), so restoring at another parallelism or member count loses
and repeats nothing. At-least-once and exactly-once alike, the source re-emits exactly the items
after the snapshot.
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
from jetspark.core.state_definition import defines_state, describe
from jetspark.core.suppliers import ProcessorFn, unbounded
from jetspark.core.watermark import Watermark
from jetspark.processors.emission import ResumableEmission
from jetspark.processors.event_time import EventTimeMapper, EventTimePolicy, check_policy
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

    def __init__(
        self,
        journal: _Journal,
        partition_count: int,
        bounded: bool,
        event_time_policy: EventTimePolicy | None = None,
    ) -> None:
        self._journal = journal
        self._partition_count = partition_count
        self._bounded = bounded
        self._next: dict[int, int] = {}
        """Journal partition this processor reads -> the next offset to read in it."""
        self._heap: list[tuple[int, int]] = []
        """(next offset, partition) of every partition read, smallest offset first."""
        self._snapshot = ResumableEmission(self.emit_from_traverser_to_snapshot)
        self._event_time_policy = event_time_policy
        self._timestamp_fn: Callable[[Any], int] = _no_timestamp
        if event_time_policy is not None and event_time_policy.timestamp_fn is not None:
            self._timestamp_fn = event_time_policy.timestamp_fn
        self._mapper: EventTimeMapper | None = None
        """With event time: the watermarks, one mapper partition for all journal partitions."""
        self._restored_watermark: int | None = None
        self._unsent: Watermark | None = None
        """A watermark the outbox refused, sent before anything else."""

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        total, index = context.total_parallelism, context.global_processor_index
        self._next = {p: p for p in range(self._partition_count) if p % total == index}
        self._rebuild_heap()
        if self._event_time_policy is not None:
            self._mapper = EventTimeMapper(self._event_time_policy)
            self._mapper.add_partitions(1 if self._next else 0)

    def _rebuild_heap(self) -> None:
        self._heap = [(offset, p) for p, offset in self._next.items()]
        heapq.heapify(self._heap)

    def complete(self) -> bool:
        offer = self.outbox.offer
        if self._unsent is not None:
            if not offer(self._unsent):
                return False
            self._unsent = None
        if self._heap and not self._emit_readable():
            return False
        if self._mapper is not None:  # nothing left to read now: quiet partitions go idle
            tick = self._mapper.on_tick()
            if tick is not None and not offer(tick):
                self._unsent = tick
                return False
        return self._bounded

    def _emit_readable(self) -> bool:
        """Emits what can be read now, in offset order, with event time the watermark an item
        moves before it; True when nothing more can be, False when the outbox
        is full."""
        heap = self._heap
        length, item_at = self._journal.read(self.context)
        step = self._partition_count
        next_offsets = self._next
        offer = self.outbox.offer
        waits_on_none = self._journal.waits_on_none
        mapper = self._mapper
        if mapper is not None:
            timestamp_fn = self._timestamp_fn
            now = mapper.now()
        while True:
            offset, partition = heap[0]
            if offset >= length:
                return True
            item = item_at(offset)
            if item is None:
                if waits_on_none:
                    return True  # not there yet: asked again at the next call
            else:
                if mapper is not None:
                    watermark = mapper.on_event(0, timestamp_fn(item), now)
                    if watermark is not None and not offer(watermark):
                        self._unsent = watermark
                        return False
                if not offer(item):
                    return False
            next_offsets[partition] = offset + step
            heapq.heapreplace(heap, (offset + step, partition))

    def save_to_snapshot(self) -> bool:
        return self._snapshot.emit(self._entries)

    def _entries(self) -> list[tuple[BroadcastKey, Any]]:
        count, mapper = self._partition_count, self._mapper
        if mapper is None or not self._next:
            return [(broadcast_key((_OFFSET_KEY, count, p)), n) for p, n in self._next.items()]
        watermark = mapper.watermark(0)
        return [
            (broadcast_key((_OFFSET_KEY, count, p)), (n, watermark)) for p, n in self._next.items()
        ]

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
        if partition not in self._next:
            return
        offset, watermark = value if isinstance(value, (tuple, list)) else (value, None)
        self._next[partition] = offset
        if watermark is not None:
            restored = self._restored_watermark
            self._restored_watermark = watermark if restored is None else min(restored, watermark)

    def finish_snapshot_restore(self) -> bool:
        self._rebuild_heap()
        if self._mapper is not None and self._restored_watermark is not None:
            self._mapper.restore_watermark(0, self._restored_watermark)
        return True


def _no_timestamp(item: Any) -> int:
    raise AssertionError("a journal source reads timestamps only with an event time policy")


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


def _check_event_time(policy: EventTimePolicy | None, what: str) -> None:
    check_policy(policy, what)
    if policy is not None and policy.timestamp_fn is None:
        raise ValueError(
            f"{what}: a journal's items carry no timestamp: the policy needs a timestamp_fn"
        )


def read_journal_p(
    journal: str | ItemFn,
    *,
    count: int | None = None,
    partition_count: int = DEFAULT_JOURNAL_PARTITIONS,
    event_time_policy: EventTimePolicy | None = None,
) -> ProcessorFn:
    """A bounded replayable source: the engine's named list `journal` up to its end, or
    `journal(offset)` for offsets below `count`; it completes when everything is read.
    With `event_time_policy`, watermarks per journal partition (module docstring).
    """
    _check_partitions(partition_count)
    if not isinstance(journal, str) and (count is None or count < 0):
        raise ValueError(f"a bounded journal of an item function needs a count >= 0, got {count}")
    source = _journal_of(journal, count)
    _check_event_time(event_time_policy, "read_journal_p")
    return _defined(
        lambda: JournalSourceP(source, partition_count, True, event_time_policy),
        journal,
        partition_count,
    )


def stream_journal_p(
    journal: str | ItemFn,
    *,
    partition_count: int = DEFAULT_JOURNAL_PARTITIONS,
    event_time_policy: EventTimePolicy | None = None,
) -> ProcessorFn:
    """An unbounded replayable source: the engine's named list `journal`, polled for items
    appended to it, or `journal(offset)` for every offset (None: not there yet, asked again
    later); it runs until the job is cancelled. With `event_time_policy`, watermarks per
    journal partition, quiet ones marked idle (module docstring).
    """
    _check_partitions(partition_count)
    _check_event_time(event_time_policy, "stream_journal_p")
    source = _journal_of(journal, None)
    return unbounded(
        _defined(
            lambda: JournalSourceP(source, partition_count, False, event_time_policy),
            journal,
            partition_count,
        )
    )


def _defined(supplier: ProcessorFn, journal: str | ItemFn, partition_count: int) -> ProcessorFn:
    """`supplier`, declaring that its offsets are those of `journal` cut into `partition_count`
    partitions (state_definition.py): a restore into another journal or partitioning is refused."""
    return defines_state(
        supplier, JournalSourceP, journal=describe(journal), partitions=partition_count
    )
