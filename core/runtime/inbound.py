"""One inbound edge of one processor: its upstream queues, drained into the edge's inbox."""

from __future__ import annotations

from jetspark.core.inbox import ArrayDequeInbox
from jetspark.core.runtime.barrier import BarrierAligner, SnapshotBarrier
from jetspark.core.runtime.coalescer import WatermarkCoalescer
from jetspark.core.runtime.queue import DONE_ITEM, Queue


class InboundStream:
    """The queues feeding inbound ordinal `ordinal` of a processor, one per upstream processor.

    `drain()` moves whole chunks from the queues, round-robin, into `inbox`; control entries go
    to the processor's coalescer (`first_queue` is this stream's first index there), snapshot
    barriers to its aligner (numbered alike). A queue is drained up to its next control entry
    only, and the drain stops as soon as the coalesced watermark rises, so the processor sees the
    items before a watermark before the watermark itself. A queue the aligner holds back after a
    barrier (exactly-once) is not drained again until `unblock()`.
    """

    __slots__ = (
        "_active",
        "_aligner",
        "_blocked",
        "_coalescer",
        "_first",
        "inbox",
        "ordinal",
        "priority",
        "queues",
        "received_batches",
        "received_count",
    )

    def __init__(
        self,
        ordinal: int,
        priority: int,
        queues: list[Queue],
        coalescer: WatermarkCoalescer,
        first_queue: int,
        aligner: BarrierAligner | None = None,
    ) -> None:
        self.ordinal = ordinal
        self.priority = priority
        self.queues = queues
        self.inbox = ArrayDequeInbox()
        self.received_count = 0
        self.received_batches = 0
        self._coalescer = coalescer
        self._first = first_queue
        self._aligner = aligner
        self._active = list(range(len(queues)))
        self._blocked: list[int] = []

    @property
    def done(self) -> bool:
        """True once every upstream queue delivered its DONE_ITEM."""
        return not self._active and not self._blocked

    def drain(self) -> int:
        """Moves what the queues hold into the inbox; returns the number of items moved."""
        extend = self.inbox.queue.extend
        coalescer = self._coalescer
        idle = coalescer.idle
        first = self._first
        moved = 0
        removed: list[int] = []
        for i in self._active:
            queue = self.queues[i]
            chunks = queue.chunks
            while chunks:
                chunk = chunks.popleft()
                if type(chunk) is list:
                    count = len(chunk)
                    extend(chunk)
                    queue.popped += count
                    moved += count
                    if idle[first + i]:
                        coalescer.observe_data(first + i)
                    continue
                queue.popped += 1
                if chunk is DONE_ITEM:
                    removed.append(i)
                    coalescer.queue_done(first + i)
                    if self._aligner is not None:
                        self._aligner.queue_done(first + i)
                elif type(chunk) is SnapshotBarrier:
                    if self._holds_back(first + i, chunk):
                        removed.append(i)
                        self._blocked.append(i)
                else:
                    coalescer.observe_watermark(first + i, chunk)
                break
            if coalescer.pending is not None:
                break
        if removed:
            self._active = [i for i in self._active if i not in removed]
        if moved:
            self.received_count += moved
            self.received_batches += 1
        return moved

    def _holds_back(self, queue: int, barrier: SnapshotBarrier) -> bool:
        """Hands `barrier` to the aligner; True when its queue must wait for the other queues."""
        if self._aligner is None:
            raise RuntimeError(f"{barrier} reached a processor of a job that takes no snapshots")
        return self._aligner.observe(queue, barrier)

    def unblock(self) -> None:
        """Resumes draining the queues held back since their barrier (the snapshot is saved)."""
        if self._blocked:
            self._active = sorted(self._active + self._blocked)
            self._blocked = []

    def queued(self) -> int:
        """Items and control entries waiting in the queues (a metric)."""
        return sum(queue.size() for queue in self.queues)

    def capacity(self) -> int:
        """The total capacity of the queues (a metric)."""
        return sum(queue.capacity for queue in self.queues)
