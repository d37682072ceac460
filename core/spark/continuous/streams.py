"""Distributed edges of a continuous job: streams between the members' Spark tasks (manual §7.6).

Every pair of members shares one TCP connection, full duplex. A link (one upstream processor to
one downstream processor of an edge) that crosses members is a stream on it with Jet's flow
control (flow.py): the sender may be at most a window of entries and of estimated bytes ahead of
what the receiver has moved into the downstream processor's queue, the receiver moves entries
into that queue within its room in entries and in estimated bytes, and it acknowledges what it
moved. A receiver therefore always reads its socket to the end (what arrives is bounded by the
windows), so a full queue on one link never stops another link of the same connection: barrier
alignment and edge priorities work exactly as between two queues of one member. Memory per link
is bounded by its window and its queue, in entries and in bytes, whatever the items' size.

Items are batched for throughput and flushed for latency: what the upstream processors pushed
during one round of the member's cooperative loop leaves as one frame per link at the end of the
round, encoded once with `encode_batch` (the serialization of the stage shuffles). Watermarks,
snapshot barriers and the end of a link travel in-band, in order with the items.

Frame: header `<I B i i i I` (body length, kind, edge id, upstream, downstream, count), then the
body: `encode_batch` bytes (DATA), a pickled control entry (CONTROL), nothing (ACK, whose count is
the entries moved since the last ack). What a round writes goes out in the connection's
authenticated frames (frames.py), and only what passed their check is parsed: a frame that fails
drops the connection (the job restarts from its last snapshot) and never reaches `pickle`.
"""

from __future__ import annotations

import errno
import logging
import pickle
import selectors
import socket
import struct
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jetspark.core.runtime.exchange import Link
from jetspark.core.runtime.queue import DONE_ITEM, Queue
from jetspark.core.runtime.tasklet import DONE, MADE_PROGRESS, NO_PROGRESS, Tasklet
from jetspark.core.runtime.wakeup import Wakeup
from jetspark.core.serialization import decode_batch, encode_batch
from jetspark.core.spark.continuous.flow import DEFAULT_LIMITS, ByteLimits, SendWindow, queue_room
from jetspark.core.spark.continuous.frames import ForgedFrameError, Frames

_HEADER = struct.Struct("<IBiiiI")
DATA, CONTROL, ACK = 0, 1, 2
WINDOW_QUEUES = 2
"""A link's receive window, in queues of its edge: the sender may be this many queue sizes
ahead of what the receiver moved into the downstream queue."""
_READ_BYTES = 1 << 18
_DONE_MARK = b""
"""The CONTROL body of DONE_ITEM (it does not need pickling)."""

LinkKey = tuple[int, int, int]
"""(edge id, upstream global index, downstream global index)."""


class PeerLostError(ConnectionError):
    """The stream to another member broke before every link on it ended: that member's task,
    Python worker or executor was lost. The job restarts from its last snapshot."""


def link_key(link: Link) -> LinkKey:
    """The key that names `link` in frames, the same on both members."""
    return (link.edge.id, link.upstream, link.downstream)


class StreamChannel:
    """The sending end of one link: a `Channel` whose room is the link's unacknowledged window
    (`SendWindow`, in entries and in estimated bytes).

    The upstream processor pushes from its own thread when it is non-cooperative, so pushes only
    append to a deque and notify the member's loop (`wakeup`, set when the runtime starts); the
    member's stream tasklet frames them (`frame_into`) on the loop's thread.
    """

    __slots__ = ("_pending", "bytes", "done", "entries", "flow", "key", "wakeup")

    def __init__(self, link: Link, limits: ByteLimits) -> None:
        self.key = link_key(link)
        self._pending: deque[Any] = deque()
        self.flow = SendWindow(WINDOW_QUEUES * link.edge.queue_size, limits.window)
        self.done = False
        """True once DONE_ITEM was pushed."""
        self.entries = 0
        self.bytes = 0
        self.wakeup: Wakeup | None = None
        """The member loop's wake-up: a push ends its idle wait, so the frame leaves at once."""

    @property
    def window(self) -> int:
        """The window in entries."""
        return self.flow.entries

    def room(self) -> int:
        """The window less what is in flight, in entries and in estimated bytes."""
        return self.flow.room()

    def push(self, chunk: list[Any]) -> None:
        """Queues `chunk` for the frame this link sends at the end of the round."""
        self.flow.pushed(len(chunk))
        self._pending.append(chunk)
        if self.wakeup is not None:
            self.wakeup.notify()

    def push_control(self, entry: Any) -> None:
        """Queues the watermark, barrier or end of the link, in order with the items."""
        self.flow.pushed(1)
        self._pending.append(entry)
        if entry is DONE_ITEM:
            self.done = True
        if self.wakeup is not None:
            self.wakeup.notify()

    def frame_into(self, out: bytearray) -> None:
        """Appends what was pushed to `out`: one DATA frame per run of chunks, one CONTROL
        frame per control entry."""
        pending = self._pending
        items: list[Any] = []
        while pending:
            entry = pending.popleft()
            if type(entry) is list:
                items.extend(entry)
                continue
            self._data_frame(out, items)
            items = []
            body = _DONE_MARK if entry is DONE_ITEM else pickle.dumps(entry, protocol=5)
            self._frame(out, CONTROL, 1, body)
        self._data_frame(out, items)

    @property
    def finished(self) -> bool:
        """True once the link ended and the receiver took everything."""
        return self.done and self.flow.idle and not self._pending

    def _data_frame(self, out: bytearray, items: list[Any]) -> None:
        if items:
            body = encode_batch(items, classes_by_value=True)
            self._frame(out, DATA, len(items), body)
            self.bytes += len(body)

    def _frame(self, out: bytearray, kind: int, count: int, body: bytes) -> None:
        edge, upstream, downstream = self.key
        out += _HEADER.pack(len(body), kind, edge, upstream, downstream, count)
        out += body
        self.entries += count
        self.flow.framed(count, len(body), items=kind == DATA)


