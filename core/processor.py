"""The Processor API: the callbacks the runtime invokes on each processor (manual §8.3)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jetspark.core.errors import UnsupportedOperationError

if TYPE_CHECKING:
    from collections.abc import Collection

    from jetspark.core.context import Context
    from jetspark.core.inbox import Inbox
    from jetspark.core.outbox import Outbox
    from jetspark.core.watermark import Watermark


class Processor:
    """The unit of computation of a vertex; override the callbacks you need.

    Boolean results mean what they mean in Jet: True is "done", False is "call me again" (the
    outbox was full or there is more work). The runtime uses an instance from one thread at a time.
    """

    def init(self, outbox: Outbox, context: Context) -> None:
        """Called once before any other callback, with the outbox to emit to."""

    def is_cooperative(self) -> bool:
        """Cooperative processors share a thread and must return within about a millisecond."""
        return True

    def process(self, ordinal: int, inbox: Inbox) -> None:
        """Consumes items of inbound edge `ordinal`; remove an item only when fully processed.

        Items left in `inbox` hold that edge back (backpressure): the call is repeated with the
        same inbox, in turn with the other inbound edges of the same priority, which go on
        meanwhile (Jet repeats it before anything else; here another edge's items may come)."""
        raise UnsupportedOperationError(
            f"{type(self).__name__} received items on inbound ordinal {ordinal} but does not "
            "override process()"
        )

    def try_process_watermark(self, watermark: Watermark) -> bool:
        """Handles a new coalesced watermark; on True the runtime forwards it downstream."""
        return True

    def try_process(self) -> bool:
        """Called when the inbox is empty, for work not driven by input (e.g. timers)."""
        return True

    def snapshot_unaligned_ordinals(self) -> Collection[int]:
        """Inbound ordinals whose snapshot barrier does not hold their items back (exactly-once
        alignment): items after it may reach the processor before its state is saved, so a
        restore gives them again (at-least-once for those edges). For inputs that are
        idempotent and must keep flowing while another edge waits, like model references."""
        return ()

    def complete_edge(self, ordinal: int) -> bool:
        """Called once when inbound edge `ordinal` is exhausted."""
        return True

    def complete(self) -> bool:
        """Called when all inbound edges are exhausted (repeatedly for sources) until True."""
        return True

    def save_to_snapshot(self) -> bool:
        """Offers the processor's state to the snapshot bucket of the outbox; True when done."""
        return True

    def restore_from_snapshot(self, inbox: Inbox) -> None:
        """Consumes `(key, value)` state entries of a snapshot being restored."""
        raise UnsupportedOperationError(
            f"{type(self).__name__} was given snapshot data to restore but does not override "
            "restore_from_snapshot()"
        )

    def finish_snapshot_restore(self) -> bool:
        """Called after all snapshot entries were restored, to rebuild transient state."""
        return True

    def snapshot_committed(self) -> None:
        """Called when the state this processor saved last is part of a committed snapshot.

        jetspark's counterpart of Jet 4's `snapshotCommitFinish(true)`, for transactional
        sinks: commit the output prepared up to that save (the job will never be restored from
        an older snapshot). With a processing guarantee, `save_to_snapshot()` is also called
        once after `complete()` returned True; that final save is committed with the next
        snapshot, or when the job completes. A processor never has two uncommitted saves.
        """

    def close(self) -> None:
        """Called once at the end of the job, whether it succeeded, failed or was cancelled."""
