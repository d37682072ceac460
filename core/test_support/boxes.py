"""TestInbox, TestOutbox and TestProcessorContext: Jet's test doubles for calling a processor."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any

from jetspark.core.config import ProcessingGuarantee
from jetspark.core.context import Context, vertex_logger
from jetspark.core.inbox import ArrayDequeInbox
from jetspark.core.outbox import Ordinals, OutboxImpl

_NOTHING = object()


class TestInbox(ArrayDequeInbox):
    """An inbox a test fills by hand before calling `process()` or `restore_from_snapshot()`."""

    __test__ = False
    __slots__ = ()

    def add(self, item: Any) -> TestInbox:
        """Appends one item; returns the inbox for chaining."""
        self.queue.append(item)
        return self

    def add_all(self, items: Iterable[Any]) -> TestInbox:
        """Appends every item of `items` in order; returns the inbox for chaining."""
        self.queue.extend(items)
        return self


class TestOutbox(OutboxImpl):
    """An outbox with one bucket per capacity given, which a test reads and drains by hand.

    `block()` makes every bucket refuse offers (a full outbox) until `unblock()`; the harness
    uses it to give cooperative processors a full outbox on every other call.
    """

    __test__ = False

    def __init__(self, *capacities: int, snapshot_capacity: int = 1024) -> None:
        super().__init__(capacities, snapshot_capacity)
        self._open_capacities = list(capacities)
        self._refused: Any = _NOTHING
        self._refused_entry: Any = _NOTHING

    def offer(self, item: Any, ordinal: Ordinals = None) -> bool:
        """Offers like OutboxImpl, naming the bucket count when `ordinal` is out of range."""
        __tracebackhide__ = True  # a contract error points at the processor's line, not here
        wanted = (ordinal,) if isinstance(ordinal, int) else ordinal or ()
        if any(not 0 <= o < len(self.buckets) for o in wanted):
            raise IndexError(
                f"{self.owner} offered {item!r} to ordinal(s) {ordinal}, but the outbox has "
                f"{len(self.buckets)} bucket(s), one per outbound edge"
            )
        accepted = super().offer(item, ordinal)
        self._refused = _NOTHING if accepted else item
        return accepted

    def offer_to_snapshot(self, key: Any, value: Any) -> bool:
        """Offers a snapshot entry like OutboxImpl, remembering a refused one."""
        __tracebackhide__ = True
        accepted = super().offer_to_snapshot(key, value)
        self._refused_entry = _NOTHING if accepted else (key, value)
        return accepted

    def refused_item(self) -> Any:
        """The item whose offer was refused and not yet accepted, or None."""
        return None if self._refused is _NOTHING else self._refused

    def refused_snapshot_entry(self) -> tuple[Any, Any] | None:
        """The snapshot entry whose offer was refused and not yet accepted, or None."""
        return None if self._refused_entry is _NOTHING else self._refused_entry

    def queue(self, ordinal: int) -> deque[Any]:
        """The bucket of `ordinal`: the items offered to it and not yet drained."""
        return self.buckets[ordinal]

    def snapshot_queue(self) -> deque[tuple[Any, Any]]:
        """The snapshot bucket: the `(key, value)` entries offered and not yet drained."""
        return self.snapshot_bucket

    def drain_queue(self, ordinal: int, target: MutableSequence[Any]) -> int:
        """Moves the items of bucket `ordinal` to the end of `target`; returns the count."""
        return _drain(self.buckets[ordinal], target)

    def drain_queues(self, targets: Sequence[MutableSequence[Any]]) -> int:
        """Moves each bucket's items to the target of the same ordinal; returns the count."""
        pairs = zip(self.buckets, targets, strict=True)
        return sum(_drain(bucket, target) for bucket, target in pairs)

    def drain_snapshot_queue(self, target: MutableSequence[Any]) -> int:
        """Moves the snapshot entries to the end of `target`; returns the count."""
        return _drain(self.snapshot_bucket, target)

    def block(self) -> None:
        """Makes every bucket refuse offers, as a full outbox does, until `unblock()`."""
        self.capacities = [0] * len(self.buckets)

    def unblock(self) -> None:
        """Gives the buckets their capacities back after `block()`."""
        self.capacities = list(self._open_capacities)

    def reset(self) -> None:
        """Empties every bucket, unblocks, and forgets a refused offer: the outbox is as new."""
        owner = self.owner
        OutboxImpl.__init__(self, self._open_capacities, self.snapshot_capacity)
        self.owner = owner
        self._refused = self._refused_entry = _NOTHING

    def __repr__(self) -> str:
        return f"TestOutbox(buckets={[list(b) for b in self.buckets]!r})"


def _drain(source: deque[Any], target: MutableSequence[Any]) -> int:
    count = len(source)
    target.extend(source)
    source.clear()
    return count


@dataclass(kw_only=True)
class TestProcessorContext(Context):
    """A processor Context with test defaults (one processor, vertex "test") and chained setters."""

    __test__ = False

    vertex_name: str = "test"
    total_parallelism: int = 1
    local_parallelism: int = 1

    def set_vertex_name(self, name: str) -> TestProcessorContext:
        """Renames the vertex, and the default logger with it."""
        if self.logger is vertex_logger(self.vertex_name):
            self.logger = vertex_logger(name)
        self.vertex_name = name
        return self

    def set_logger(self, logger: logging.Logger) -> TestProcessorContext:
        """Sets the logger the processor gets."""
        self.logger = logger
        return self

    def set_total_parallelism(self, total_parallelism: int) -> TestProcessorContext:
        """Sets the number of processors of the vertex in the whole job."""
        self.total_parallelism = total_parallelism
        return self

    def set_local_parallelism(self, local_parallelism: int) -> TestProcessorContext:
        """Sets the number of processors of the vertex on one member."""
        self.local_parallelism = local_parallelism
        return self

    def set_global_processor_index(self, index: int) -> TestProcessorContext:
        """Sets the processor's index among all processors of the vertex."""
        self.global_processor_index = index
        return self

    def set_local_processor_index(self, index: int) -> TestProcessorContext:
        """Sets the processor's index among the vertex's processors on its member."""
        self.local_processor_index = index
        return self

    def set_member_index(self, index: int) -> TestProcessorContext:
        """Sets the index of the member the processor runs on."""
        self.member_index = index
        return self

    def set_member_count(self, count: int) -> TestProcessorContext:
        """Sets the number of members in the job."""
        self.member_count = count
        return self

    def set_processing_guarantee(self, guarantee: ProcessingGuarantee) -> TestProcessorContext:
        """Sets the job's processing guarantee."""
        self.processing_guarantee = guarantee
        return self
