"""The seam between a member's queues and whatever carries items across members or stages.

`build_member` wires a link (one upstream processor -> one downstream processor of an edge)
with a plain `Queue` when both ends are built together on the same member. Every other link goes
through an `Exchange`: LocalEngine plugs in `LoopbackExchange`, which serializes what crosses
members; the Spark translator plugs in one that turns what a member sends into shuffle records
and feeds the records of the next stage into its queues.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from jetspark.core.runtime.queue import Queue
from jetspark.core.serialization import decode_batch, encode_batch
from jetspark.edges.routing import Channel

if TYPE_CHECKING:
    from jetspark.core.runtime.plan import EdgePlan
    from jetspark.core.runtime.tasklet import Tasklet


@dataclass(frozen=True)
class Link:
    """One (upstream, downstream) processor pair of an edge; processors by global index."""

    edge: EdgePlan
    upstream: int
    downstream: int

    @property
    def upstream_member(self) -> int:
        """The member the upstream processor runs on."""
        return self.upstream // self.edge.upstream_parallelism

    @property
    def downstream_member(self) -> int:
        """The member the downstream processor runs on."""
        return self.downstream // self.edge.downstream_parallelism

    @property
    def downstream_local(self) -> int:
        """The downstream processor's local index on its member."""
        return self.downstream % self.edge.downstream_parallelism

    def __repr__(self) -> str:
        return f"Link({self.edge.name}, {self.upstream} -> {self.downstream})"


class Exchange(Protocol):
    """Carries the links `build_member` cannot wire with an in-process queue.

    The contract a sender keeps and a receiver relies on: per link, entries arrive in the order
    they were pushed; a chunk (a list of items) never holds more items than the edge's
    `queue_size`, so it fits an empty queue whole; control entries are `Watermark`s and, last of
    all, `DONE_ITEM`. A receiver pushes into a queue only within its `room()`.

    The record form for Spark: a sender turns each pushed chunk into a record `(edge id, target
    member, target local index, upstream global index, sequence number, encode_batch(chunk))`,
    and a control entry into the same record with the Watermark, or None for DONE_ITEM, in place
    of the bytes. Its `room()` bounds the records not yet handed on, which bounds the task's
    memory: the task alternates `MemberRuntime.step()` (or the steps of `run_iter()`) with
    yielding the records its senders produced. On the receiving task, a tasklet from
    `tasklets()` reads the shuffle iterator and pushes each record, decoded with `decode_batch`,
    into the queue registered for `(edge id, target local index, upstream global index)` once
    that queue has room, so it holds at most one record back.
    """

    def sender(self, link: Link, queue: Queue | None) -> Channel:
        """The channel the upstream processor of `link` (built here) writes to.

        `queue` is the downstream processor's queue when this build holds it (another member
        in the same process), else None (the downstream lives in another task or stage).
        """
        ...

    def receiver(self, link: Link, queue: Queue) -> None:
        """Registers `queue`, which the exchange fills for a link whose upstream is elsewhere."""
        ...

    def tasklets(self) -> Sequence[Tasklet]:
        """Tasklets the runtime drives alongside the processors' (e.g. a record reader)."""
        ...

    def traffic(self) -> Mapping[int, tuple[int, int]]:
        """Per edge id: items (and control entries) and bytes sent across members, for metrics."""
        ...


class SerializingChannel:
    """A channel into another member's queue that encodes and decodes each chunk on the way."""

    __slots__ = ("bytes", "entries", "queue")

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.entries = 0
        self.bytes = 0

    def room(self) -> int:
        """The target queue's room."""
        return self.queue.room()

    def push(self, chunk: list[Any]) -> None:
        """Pushes a copy of `chunk` made by serialization, so no object is shared across members."""
        data = encode_batch(chunk, classes_by_value=True)
        self.entries += len(chunk)
        self.bytes += len(data)
        self.queue.push(decode_batch(data))

    def push_control(self, entry: Any) -> None:
        """Pushes a watermark or DONE_ITEM (immutable, so shared as they are)."""
        self.entries += 1
        self.queue.push_control(entry)


class LoopbackExchange:
    """LocalEngine's exchange: every member lives in this process and every vertex is built.

    Items crossing members are serialized with `encode_batch` and deserialized with
    `decode_batch`, as a shuffle would, so a job that only works by sharing objects between
    members fails here as it would on a cluster.
    """

    def __init__(self) -> None:
        self._channels: dict[int, list[SerializingChannel]] = {}

    def sender(self, link: Link, queue: Queue | None) -> Channel:
        """A serializing channel into the downstream member's queue."""
        if queue is None:
            raise ValueError(f"{link}: LoopbackExchange needs both ends built in this process")
        channel = SerializingChannel(queue)
        self._channels.setdefault(link.edge.id, []).append(channel)
        return channel

    def receiver(self, link: Link, queue: Queue) -> None:
        """Never needed: a loopback build holds the upstream of every link."""
        raise ValueError(f"{link}: LoopbackExchange needs both ends built in this process")

    def tasklets(self) -> Sequence[Tasklet]:
        """None: senders write straight into the target queues."""
        return ()

    def traffic(self) -> Mapping[int, tuple[int, int]]:
        """Entries and bytes that crossed members, per edge id."""
        return {
            edge_id: (sum(c.entries for c in channels), sum(c.bytes for c in channels))
            for edge_id, channels in self._channels.items()
        }
