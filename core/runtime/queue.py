"""The bounded queue between one upstream and one downstream processor of an edge (manual §7.7)."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from jetspark.core.runtime.sizes import updated_estimate

if TYPE_CHECKING:
    from jetspark.core.runtime.wakeup import Wakeup


class _DoneItem:
    """The type of DONE_ITEM; pickles back to the one instance, so identity tests keep working."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "DONE_ITEM"

    def __repr__(self) -> str:
        return "DONE_ITEM"


DONE_ITEM = _DoneItem()
"""The last entry an upstream processor puts in each of its queues: it will send nothing more."""

DEFAULT_QUEUE_BYTES = 4 << 20
"""The estimated bytes a queue between two processors of one member holds at most (and as much
the upstream outbox's bucket), besides its size in items: `LocalEngine(queue_max_bytes=...)`,
`spark.jetspark.queue.maxSize` on SparkEngine."""


class Queue:
    """A FIFO of entries: a list is a chunk of items, anything else one control entry.

    Control entries (watermarks, DONE_ITEM) travel in order with the items, but the consumer
    tests the type once per chunk, never per item. The capacity counts items plus control
    entries, and `max_bytes` bounds the bytes the entries waiting take, estimated as their count
    times `item_bytes` (a decaying maximum over the newest item of each chunk pushed, sizes.py);
    the producer pushes only what `room()` allows, which is the backpressure. An empty queue
    takes a whole chunk whatever its bytes, so no item is too large to pass.

    One producer and one consumer may sit on different threads: each counter has one writer,
    deque appends and pops are atomic, and the producer counts before appending while the consumer
    counts after removing, so `size()` can only overestimate for a moment. Every push notifies
    the consumer's driver (`wakeup`, set when the runtime starts), so a waiting one runs at once.
    """

    __slots__ = ("capacity", "chunks", "item_bytes", "max_bytes", "popped", "pushed", "wakeup")

    def __init__(self, capacity: int, max_bytes: int = DEFAULT_QUEUE_BYTES) -> None:
        if capacity < 1:
            raise ValueError(f"queue capacity must be >= 1, got {capacity}")
        if max_bytes < 1:
            raise ValueError(f"queue max_bytes must be >= 1, got {max_bytes}")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.item_bytes = 1
        """Estimated bytes per item waiting (1 until a chunk was pushed); producer-written."""
        self.chunks: deque[Any] = deque()
        self.pushed = 0
        """Items and control entries ever pushed; written by the producer only."""
        self.popped = 0
        """Items and control entries ever removed; written by the consumer only."""
        self.wakeup: Wakeup | None = None
        """The consumer's driver's wake-up (None until the runtime starts)."""

    def room(self) -> int:
        """How many more items (or control entries) the queue accepts now: a whole chunk when
        it is empty, else what its capacity and `max_bytes` leave."""
        waiting = self.pushed - self.popped
        if not waiting:
            return self.capacity
        return max(0, min(self.capacity, self.max_bytes // self.item_bytes) - waiting)

    def size(self) -> int:
        """Items and control entries waiting."""
        return self.pushed - self.popped

    def push(self, chunk: list[Any]) -> None:
        """Appends a chunk of items; the caller keeps `len(chunk) <= room()`, never mutates it."""
        if chunk:
            self.item_bytes = updated_estimate(self.item_bytes, chunk[-1])
        self.pushed += len(chunk)
        self.chunks.append(chunk)
        if self.wakeup is not None:
            self.wakeup.notify()

    def push_control(self, entry: Any) -> None:
        """Appends one control entry (a watermark, DONE_ITEM); it takes one unit of room."""
        self.pushed += 1
        self.chunks.append(entry)
        if self.wakeup is not None:
            self.wakeup.notify()

    def __repr__(self) -> str:
        return (
            f"Queue(size={self.size()}, capacity={self.capacity}, "
            f"bytes~{self.size() * self.item_bytes}/{self.max_bytes})"
        )
