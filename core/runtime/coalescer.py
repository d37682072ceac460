"""Watermark coalescing: the one watermark a processor observes over all its input queues (§7.9)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from jetspark.core.watermark import IDLE_MESSAGE, Watermark

CarriedWatermarks = tuple[tuple[float, ...], tuple[bool, ...], float, bool]
"""A coalescer's state at the end of a micro-batch: per queue its last watermark and whether it
is idle, the last coalesced watermark, and whether IDLE_MESSAGE was the last one emitted."""

NO_WATERMARK = float("-inf")
"""The watermark of a queue that has not sent one yet; lower than every real timestamp."""

_IDLE_TIMESTAMP = IDLE_MESSAGE.timestamp


class WatermarkCoalescer:
    """Keeps the last watermark of every input queue and emits their minimum when it rises.

    One instance serves all inbound edges of a processor: the minimum over every queue of every
    edge equals Jet's two levels (queues of an edge, then edges). A queue that sent IDLE_MESSAGE
    is left out until it sends anything else; a finished queue is left out for good; when every
    remaining queue is idle the coalescer emits IDLE_MESSAGE once. With `max_retain_millis` >= 0,
    a watermark observed on some queue that long ago is emitted even if another queue lags
    (manual §8.5.3). A new watermark waits in `pending` until the processor has taken it.
    """

    def __init__(
        self,
        queue_count: int,
        max_retain_millis: float = -1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle = [False] * queue_count
        """Per queue: excluded because its last message was IDLE_MESSAGE (read by the drain)."""
        self.pending: Watermark | None = None
        """The watermark to deliver next, or None."""
        self.last_emitted = NO_WATERMARK
        """The highest watermark timestamp emitted so far (IDLE_MESSAGE does not count)."""
        self._watermarks = [NO_WATERMARK] * queue_count
        self._done = [False] * queue_count
        self._idle_emitted = False
        self._retain = max_retain_millis / 1000 if max_retain_millis >= 0 else None
        self._clock = clock
        self._top_observed = NO_WATERMARK
        self._history: deque[tuple[float, int]] = deque()
        self._forced = NO_WATERMARK

    def carried(self) -> CarriedWatermarks:
        """What the same processor's coalescer takes on in the next micro-batch."""
        return (tuple(self._watermarks), tuple(self.idle), self.last_emitted, self._idle_emitted)

    def carry_on(self, carried: CarriedWatermarks) -> None:
        """Starts from the state `carried()` gave at the end of the previous micro-batch (of the
        same layout), as if the batches were one run: a queue whose upstream sends no new
        watermark in this batch does not hold the coalesced watermark back at nothing."""
        watermarks, idle, last_emitted, idle_emitted = carried
        if len(watermarks) != len(self._watermarks):
            return  # another layout: the queues are not the same ones
        self._watermarks = list(watermarks)
        self.idle[:] = idle
        self.last_emitted = last_emitted
        self._idle_emitted = idle_emitted
        self._top_observed = max(watermarks, default=NO_WATERMARK)

    def observe_watermark(self, queue: int, watermark: Watermark) -> None:
        """Records a watermark (or IDLE_MESSAGE) that arrived on `queue`."""
        timestamp = watermark.timestamp
        if timestamp == _IDLE_TIMESTAMP:
            self.idle[queue] = True
        else:
            self.idle[queue] = False
            self._watermarks[queue] = timestamp
            if timestamp > self._top_observed:
                self._top_observed = timestamp
                if self._retain is not None:
                    self._history.append((self._clock(), timestamp))
        self._update()

    def observe_data(self, queue: int) -> None:
        """Records items arriving on `queue`, which ends its idleness."""
        self.idle[queue] = False

    def queue_done(self, queue: int) -> None:
        """Records that `queue` will send nothing more; it stops holding the watermark back."""
        self._done[queue] = True
        self.idle[queue] = False
        self._update()

    def check_retention(self) -> None:
        """Emits a retained watermark whose time is up; call it while waiting for input."""
        if self._retain is not None and self._top_observed > self.last_emitted:
            self._update()

    def _update(self) -> None:
        low = None
        some_idle = False
        for timestamp, idle, done in zip(self._watermarks, self.idle, self._done, strict=True):
            if done:
                continue
            if idle:
                some_idle = True
            elif low is None or timestamp < low:
                low = timestamp
        if low is None:
            if some_idle and not self._idle_emitted:
                self._idle_emitted = True
                self.pending = IDLE_MESSAGE
            return
        if self._retain is not None:
            low = max(low, self._retained_floor())
        if low > self.last_emitted:
            self.last_emitted = low
            self._idle_emitted = False
            self.pending = Watermark(int(low))

    def _retained_floor(self) -> float:
        """The top watermark observed at least `max_retain_millis` ago."""
        history = self._history
        deadline = self._clock() - self._retain  # type: ignore[operator]
        while history and history[0][0] <= deadline:
            self._forced = history.popleft()[1]
        return self._forced
