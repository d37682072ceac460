"""A replayable socket source for the MICRO_BATCH latency rows: the lines of bench's event
server (bench/latency_servers.py, resuming), from a position saved in snapshots.

`stream_socket_p` cannot replay, and a micro-batch job closes its connection at the end of
every batch (each batch is a Spark job of its own): what the server had sent into it and the
source had not emitted would be lost without any failure, so SparkEngine refuses to run
`stream_socket_p` as micro-batches. This source connects, says `from NEXT STEP` (processor i
of T takes events i, i+T, ...) and saves the number of the next event it will emit: a batch
that starts from the snapshot asks the server again from there, so every event is emitted
exactly once.
It emits what it read in the same call (a micro-batch ends its source's input at the first
`complete()` that returns False having emitted nothing), and ends its batch when nothing more
has arrived (after waiting up to FIRST_READ_SECONDS for the server's first lines on a new
connection).
"""

from __future__ import annotations

import socket
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.suppliers import ProcessorMetaSupplier, unbounded
from jetspark.processors.snapshots import ProcessorState

FIRST_READ_SECONDS = 0.05
CONNECT_SECONDS = 10.0
_READ_BYTES = 1 << 16
_NEXT = ProcessorState("resuming_socket_next")


class ResumingSocketP(AbstractProcessor):
    """Emits the event server's lines `n due_us sent_us` from event `next` on (see the module
    docstring); non-cooperative (it connects and reads with blocking calls)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__()
        self._address = (host, port)
        self._socket: socket.socket | None = None
        self._next: int | None = None
        self._lines: list[str] = []
        self._partial = b""
        self._ended = False

    def is_cooperative(self) -> bool:
        return False

    def complete(self) -> bool:
        context = self.context
        if self._next is None:
            self._next = context.global_processor_index
        while self._emit_lines(context.total_parallelism):
            if self._ended:
                return True
            if not self._receive(context.total_parallelism):
                return False  # nothing at hand: a micro-batch's input ends here
        return False

    def _emit_lines(self, step: int) -> bool:
        """Emits the lines read; False when the outbox refused one (it stays first)."""
        for count, line in enumerate(self._lines):
            if not self.try_emit(line):
                del self._lines[:count]
                return False
            self._next = int(line[: line.index(" ")]) + step
        self._lines = []
        return True

    def _receive(self, step: int) -> bool:
        """Reads what has arrived (connecting first if need be); False when nothing had."""
        if self._socket is None:
            self._socket = socket.create_connection(self._address, timeout=CONNECT_SECONDS)
            self._socket.sendall(f"from {self._next} {step}\n".encode("ascii"))
            self._socket.settimeout(FIRST_READ_SECONDS)
        try:
            data = self._socket.recv(_READ_BYTES)
        except (TimeoutError, BlockingIOError):
            return False
        self._socket.setblocking(False)
        if not data:
            self._ended = True
            return True
        pieces = (self._partial + data).split(b"\n")
        self._partial = pieces.pop()
        self._lines = [piece.decode("ascii") for piece in pieces]
        return True

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot(*_NEXT.entry(self.context, self._next))

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        saved = _NEXT.saved(key, value)
        if _NEXT.is_own(self.context, saved):
            self._next = saved.value

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def resuming_socket_p(host: str, port: int) -> Any:
    """The source's supplier, unbounded (its job ends only when the server ends the stream)."""
    return unbounded(ProcessorMetaSupplier.of(lambda: ResumingSocketP(host, port)))
