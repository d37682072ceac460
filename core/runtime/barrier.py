"""Snapshot barriers and their alignment over a processor's input queues (manual §7.8).

A barrier is one more control entry in the queues, next to watermarks and DONE_ITEM: a processor
that saved its state for snapshot N puts `SnapshotBarrier(N)` on every outbound queue, after all
the items it emitted before saving. A downstream processor saves its own state for N once N has
come in on every one of its input queues; a queue that delivered DONE_ITEM counts as having
delivered it (its upstream completed and sends nothing more).
"""

from __future__ import annotations


class SnapshotBarrier:
    """The control entry that separates the items before snapshot `snapshot_id` from those after."""

    __slots__ = ("snapshot_id",)

    def __init__(self, snapshot_id: int) -> None:
        self.snapshot_id = snapshot_id

    def __eq__(self, other: object) -> bool:
        return type(other) is SnapshotBarrier and other.snapshot_id == self.snapshot_id

    def __hash__(self) -> int:
        return hash((SnapshotBarrier, self.snapshot_id))

    def __reduce__(self) -> tuple[type[SnapshotBarrier], tuple[int]]:
        return (SnapshotBarrier, (self.snapshot_id,))

    def __repr__(self) -> str:
        return f"SnapshotBarrier({self.snapshot_id})"


class BarrierAligner:
    """Tracks which input queues of one processor delivered the barrier of the current snapshot.

    Queues are numbered as in the processor's WatermarkCoalescer (every queue of every inbound
    edge). `observe` returns True when the queue must not be drained further until `release`:
    that is exactly-once alignment (manual §7.8.1); at-least-once keeps draining (§7.8.2).
    `ready` turns True when every queue delivered the barrier or is done; the processor then
    saves its state, forwards the barrier and calls `release`.
    """

    __slots__ = ("_arrived", "_done", "_missing", "_unaligned", "exactly_once", "snapshot_id")

    def __init__(
        self, queue_count: int, exactly_once: bool, unaligned: frozenset[int] = frozenset()
    ) -> None:
        self.exactly_once = exactly_once
        self._unaligned = unaligned
        """Queues never held back (`Processor.snapshot_unaligned_ordinals`)."""
        self.snapshot_id: int | None = None
        """The snapshot whose barrier is being aligned, None between snapshots."""
        self._arrived = [False] * queue_count
        self._done = [False] * queue_count
        self._missing = queue_count

    @property
    def ready(self) -> bool:
        """True once the current barrier came in on every queue that is not done."""
        return self.snapshot_id is not None and self._missing == 0

    def observe(self, queue: int, barrier: SnapshotBarrier) -> bool:
        """Records `barrier` arriving on `queue`; True when that queue must now be held back."""
        if self.snapshot_id is None:
            self.snapshot_id = barrier.snapshot_id
        elif barrier.snapshot_id != self.snapshot_id:
            raise RuntimeError(
                f"input queue {queue} delivered {barrier} while snapshot {self.snapshot_id} is "
                "being aligned: snapshots must not overlap"
            )
        if self._arrived[queue]:
            raise RuntimeError(f"input queue {queue} delivered {barrier} twice")
        self._arrived[queue] = True
        self._missing -= 1
        return self.exactly_once and queue not in self._unaligned

    def queue_done(self, queue: int) -> None:
        """Records that `queue` delivered DONE_ITEM: it no longer holds any barrier back."""
        self._done[queue] = True
        if not self._arrived[queue]:
            self._missing -= 1

    def release(self) -> None:
        """Ends the current alignment (the processor saved and forwarded the barrier)."""
        self.snapshot_id = None
        self._arrived = [False] * len(self._arrived)
        self._missing = self._done.count(False)
