"""Tasklets: what the driver calls round-robin; ProcessorTasklet drives one processor (§7.6.5)."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from jetspark.core.context import Context
from jetspark.core.errors import CallbackResultError, JobFailedError
from jetspark.core.processor import Processor
from jetspark.core.runtime.coalescer import WatermarkCoalescer
from jetspark.core.runtime.inbound import InboundStream
from jetspark.core.runtime.outbox import TaskletOutbox
from jetspark.core.runtime.queue import DONE_ITEM
from jetspark.core.watermark import IDLE_MESSAGE
from jetspark.edges.routing import Router

if TYPE_CHECKING:
    from jetspark.core.runtime.wakeup import Wakeup

NO_PROGRESS = 0
"""`call()` result: nothing moved; when no tasklet makes progress the driver backs off."""
MADE_PROGRESS = 1
"""`call()` result: something moved or changed state."""
DONE = 3
"""`call()` result: the tasklet has finished (which is progress too: `DONE & MADE_PROGRESS`)."""

_IDLE_TIMESTAMP = IDLE_MESSAGE.timestamp


def returned_bool(result: object, callback: str) -> bool:
    """`result` of a callback that must return True or False; anything else (the forgotten
    `return True` gives None, which would otherwise retry the callback forever) raises
    CallbackResultError."""
    if result is True or result is False:
        return result
    raise CallbackResultError.of(callback, result)


class Tasklet(Protocol):
    """A unit of cooperative work (§7.6.2); `call()` returns NO_PROGRESS, MADE_PROGRESS or DONE."""

    name: str
    """Names the tasklet in logs and thread names."""
    logger: logging.Logger
    callback: str
    """The callback running or last run, named in slow-callback warnings."""

    def init(self) -> None:
        """Prepares the tasklet, on the driver thread, before any call."""
        ...

    def is_cooperative(self) -> bool:
        """False puts the tasklet on a thread of its own."""
        ...

    def call(self) -> int:
        """Does a small amount of work and reports on it."""
        ...

    def wake_on_input(self, wakeup: Wakeup) -> None:
        """Has `wakeup` notified whenever input for this tasklet arrives in its queues."""
        ...

    def close(self) -> None:
        """Releases resources at the end of the job (after success, failure or cancellation)."""
        ...


class ProcessorTasklet:
    """Drives one processor through Jet's callbacks, one callback per `call()`.

    The state machine: inbound edges are consumed by priority group (a group's edges must all be
    exhausted, with `complete_edge` called for each, before the next group's items are drained);
    within a group the edges take turns: an edge's inbox is offered to `process` until it is
    empty, or until `process` leaves it as it is (backpressure), which gives the group's other
    edges a turn; that inbox is offered again in its turn and not refilled meanwhile. An empty
    inbox gets `try_process()` first (when the processor overrides it). A risen coalesced
    watermark goes to `try_process_watermark` once every inbox is empty and is then forwarded
    through the outbox (IDLE_MESSAGE is forwarded
    without the call). With every edge done, `complete()` runs until True (sources start here),
    then DONE_ITEM goes to every outbound queue. After every call the outbox drains into the
    routers. Jobs with a processing guarantee use the subclass SnapshottingTasklet
    (snapshot_tasklet.py), which adds the restore, save and barrier states around these.
    """

    def __init__(
        self,
        processor: Processor,
        context: Context,
        outbox: TaskletOutbox,
        streams: Sequence[InboundStream],
        routers: Sequence[Router],
        coalescer: WatermarkCoalescer,
        edge_names: Sequence[str],
        retain_watermarks: bool = False,
    ) -> None:
        self.processor = processor
        self.context = context
        self.outbox = outbox
        self.streams = list(streams)
        self.routers = list(routers)
        self.coalescer = coalescer
        self.vertex_name = context.vertex_name
        self.index = context.global_processor_index
        self.name = f"{self.vertex_name}#{self.index}"
        self.logger = context.logger
        self.callback = "init"
        self.cooperative = True
        self.last_received_wm: int | None = None
        self._edge_names = list(edge_names)
        self._retain = retain_watermarks
        priorities = sorted({stream.priority for stream in self.streams})
        self._groups = deque(
            [s for s in self.streams if s.priority == priority] for priority in priorities
        )
        self._group: list[InboundStream] = []
        self._cursor = -1
        self._stream: InboundStream | None = None
        self._completing: InboundStream | None = None
        self._routers_left = list(self.routers)
        self._state: Callable[[], int] = self._process_inbound
        self._after_complete: Callable[[], int] = self._emit_done
        """The state `complete()` returning True leads to."""
        self._process = processor.process
        self._complete = processor.complete
        overrides_try_process = type(processor).try_process is not Processor.try_process
        self._try_process = processor.try_process if overrides_try_process else None

    def init(self) -> None:
        """Calls `processor.init(outbox, context)`."""
        try:
            self.processor.init(self.outbox, self.context)
            self.cooperative = bool(self.processor.is_cooperative())
        except Exception as error:
            raise self._failure(error, "init") from error

    def is_cooperative(self) -> bool:
        """What the processor said after `init`."""
        return self.cooperative

    def wake_on_input(self, wakeup: Wakeup) -> None:
        """Every inbound queue notifies `wakeup` as it is pushed to."""
        for stream in self.streams:
            for queue in stream.queues:
                queue.wakeup = wakeup

    def call(self) -> int:
        """Runs one step of the state machine, then drains the outbox into the routers."""
        try:
            result = self._state()
        except Exception as error:
            raise self._failure(error, self.callback) from error
        try:
            if self.outbox.drain_to(self.routers):
                result |= MADE_PROGRESS
        except Exception as error:
            edge = self._edge_names[self.outbox.routing_ordinal]
            raise self._failure(error, f"routing to edge {edge}") from error
        return result

    def close(self) -> None:
        """Calls `processor.close()`."""
        self.callback = "close"
        self.processor.close()

    def priority_groups_left(self) -> int:
        """Inbound priority groups not yet exhausted (the one being consumed included)."""
        return len(self._groups) + bool(self._group)

    def priority_wait(self) -> tuple[InboundStream, InboundStream] | None:
        """(an awaited stream, a full one) when the processor waits for its current priority
        group, which has nothing queued, while a queue of a later group is full."""
        group = self._group
        if not group or self._state != self._process_inbound:
            return None
        if any(stream.inbox.queue or stream.queued() or stream.done for stream in group):
            return None
        for later in self._groups:
            for stream in later:
                if any(queue.room() <= 0 for queue in stream.queues):
                    return group[0], stream
        return None

    def _failure(self, error: Exception, callback: str) -> JobFailedError:
        """The job's error for `error` raised in `callback`, or in the callback it names (an
        AbstractProcessor's `try_process0` returning None inside `process`)."""
        if isinstance(error, CallbackResultError):
            callback = error.callback
        return JobFailedError.caused_by(
            error, vertex_name=self.vertex_name, processor_index=self.index, callback=callback
        )

    def _process_inbound(self) -> int:
        stream = self._stream
        if stream is not None:
            if stream.inbox.queue:
                result = self._deliver(stream)
                if result == NO_PROGRESS and len(self._group) > 1:
                    self._stream = None  # left as it is: the group's other edges take a turn
                return result
            if stream.done:
                self._stream = None
                self._completing = stream
                self._state = self._complete_edge
                return MADE_PROGRESS
        coalescer = self.coalescer
        left = self.items_left()
        if coalescer.pending is not None and not left:
            self._state = self._process_watermark
            return MADE_PROGRESS
        if not self._group:
            if self._groups:
                self._group = self._groups.popleft()
            else:
                self._state = self._complete_all
            return MADE_PROGRESS
        if self._try_process is not None and not left:
            self.callback = "try_process"
            done = self._try_process()
            if done is not True and not returned_bool(done, "try_process"):
                return NO_PROGRESS
        if self._retain and not left:
            coalescer.check_retention()
            if coalescer.pending is not None:
                return MADE_PROGRESS
        stream = self._fill(left)
        if stream is None:
            return NO_PROGRESS
        self._stream = stream
        if stream.inbox.queue:
            return self._deliver(stream)
        return MADE_PROGRESS

    def items_left(self) -> bool:
        """True while the processor left items in the inbox of an inbound edge."""
        return any(stream.inbox.queue for stream in self._group)

    def _fill(self, left: bool) -> InboundStream | None:
        """Takes the group's streams in turn until one has items left in its inbox, or yields
        items, ends or raises a watermark as it is drained (a stream with items left is not
        drained: backpressure on that edge, while the others go on). A watermark waits until
        the processor took every item left in its inboxes (`left`: some are)."""
        group = self._group
        coalescer = self.coalescer
        cursor = self._cursor
        for _ in range(len(group)):
            cursor = (cursor + 1) % len(group)
            stream = group[cursor]
            if (
                stream.inbox.queue
                or stream.drain()
                or stream.done
                or (not left and coalescer.pending is not None)
            ):
                self._cursor = cursor
                return stream
        self._cursor = cursor
        return None

    def _deliver(self, stream: InboundStream) -> int:
        queue = stream.inbox.queue
        before = len(queue)
        self.callback = "process"
        self._process(stream.ordinal, stream.inbox)
        return MADE_PROGRESS if len(queue) != before else NO_PROGRESS

    def _complete_edge(self) -> int:
        stream = self._completing
        assert stream is not None
        self.callback = "complete_edge"
        if not returned_bool(self.processor.complete_edge(stream.ordinal), "complete_edge"):
            return NO_PROGRESS
        self._group.remove(stream)
        self._state = self._process_inbound
        return MADE_PROGRESS

    def _process_watermark(self) -> int:
        watermark = self.coalescer.pending
        assert watermark is not None
        if watermark.timestamp != _IDLE_TIMESTAMP:
            self.last_received_wm = watermark.timestamp
            self.callback = "try_process_watermark"
            done = self.processor.try_process_watermark(watermark)
            if not returned_bool(done, "try_process_watermark"):
                return NO_PROGRESS
        self._state = self._forward_watermark
        return self._forward_watermark()

    def _forward_watermark(self) -> int:
        self.callback = "forwarding a watermark"
        if not self.outbox.offer(self.coalescer.pending):
            return NO_PROGRESS
        self.coalescer.pending = None
        self._state = self._process_inbound
        return MADE_PROGRESS

    def _complete_all(self) -> int:
        if self.outbox.is_backed_up():
            # Jet's outbox would refuse every offer now; this one holds what the processor
            # emitted before, so a source would believe it had emitted all it read and wait
            # for more input on every call until the queues downstream take that output
            return NO_PROGRESS
        self.callback = "complete"
        done = self._complete()
        if done is not True and not returned_bool(done, "complete"):
            return NO_PROGRESS
        self._state = self._after_complete
        return MADE_PROGRESS

    def _emit_done(self) -> int:
        if not self._push_control(DONE_ITEM):
            return NO_PROGRESS
        self._state = self._finished
        return DONE

    def _push_control(self, entry: Any) -> bool:
        """Puts `entry` on every outbound queue once the outbox is empty; False: call again."""
        if not self.outbox.is_empty():
            return False
        routers = self._routers_left
        while routers:
            if not routers[-1].push_control(entry):
                return False
            routers.pop()
        self._routers_left = list(self.routers)
        return True

    def _finished(self) -> int:
        return DONE

    def __repr__(self) -> str:
        return f"ProcessorTasklet({self.name})"
