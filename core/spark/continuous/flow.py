"""Flow control of a link between two members, in entries and in bytes (after Jet's
`SenderTasklet` and `ReceiverTasklet`, whose sequence numbers count estimated bytes).

The sender of a link may be ahead of what the receiver moved into the downstream queue by at most
its window of entries and by an estimate of `ByteLimits.window` bytes; the receiver moves entries
into that queue while it holds fewer than an estimated `ByteLimits.queue` bytes. The estimate
costs nothing: it is the encoded length of the frames, which the sender knows once it framed what
was pushed and the receiver knows when a frame arrives; an item's share is its frame's length over
its count. Until a link's first data frame is measured its items count as UNMEASURED_ITEM_BYTES
each. An item larger than a whole window or queue still goes, alone, so nothing is too big to
pass.
"""

from __future__ import annotations

import dataclasses
from collections import deque

from jetspark.core.runtime.queue import Queue


@dataclasses.dataclass(frozen=True)
class ByteLimits:
    """The byte bounds of every link between members (settings.py names their settings)."""

    window: int = 4 << 20
    """Encoded bytes a link's sender may have sent and not had acknowledged."""
    queue: int = 2 << 20
    """Estimated bytes a receiver lets wait in the downstream processor's queue."""


DEFAULT_LIMITS = ByteLimits()
UNMEASURED_ITEM_BYTES = 1024
"""What an item of a link counts for before one of its frames was measured: small enough that
the default window of two queue sizes of entries (2,048) is not cut, so routing that skips full
links goes as it does without byte bounds."""


class SendWindow:
    """What the sending end of a link may still push: the entries and the estimated bytes of
    its window less what is in flight (pushed and not acknowledged).

    The upstream calls `room()` and `pushed()`, possibly from its own thread; the stream
    calls `framed()` and `acknowledged()`. Each counter has one writer, so a reader on the other
    thread can only see less room than there is, for a moment.
    """

    __slots__ = (
        "_frames",
        "acked",
        "entries",
        "framed_count",
        "in_flight_bytes",
        "item_bytes",
        "limit_bytes",
        "pushed_count",
    )

    def __init__(self, entries: int, limit_bytes: int) -> None:
        self.entries = entries
        """The window in entries."""
        self.limit_bytes = limit_bytes
        """The window in estimated bytes."""
        self.pushed_count = 0
        """Entries pushed (upstream)."""
        self.framed_count = 0
        """Entries framed, whose bytes are known (stream)."""
        self.acked = 0
        """Entries the receiver moved into the downstream queue (stream)."""
        self.in_flight_bytes = 0
        """Bytes of the framed entries not acknowledged yet (stream)."""
        self.item_bytes = UNMEASURED_ITEM_BYTES
        """Bytes per item of the last data frame (UNMEASURED_ITEM_BYTES until one was framed)."""
        self._frames: deque[list[int]] = deque()
        """[entries, bytes] of each frame not wholly acknowledged, oldest first."""

    def room(self) -> int:
        """How many more entries the upstream may push now (at least one when nothing is in
        flight, however large the items are)."""
        room = self.entries - self.pushed_count + self.acked
        unframed = self.pushed_count - self.framed_count
        fits = (self.limit_bytes - self.in_flight_bytes) // self.item_bytes
        room = min(room, fits - unframed)
        if self.pushed_count == self.acked:
            return max(room, 1)
        return max(room, 0)

    def pushed(self, count: int) -> None:
        """The upstream pushed `count` entries."""
        self.pushed_count += count

    def framed(self, count: int, size: int, *, items: bool) -> None:
        """The stream framed `count` pushed entries into `size` bytes (items or one control
        entry)."""
        self.framed_count += count
        self.in_flight_bytes += size
        self._frames.append([count, size])
        if items:
            self.item_bytes = max(1, size // count)

    def acknowledged(self, count: int) -> None:
        """The receiver moved `count` more entries into the downstream queue; a frame moved in
        part frees its bytes in proportion."""
        self.acked += count
        frames = self._frames
        while count and frames:
            frame = frames[0]
            if frame[0] <= count:
                count -= frame[0]
                self.in_flight_bytes -= frame[1]
                frames.popleft()
            else:
                share = frame[1] * count // frame[0]
                frame[0] -= count
                frame[1] -= share
                self.in_flight_bytes -= share
                count = 0

    @property
    def idle(self) -> bool:
        """True when the receiver took everything pushed."""
        return self.acked == self.pushed_count


def queue_room(queue: Queue, item_bytes: int, limit_bytes: int) -> int:
    """How many items the receiver may move into `queue` now: its room, within `limit_bytes`
    estimated at `item_bytes` an item (at least one when the queue is empty)."""
    room = queue.room()
    waiting = queue.size()
    if waiting == 0:
        return min(room, max(1, limit_bytes // item_bytes))
    return max(0, min(room, limit_bytes // item_bytes - waiting))
