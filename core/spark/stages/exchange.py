"""The member runtime's exchange on Spark: links to other tasks become shuffle records.

`SparkExchange` follows the contract of `jetspark.core.runtime.exchange.Exchange`. Senders
batch each link's items into records of at most the edge's queue size, encoded once per batch;
the task yields the records after every runtime round, so memory stays bounded. A reader tasklet
feeds the task's input records into the queues of the built processors.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from jetspark.core.runtime.exchange import Link
from jetspark.core.runtime.queue import DONE_ITEM, Queue
from jetspark.core.runtime.tasklet import DONE, MADE_PROGRESS, NO_PROGRESS, Tasklet
from jetspark.core.runtime.wakeup import Wakeup
from jetspark.core.serialization import decode_batch, encode_batch
from jetspark.core.spark.stages.records import RESULT, result_record

_RECORDS_PER_CALL = 64
"""Input records the reader handles per call, so processors get their turns."""


class RecordSender:
    """The channel of one link whose downstream processor runs in another Spark task."""

    __slots__ = ("_buffer", "_head", "_member", "_out", "_seq", "_size", "bytes", "entries")

    def __init__(self, link: Link, out: deque[Any]) -> None:
        self._out = out
        self._head = (link.edge.id, link.downstream_local, link.upstream)
        self._size = link.edge.queue_size
        self._buffer: list[Any] = []
        self._seq = 0
        self._member = link.downstream_member
        self.entries = 0
        self.bytes = 0

    def room(self) -> int:
        """Always a full chunk: records leave the task after every round of the runtime."""
        return self._size

    def push(self, chunk: list[Any]) -> None:
        """Buffers items; every full batch becomes one record."""
        buffer = self._buffer
        buffer.extend(chunk)
        size = self._size
        while len(buffer) >= size:
            self._emit(encode_batch(buffer[:size], classes_by_value=True), size)
            del buffer[:size]

    def push_control(self, entry: Any) -> None:
        """Sends the buffered items, then the watermark or the end of this link."""
        self.flush()
        self._emit(None if entry is DONE_ITEM else entry, 1)

    def flush(self) -> None:
        """Sends what is buffered as one record."""
        if self._buffer:
            self._emit(encode_batch(self._buffer, classes_by_value=True), len(self._buffer))
            self._buffer = []

    def _emit(self, payload: Any, entries: int) -> None:
        edge, local, upstream = self._head
        self._out.append((self._member, (edge, local, upstream, self._seq, payload)))
        self._seq += 1
        self.entries += entries
        if type(payload) is bytes:
            self.bytes += len(payload)


class RecordReader:
    """A tasklet feeding the task's input records into the queues registered for them.

    Edge records of other stages are skipped; result records of the stages this one inherits
    from are passed on to the task's output. A record whose queue is full is held back (only
    one), so input is read lazily and memory stays bounded.
    """

    name = "shuffle-reader"
    logger = logging.getLogger("jetspark.spark")
    callback = "call"

    def __init__(
        self,
        records: Iterator[Any],
        queues: Mapping[tuple[int, int, int], Queue],
        out: deque[Any],
        stage: int,
        heir_of: frozenset[int],
    ) -> None:
        self._records = records
        self._queues = queues
        self._out = out
        self._stage = stage
        self._heir_of = heir_of
        self._edges = frozenset(key[0] for key in queues)
        self._held: tuple[Queue, Any] | None = None
        self._next_seq: dict[tuple[int, int, int], int] = {}

    def init(self) -> None:
        """Nothing to set up."""

    def is_cooperative(self) -> bool:
        """Reading a shuffle iterator is quick per record."""
        return True

    def close(self) -> None:
        """Reads what is left, so Spark can reuse the Python worker."""
        for _ in self._records:
            pass

    def wake_on_input(self, wakeup: Wakeup) -> None:
        """Its input is the stage's record iterator, read on the driving thread."""

    def call(self) -> int:
        """Moves up to a few dozen records into queues; DONE when the input is exhausted."""
        if self._held is not None and not self._offer(*self._held):
            return NO_PROGRESS
        self._held = None
        for _ in range(_RECORDS_PER_CALL):
            record = next(self._records, None)
            if record is None:
                return DONE
            body = record[1]
            edge = body[0]
            if edge == RESULT:
                self._pass_on(record)
            elif edge in self._edges:
                queue, entry = self._decode(body)
                if not self._offer(queue, entry):
                    self._held = (queue, entry)
                    return MADE_PROGRESS
        return MADE_PROGRESS

    def _pass_on(self, record: Any) -> None:
        _, kind, name, payload, stage = record[1]
        if stage in self._heir_of:
            self._out.append(result_record(record[0], self._stage, kind, name, payload))

    def _decode(self, body: tuple[Any, ...]) -> tuple[Queue, Any]:
        edge, local, upstream, seq, payload = body
        key = (edge, local, upstream)
        expected = self._next_seq.get(key, 0)
        if seq != expected:
            raise RuntimeError(
                f"shuffle records of edge {edge} from processor {upstream} arrived out of order "
                f"(got #{seq}, expected #{expected}); Spark must keep each map output's order"
            )
        self._next_seq[key] = seq + 1
        queue = self._queues[key]
        if payload is None:
            return queue, DONE_ITEM
        if type(payload) is bytes:
            return queue, decode_batch(payload)
        return queue, payload

    @staticmethod
    def _offer(queue: Queue, entry: Any) -> bool:
        if type(entry) is list:
            if queue.room() < len(entry):
                return False
            queue.push(entry)
        else:
            if queue.room() < 1:
                return False
            queue.push_control(entry)
        return True


class SparkExchange:
    """The exchange of one Spark task: record senders out, one record reader in."""

    def __init__(
        self,
        records: Iterator[Any],
        stage: int,
        heir_of: frozenset[int],
    ) -> None:
        self.out: deque[Any] = deque()
        """Records ready to leave the task; the task empties it after every round. A deque:
        non-cooperative processors append from their own threads while the task takes."""
        self._records = records
        self._stage = stage
        self._heir_of = heir_of
        self._senders: dict[int, list[RecordSender]] = {}
        self._queues: dict[tuple[int, int, int], Queue] = {}

    def sender(self, link: Link, queue: Queue | None) -> RecordSender:
        """A record sender: the downstream of `link` runs in another task."""
        sender = RecordSender(link, self.out)
        self._senders.setdefault(link.edge.id, []).append(sender)
        return sender

    def receiver(self, link: Link, queue: Queue) -> None:
        """Registers the queue that records of `link` fill."""
        self._queues[(link.edge.id, link.downstream_local, link.upstream)] = queue

    def tasklets(self) -> Sequence[Tasklet]:
        """The record reader (there is always one: it also passes results on)."""
        return (RecordReader(self._records, self._queues, self.out, self._stage, self._heir_of),)

    def traffic(self) -> Mapping[int, tuple[int, int]]:
        """Entries and bytes sent into shuffles, per edge id."""
        return {
            edge: (sum(s.entries for s in senders), sum(s.bytes for s in senders))
            for edge, senders in self._senders.items()
        }

    def take_output(self) -> list[Any]:
        """The records produced since the last call (appends racing with it are kept for the
        next call: each record is taken exactly once)."""
        out = self.out
        return [out.popleft() for _ in range(len(out))]
