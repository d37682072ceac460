"""The ProcessorTasklet of a job with a processing guarantee (manual §7.8, §8.3.4).

On top of ProcessorTasklet's states it has:

- restore (when the run starts from a snapshot): the entries routed to the processor go to
  `restore_from_snapshot(inbox)` in batches, then `finish_snapshot_restore()` runs until True,
  before any other callback. A processor restored as completed (see restore.py) then ends
  without `complete()`. An exception in `restore_from_snapshot` fails the job naming the key
  of the entry the processor last took from the inbox (the one its code could not restore).
- save: `save_to_snapshot()` until True, the entries moved out of the outbox's snapshot
  bucket after each call and serialized at the end, then reported to the coordinator. It
  starts when the aligner has the barrier from every input queue (and every inbox is empty,
  and no watermark waits), or, with no input left (sources), when the coordinator's
  `requested_id` rises. While items left in an inbox (backpressure) hold the save back, and
  throughout a micro-batch, the inboxes' `must_drain` is set.
- barrier: once the outbox is empty, `SnapshotBarrier(id)` goes to every outbound queue; the
  aligner is released and the held-back queues are drained again, once the coordinator no
  longer holds the processor (`holds`: a continuous member's sinks, until it sent their writes).
- final save: after `complete()` returns True, `save_to_snapshot()` is called once more; that
  final state stands for the processor in every later snapshot, then DONE_ITEM goes out.

A processor never has two uncommitted saves: a save (and the final save) waits until the
previous one is committed. The commit reaches the processor as `snapshot_committed()`, called
by this tasklet at the start of its next `call()`, by the coordinator once the tasklet has
reported its final state, or by the runtime as it stops (`owed_commit`): a run cancelled just
after a commit still publishes what the snapshot committed.
"""

from __future__ import annotations

import reprlib
import time
from collections.abc import Callable, MutableSequence, Sequence
from typing import Any

from jetspark.core.context import Context
from jetspark.core.errors import JobFailedError
from jetspark.core.gc_pause import paused_gc
from jetspark.core.inbox import ArrayDequeInbox
from jetspark.core.processor import Processor
from jetspark.core.runtime.barrier import BarrierAligner, SnapshotBarrier
from jetspark.core.runtime.budget import BudgetedOutbox
from jetspark.core.runtime.coalescer import WatermarkCoalescer
from jetspark.core.runtime.inbound import InboundStream
from jetspark.core.runtime.outbox import TaskletOutbox
from jetspark.core.runtime.restore import RestoredProcessor
from jetspark.core.runtime.snapshot import SnapshotCoordinator
from jetspark.core.runtime.tasklet import (
    DONE,
    MADE_PROGRESS,
    NO_PROGRESS,
    ProcessorTasklet,
    returned_bool,
)
from jetspark.core.serialization import encode_batch
from jetspark.edges.routing import Router

RESTORE_BATCH = 1024
"""Snapshot entries per `restore_from_snapshot` inbox."""
REPLAY_PATIENCE_SECONDS = 300.0
"""How long a task run again waits for its source to emit an item the first run emitted."""
_KEY_REPR = reprlib.Repr()
_KEY_REPR.maxstring = _KEY_REPR.maxother = 60


class _RestoreInbox(ArrayDequeInbox):
    """The inbox of `restore_from_snapshot`: remembers the entry it last handed to the
    processor (None after `drain_to`, which hands over all at once)."""

    __slots__ = ("handed_out",)

    def __init__(self) -> None:
        super().__init__()
        self.handed_out: Any = None

    def peek(self) -> Any:
        """The head entry, remembered."""
        self.handed_out = super().peek()
        return self.handed_out

    def poll(self) -> Any:
        """Removes the head entry and remembers it."""
        self.handed_out = super().poll()
        return self.handed_out

    def remove(self) -> Any:
        """Removes the head entry and remembers it."""
        self.handed_out = super().remove()
        return self.handed_out

    def drain(self, fn: Callable[[Any], Any]) -> int:
        """Passes every entry to `fn`, remembering each as it goes."""

        def handing_out(entry: Any) -> Any:
            self.handed_out = entry
            return fn(entry)

        return super().drain(handing_out)

    def drain_to(self, target: MutableSequence[Any]) -> int:
        """Moves every entry to `target`; no single entry is remembered."""
        self.handed_out = None
        return super().drain_to(target)