class _Inbound:
    """The receiving end of one link: entries waiting for room in the downstream queue."""

    __slots__ = ("done", "item_bytes", "moved", "pending", "queue")

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.pending: deque[Any] = deque()
        self.moved = 0
        """Entries moved into the queue and not acknowledged yet."""
        self.done = False
        self.item_bytes = 1
        """Encoded bytes per item of the last data frame: the estimate of what the queue holds."""


class PeerStream:
    """A cooperative tasklet carrying every link between this member and one other member over
    their connection: frames what the channels buffered, sends, receives, moves entries into
    queues within their room, and acknowledges what it moved. DONE once every link in both
    directions ended and was acknowledged."""

    logger = logging.getLogger("jetspark.spark")
    callback = "streaming to another member"

    def __init__(
        self,
        member: int,
        peer: int,
        connection: socket.socket,
        frames: Frames,
        on_done: Callable[[socket.socket], None] = lambda connection: None,
        limits: ByteLimits = DEFAULT_LIMITS,
    ) -> None:
        self.name = f"stream member {member} <-> member {peer}"
        self.peer = peer
        self._on_done = on_done
        self._limits = limits
        self._socket = connection
        self._frames = frames
        self._out = bytearray()
        """What this round wrote, not sealed yet."""
        self._wire = bytearray()
        """Sealed frames not sent yet."""
        self._in = bytearray(frames.early)
        self._unparsed = bool(frames.early)
        """True while `_in` holds what the handshake brought and nothing parsed it yet."""
        self.channels: list[StreamChannel] = []
        self.inbound: dict[LinkKey, _Inbound] = {}
        self._channels_by_key: dict[LinkKey, StreamChannel] = {}
        self._closed = False

    # ---------------------------------------------------------------- wiring

    def channel(self, link: Link) -> StreamChannel:
        """The sending end of a link from this member to the peer."""
        channel = StreamChannel(link, self._limits)
        self.channels.append(channel)
        self._channels_by_key[link_key(link)] = channel
        return channel

    def receive_into(self, link: Link, queue: Queue) -> None:
        """Registers the queue a link from the peer fills."""
        self.inbound[link_key(link)] = _Inbound(queue)

    # -------------------------------------------------------------- tasklet

    def init(self) -> None:
        """The connection is set up already."""

    def is_cooperative(self) -> bool:
        """Non-blocking socket calls only."""
        return True

    def close(self) -> None:
        """The connection stays open until the task ends (`close_connection`)."""

    def fileno(self) -> int:
        """The socket's descriptor, for a member waiting for input (selectors)."""
        return self._socket.fileno()

    def wake_on_input(self, wakeup: Wakeup) -> None:
        """Its input is the socket, which the member's wait watches (`StreamExchange`), and what
        upstream processors push into its channels, which notify `wakeup`."""
        for channel in self.channels:
            channel.wakeup = wakeup

    def call(self) -> int:
        """One round of sending, receiving and delivering; see the class docstring."""
        progress = NO_PROGRESS
        for channel in self.channels:
            channel.frame_into(self._out)
        if self._receive():
            progress = MADE_PROGRESS
        if self._deliver():
            progress = MADE_PROGRESS
        if self._out:
            self._frames.seal(self._out, self._wire)
            self._out.clear()
        if self._wire and self._send():
            progress = MADE_PROGRESS
        if self._finished():
            self._on_done(self._socket)  # nothing more comes: stop waiting on it
            return DONE
        return progress

    def _finished(self) -> bool:
        return (
            not self._out
            and not self._wire
            and all(channel.finished for channel in self.channels)
            and all(inbound.done and not inbound.pending for inbound in self.inbound.values())
        )

    def _send(self) -> bool:
        try:
            sent = self._socket.send(self._wire)
        except BlockingIOError:
            return False
        except OSError as error:
            raise self._lost(error) from error
        del self._wire[:sent]
        return sent > 0

    def _receive(self) -> bool:
        received, self._unparsed = self._unparsed, False
        while True:
            try:
                data = self._socket.recv(_READ_BYTES)
            except BlockingIOError:
                break
            except OSError as error:
                if error.errno == errno.EINTR:
                    continue
                raise self._lost(error) from error
            if not data:
                if self._finished():
                    break
                raise self._lost(None)
            try:
                self._frames.open(data, self._in)
            except ForgedFrameError as forged:
                self.logger.warning("%s: %s; connection dropped", self.name, forged)
                raise PeerLostError(f"the stream from member {self.peer}: {forged}") from None
            received = True
            if len(data) < _READ_BYTES:
                break
        if received:
            self._parse()
        return received

    def _parse(self) -> None:
        buffer = self._in
        view = memoryview(buffer)
        position = 0
        header = _HEADER.size
        try:
            while len(buffer) - position >= header:
                length, kind, edge, upstream, downstream, count = _HEADER.unpack_from(
                    buffer, position
                )
                end = position + header + length
                if end > len(buffer):
                    break
                key = (edge, upstream, downstream)
                if kind == ACK:
                    self._channels_by_key[key].flow.acknowledged(count)
                else:
                    body = bytes(view[position + header : end])
                    self._accept(key, kind, body)
                position = end
        finally:
            view.release()
        del buffer[:position]

    def _accept(self, key: LinkKey, kind: int, body: bytes) -> None:
        inbound = self.inbound[key]
        if kind == DATA:
            items = decode_batch(body)
            inbound.item_bytes = max(1, len(body) // len(items))
            inbound.pending.append(items)
        elif body == _DONE_MARK:
            inbound.pending.append(DONE_ITEM)
        else:
            inbound.pending.append(pickle.loads(body))

    def _deliver(self) -> bool:
        moved_any = False
        limit = self._limits.queue
        for key, inbound in self.inbound.items():
            pending, queue = inbound.pending, inbound.queue
            while pending:
                entry = pending[0]
                if type(entry) is list:
                    room = queue_room(queue, inbound.item_bytes, limit)
                    if room < len(entry):  # a frame may hold up to the window: what fits goes
                        if room > 0:
                            queue.push(entry[:room])
                            inbound.moved += room
                            pending[0] = entry[room:]
                        break
                    queue.push(entry)
                    inbound.moved += len(entry)
                else:
                    if queue.room() < 1:
                        break
                    queue.push_control(entry)
                    inbound.moved += 1
                    inbound.done = entry is DONE_ITEM
                pending.popleft()
            if inbound.moved:
                edge, upstream, downstream = key
                self._out += _HEADER.pack(0, ACK, edge, upstream, downstream, inbound.moved)
                inbound.moved = 0
                moved_any = True
        return moved_any

    def _lost(self, error: OSError | None) -> PeerLostError:
        reason = f": {error.strerror or error}" if error is not None else " (connection closed)"
        return PeerLostError(
            f"member {self.peer}'s task is gone{reason}; its Spark task, Python worker or "
            "executor was lost"
        )

    def close_connection(self) -> None:
        """Closes the socket (the task is ending)."""
        if not self._closed:
            self._closed = True
            self._socket.close()

    def __repr__(self) -> str:
        return f"PeerStream({self.name})"


class StreamExchange:
    """The exchange of a member's task in a continuous job: one PeerStream per other member."""

    def __init__(
        self,
        member: int,
        connections: Mapping[int, tuple[socket.socket, Frames]],
        limits: ByteLimits = DEFAULT_LIMITS,
    ) -> None:
        self.member = member
        self._selector = selectors.DefaultSelector()
        for connection, _ in connections.values():
            self._selector.register(connection, selectors.EVENT_READ)
        self.peers = {
            peer: PeerStream(member, peer, connection, frames, self._unwatch, limits)
            for peer, (connection, frames) in connections.items()
        }

    def sender(self, link: Link, queue: Queue | None) -> StreamChannel:
        """The sending end of a link whose downstream runs on another member."""
        return self.peers[link.downstream_member].channel(link)

    def receiver(self, link: Link, queue: Queue) -> None:
        """Registers the queue of a link whose upstream runs on another member."""
        self.peers[link.upstream_member].receive_into(link, queue)

    def tasklets(self) -> Sequence[Tasklet]:
        """The peer streams (a stream without links ends at once)."""
        return list(self.peers.values())  # type: ignore[arg-type]

    def traffic(self) -> Mapping[int, tuple[int, int]]:
        """Entries and bytes sent to other members, per edge id."""
        totals: dict[int, list[int]] = {}
        for peer in self.peers.values():
            for channel in peer.channels:
                edge = channel.key[0]
                total = totals.setdefault(edge, [0, 0])
                total[0] += channel.entries
                total[1] += channel.bytes
        return {edge: (entries, size) for edge, (entries, size) in totals.items()}

    def _unwatch(self, connection: socket.socket) -> None:
        if connection in self._selector.get_map():
            self._selector.unregister(connection)

    def watch(self, wakeup: Wakeup) -> None:
        """Has `wait_for_input` return when `wakeup` is notified too."""
        self._selector.register(wakeup, selectors.EVENT_READ)

    def wait_for_input(self, seconds: float) -> None:
        """Waits up to `seconds`, returning as soon as another member sends something or a
        watched wake-up is notified."""
        self._selector.select(seconds)

    def close(self) -> None:
        """Closes every connection."""
        self._selector.close()
        for peer in self.peers.values():
            peer.close_connection()