class SnapshottingTasklet(ProcessorTasklet):
    """Drives a processor through Jet's callbacks, snapshotting included (module docstring)."""

    def __init__(
        self,
        processor: Processor,
        context: Context,
        outbox: TaskletOutbox,
        streams: Sequence[InboundStream],
        routers: Sequence[Router],
        coalescer: WatermarkCoalescer,
        edge_names: Sequence[str],
        *,
        coordinator: SnapshotCoordinator,
        aligner: BarrierAligner,
        restored: RestoredProcessor | None,
        retain_watermarks: bool = False,
    ) -> None:
        super().__init__(
            processor,
            context,
            outbox,
            streams,
            routers,
            coalescer,
            edge_names,
            retain_watermarks=retain_watermarks,
        )
        self.key = (self.vertex_name, self.index)
        self._coordinator = coordinator
        self._aligner = aligner
        self._saved_id = coordinator.requested_id
        """The last snapshot this processor saved (or the one before the run's first)."""
        self._commits_seen = coordinator.committed_id
        self._uncommitted = False
        """True from a save until `snapshot_committed()` was called for it."""
        self._handed_over = False
        """True once the final state went to the coordinator, which then owns the commits."""
        self._saving_id = 0
        self._entries: list[Any] = []
        self._resume: Callable[[], int] = self._process_inbound
        self._after_complete = self._save_final
        self._restored = restored
        self._restore_position = 0
        self._restore_inbox = _RestoreInbox()
        self._batch_input_ended = False
        """Micro-batch runs: `complete()` returned False with nothing emitted and an empty
        outbox (idle, or out of its item budget), so this run's snapshot may be saved."""
        self._replay_deadline: float | None = None
        self._replay_spent = 0
        self._drains_required = False
        if restored is not None:
            self._state = self._restore

    def delays_snapshots(self) -> bool:
        """True while restoring, or while an inbound edge of a lower priority number than the
        last is not exhausted (manual §8.1.6)."""
        return self._restored is not None or (
            not self._handed_over and self.priority_groups_left() > 1
        )

    def call(self) -> int:
        """Delivers a commit the coordinator made since the last call, then one step, unless
        the coordinator holds back processors that saved the snapshot under way and this one
        did and forwarded its barrier."""
        if self._commit_owed():
            self._tell_committed()
        if self._coordinator.holding_back and (
            (self._uncommitted and self._state != self._emit_barrier)
            or self._coordinator.holds_sink(self.key)
        ):
            return NO_PROGRESS
        return super().call()

    def owed_commit(self) -> Callable[[], None] | None:
        """At the end of a run (cancelled or failed): the processor's `snapshot_committed`
        when the coordinator committed its last save and it was not told yet, else None."""
        if not self._commit_owed():
            return None
        self._uncommitted = False
        return self.processor.snapshot_committed

    def _commit_owed(self) -> bool:
        if self._coordinator.committed_id == self._commits_seen or self._handed_over:
            return False
        self._commits_seen = self._coordinator.committed_id
        return self._uncommitted

    def final_state_committed(self) -> None:
        """Called by the coordinator: the final state is committed (or the job completed)."""
        self._tell_committed()

    def _tell_committed(self) -> None:
        self._uncommitted = False
        self.callback = "snapshot_committed"
        try:
            self.processor.snapshot_committed()
        except Exception as error:
            raise self._failure(error, self.callback) from error

    # ------------------------------------------------------------------ restore

    def _restore(self) -> int:
        restored = self._restored
        assert restored is not None
        queue = self._restore_inbox.queue
        if not queue:
            start = self._restore_position
            if start >= len(restored.entries):
                self._state = self._finish_restore
                return MADE_PROGRESS
            self._restore_position = start + RESTORE_BATCH
            queue.extend(restored.entries[start : self._restore_position])
        before = len(queue)
        self.callback = "restore_from_snapshot"
        self._restore_inbox.handed_out = None
        with paused_gc:
            self.processor.restore_from_snapshot(self._restore_inbox)
        return MADE_PROGRESS if len(queue) < before else NO_PROGRESS

    def _failure(self, error: Exception, callback: str) -> JobFailedError:
        """As ProcessorTasklet's; a failure in `restore_from_snapshot` also names the key of the
        entry being restored."""
        entry = self._restore_inbox.handed_out
        if callback == "restore_from_snapshot" and isinstance(entry, tuple) and len(entry) == 2:
            callback = f"{callback}, restoring the entry of key {_KEY_REPR.repr(entry[0])}"
        return super()._failure(error, callback)

    def _finish_restore(self) -> int:
        restored = self._restored
        assert restored is not None
        self.callback = "finish_snapshot_restore"
        if not returned_bool(self.processor.finish_snapshot_restore(), self.callback):
            return NO_PROGRESS
        self._restored = None
        self._state = self._save_final if restored.completed else self._process_inbound
        return MADE_PROGRESS

    # -------------------------------------------------------- when to save

    def _process_inbound(self) -> int:
        aligner = self._aligner
        if aligner.ready and self.coalescer.pending is None and not self.items_left():
            assert aligner.snapshot_id is not None
            self._require_drains(False)
            return self._begin_save(aligner.snapshot_id, self._process_inbound)
        self._require_drains(aligner.ready or self._coordinator.batch_snapshot_id is not None)
        result = super()._process_inbound()
        return (result | MADE_PROGRESS) if aligner.ready else result

    def _require_drains(self, required: bool) -> None:
        """Sets every inbox's `must_drain`: items left in an inbox hold a snapshot back (the
        barrier came in on every input), or a micro-batch's end (its input must all be taken
        before its barrier comes)."""
        if required != self._drains_required:
            self._drains_required = required
            for stream in self.streams:
                stream.inbox.must_drain = required

    def _complete_all(self) -> int:
        coordinator = self._coordinator
        requested = coordinator.requested_id
        batch = coordinator.batch_snapshot_id is not None
        if requested > self._saved_id and (not batch or self._batch_input_ended):
            return self._begin_save(requested, self._complete_all)
        result = super()._complete_all()
        if (
            batch
            and self._state == self._complete_all
            and self.outbox.is_empty()
            and self.vertex_name not in coordinator.sources_read_to_the_end
        ):
            if isinstance(self.outbox, BudgetedOutbox) and self.outbox.owes_items:
                self._await_replay(self.outbox)
            else:
                self._batch_input_ended = True
                result |= MADE_PROGRESS
        return result

    def _await_replay(self, outbox: BudgetedOutbox) -> None:
        """A task run again waits for its source to emit what the first run emitted; a source
        that emits nothing for REPLAY_PATIENCE_SECONDS fails the task."""
        now = time.monotonic()
        if self._replay_deadline is None or outbox.spent != self._replay_spent:
            self._replay_spent = outbox.spent
            self._replay_deadline = now + REPLAY_PATIENCE_SECONDS
        elif now > self._replay_deadline:
            raise RuntimeError(
                f"this batch's task ran before and its source emitted {outbox.granted} items "
                f"then; running again it emitted {outbox.spent} and no more for "
                f"{REPLAY_PATIENCE_SECONDS:g} s: the source does not replay its input (was "
                "it deleted or truncated?), so the batch cannot be redone exactly"
            )

    def _begin_save(self, snapshot_id: int, resume: Callable[[], int]) -> int:
        self._saving_id = snapshot_id
        self._resume = resume
        self._state = self._save
        return MADE_PROGRESS

    # ------------------------------------------------------------------- save

    def _save(self) -> int:
        step = self._call_save()
        if step != DONE:
            return step
        self._coordinator.saved(self.key, self._saving_id, self._serialized())
        self._saved_id = self._saving_id
        self._uncommitted = True
        self._state = self._emit_barrier
        return MADE_PROGRESS

    def _emit_barrier(self) -> int:
        self.callback = "forwarding a snapshot barrier"
        if not self._push_control(SnapshotBarrier(self._saved_id)):
            return NO_PROGRESS
        if self._saved_id == self._coordinator.batch_snapshot_id:
            self._state = self._finished  # the micro-batch ends here for this processor
            return DONE
        self._aligner.release()
        for stream in self.streams:
            stream.unblock()
        self._state = self._held
        return self._held() | MADE_PROGRESS

    def _held(self) -> int:
        """Goes on after a save once the coordinator no longer holds the processor; one step
        of the resumed state in this same call, so that snapshots started back to back still
        leave the processor a callback in between."""
        if self._coordinator.holds(self.key, self._saved_id):
            return NO_PROGRESS
        self._state = self._resume
        return self._resume() | MADE_PROGRESS

    def _save_final(self) -> int:
        step = self._call_save()
        if step != DONE:
            return step
        self._handed_over = True
        self._coordinator.completed(self.key, self._serialized())
        self._state = self._emit_done
        return MADE_PROGRESS

    def _call_save(self) -> int:
        """One `save_to_snapshot()` call, once the previous save is committed; its entries move
        from the outbox's snapshot bucket to the save under way. DONE when it returned True.
        """
        if self._uncommitted:
            return NO_PROGRESS
        self.callback = "save_to_snapshot"
        with paused_gc:
            saved = self.processor.save_to_snapshot()
        done = returned_bool(saved, self.callback)
        bucket = self.outbox.snapshot_bucket
        moved = bool(bucket)
        if moved:
            self._entries.extend(bucket)
            bucket.clear()
        if done:
            return DONE
        return MADE_PROGRESS if moved else NO_PROGRESS

    def _serialized(self) -> bytes:
        """The saved entries as bytes: a copy no later change of the processor's state affects."""
        entries, self._entries = self._entries, []
        return encode_batch(entries)

    def __repr__(self) -> str:
        return f"SnapshottingTasklet({self.name})"
