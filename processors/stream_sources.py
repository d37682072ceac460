"""Streams from outside the job: Spark's Structured Streaming sources through `read_stream_p`,
and Jet's line-based socket connectors (manual §5.8), `stream_socket_p` and `write_socket_p`.

A `read_stream_p(streaming_df)` vertex makes its job run as Spark's streaming engine delivers
micro-batches (SparkEngine with a processing guarantee,
`core/spark/microbatch/spark_streams.py`): Spark
tracks the source's offsets in its checkpoint directory, kept inside the job's snapshot store,
and jetspark the processors' state in snapshots, one per Spark batch id. The vertex's processors
emit the rows of the current Spark batch that their task received (`pyspark.sql.Row`, or
`map_fn(row)`), then wait for the next batch: the source never completes.
"""

from __future__ import annotations

import codecs
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.context import Context
from jetspark.core.inbox import Inbox
from jetspark.core.outbox import Outbox
from jetspark.core.suppliers import ProcessorMetaSupplier, ProcessorSupplier, unbounded
from jetspark.processors.functions import drain

_NOTHING = object()


class StreamBatchP(AbstractProcessor):
    """Emits the rows of the Spark batch its task was handed (local processor 0 of a member),
    mapped by `map_fn`; `complete()` never returns True."""

    def __init__(self, map_fn: Callable[[Any], Any] | None) -> None:
        super().__init__()
        self._map_fn = map_fn
        self._rows: Iterator[Any] = iter(())
        self._pending: Any = _NOTHING

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        rows = getattr(context.stores, "rdd_input", None)
        if rows is None:
            raise RuntimeError(
                f"vertex '{context.vertex_name}': read_stream_p reads a Spark Structured "
                "Streaming DataFrame, so it runs on SparkEngine only (with a processing "
                "guarantee); on LocalEngine use stream_journal_p or stream_files_p"
            )
        if context.local_processor_index == 0:
            self._rows = iter(rows)

    def complete(self) -> bool:
        map_fn = self._map_fn
        if self._pending is not _NOTHING:
            if not self.try_emit(self._pending):
                return False
            self._pending = _NOTHING
        for row in self._rows:
            item = map_fn(row) if map_fn is not None else row
            if item is None:
                continue
            if not self.try_emit(item):
                self._pending = item
                return False
        return False  # the stream goes on in Spark's next batch


class ReadStreamMetaSupplier(ProcessorMetaSupplier):
    """The supplier of a `read_stream_p` vertex; the DataFrame stays on the driver (it is
    dropped when the supplier is pickled into tasks)."""

    def __init__(self, streaming_frame: Any, map_fn: Callable[[Any], Any] | None) -> None:
        self.streaming_frame = streaming_frame
        self.map_fn = map_fn

    def preferred_local_parallelism(self) -> int:
        """One reader per member: the task's share of the batch cannot be split further."""
        return 1

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], ProcessorSupplier]:
        """The same supplier on every member."""
        map_fn = self.map_fn
        supplier = ProcessorSupplier.of(lambda: StreamBatchP(map_fn))
        return lambda member_index: supplier

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "streaming_frame": None}


def read_stream_p(
    streaming_df: Any, map_fn: Callable[[Any], Any] | None = None
) -> ReadStreamMetaSupplier:
    """A source over a Structured Streaming DataFrame (`spark.readStream...load()`): its rows,
    or `map_fn(row)` (None results are skipped). SparkEngine only, with a processing guarantee.
    """
    if not getattr(streaming_df, "isStreaming", False):
        kind = type(streaming_df).__name__
        raise TypeError(
            "read_stream_p takes a streaming DataFrame (spark.readStream...load()), got "
            + ("a batch DataFrame: use read_rdd_p(df.rdd) for it" if kind == "DataFrame" else kind)
        )
    if map_fn is not None and not callable(map_fn):
        raise TypeError(f"map_fn must be callable, got {type(map_fn).__name__}")
    return ReadStreamMetaSupplier(streaming_df, map_fn)


class StreamSocketP(AbstractProcessor):
    """Connects to `host:port` as a client and emits each line it receives (decoded with
    `charset`, the line break removed); completes when the server closes the connection,
    after the last, possibly unterminated, line. Non-cooperative (blocking reads)."""

    def __init__(self, host: str, port: int, charset: str) -> None:
        super().__init__()
        self._address = (host, port)
        self._charset = charset
        self._socket: socket.socket | None = None
        self._decoder = codecs.getincrementaldecoder(charset)()
        self._partial = ""
        self._lines: list[str] = []
        self._closed = False

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._socket = _connect(self._address, context.vertex_name)
        self._socket.settimeout(_READ_TIMEOUT_SECONDS)

    def complete(self) -> bool:
        if not self._lines and not self._closed:
            self._receive()  # what arrived is emitted in this same call
        while self._lines:
            if not self.try_emit(self._lines[0]):
                return False
            del self._lines[0]
        return self._closed

    def _receive(self) -> None:
        """Waits up to _READ_TIMEOUT_SECONDS for data; its whole lines go to `_lines`, and at
        the end of the stream the last, possibly unterminated, one."""
        assert self._socket is not None
        try:
            data = self._socket.recv(_RECEIVE_BYTES)
        except TimeoutError:
            return
        if not data:
            self._closed = True
            text = self._partial + self._decoder.decode(b"", final=True)
            self._lines = [text] if text else []
            self._partial = ""
            return
        lines = (self._partial + self._decoder.decode(data)).split("\n")
        self._partial = lines.pop()
        self._lines = [line.removesuffix("\r") for line in lines]

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


class WriteSocketP(AbstractProcessor):
    """Connects to `host:port` as a client and writes `to_string(item)` as a line per item;
    closes the connection when the job ends. Non-cooperative (blocking writes)."""

    def __init__(self, host: str, port: int, to_string: Callable[[Any], str], charset: str):
        super().__init__()
        self._address = (host, port)
        self._to_string = to_string
        self._charset = charset
        self._socket: socket.socket | None = None

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        self._socket = _connect(self._address, context.vertex_name)
        # an inbox's lines leave in one write: Nagle's algorithm would only hold a write back
        # until the previous one is acknowledged (up to 40 ms of delayed ACK on Linux)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def process(self, ordinal: int, inbox: Inbox) -> None:
        assert self._socket is not None
        to_string = self._to_string
        lines = "".join(to_string(item) + "\n" for item in drain(inbox))
        self._socket.sendall(lines.encode(self._charset))

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


_READ_TIMEOUT_SECONDS = 0.05
_RECEIVE_BYTES = 1 << 16
_CONNECT_TIMEOUT_SECONDS = 10.0


def _connect(address: tuple[str, int], vertex: str) -> socket.socket:
    try:
        return socket.create_connection(address, timeout=_CONNECT_TIMEOUT_SECONDS)
    except OSError as error:
        raise ConnectionError(
            f"vertex '{vertex}': cannot connect to {address[0]}:{address[1]}: "
            f"{error.strerror or error}"
        ) from error


class SocketMetaSupplier(ProcessorMetaSupplier):
    """The supplier of the socket connectors; `replayable` False makes a job with a
    processing guarantee warn at submit time (docs/fault_tolerance.md)."""

    replayable = False

    def __init__(self, make: Callable[[], AbstractProcessor], kind: str) -> None:
        self._make = make
        self.kind = kind

    def get(self, member_indexes: Sequence[int]) -> Callable[[int], ProcessorSupplier]:
        """The same supplier on every member: each processor opens its own connection."""
        supplier = ProcessorSupplier.of(self._make)
        return lambda member_index: supplier


def _check_address(host: Any, port: Any, charset: str) -> None:
    if not isinstance(host, str) or not host:
        raise TypeError(f"host must be a non-empty str, got {host!r}")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise ValueError(f"port must be an int from 1 to 65535, got {port!r}")
    codecs.lookup(charset)


def stream_socket_p(host: str, port: int, charset: str = "utf-8") -> SocketMetaSupplier:
    """Jet's `streamSocket`: each processor connects to `host:port` and emits the lines it
    receives until the server closes the connection. Not replayable: a restart loses what the
    server sent before it (at-most-once whatever the job's guarantee)."""
    _check_address(host, port, charset)
    return unbounded(
        SocketMetaSupplier(lambda: StreamSocketP(host, port, charset), "stream_socket_p")
    )


def write_socket_p(
    host: str, port: int, to_string: Callable[[Any], str] = str, charset: str = "utf-8"
) -> SocketMetaSupplier:
    """Jet's `writeSocket`: each processor connects to `host:port` and writes one line per
    item. Not transactional: after a restart from a snapshot, lines written since it are
    written again (at-least-once)."""
    _check_address(host, port, charset)
    if not callable(to_string):
        raise TypeError(f"to_string must be callable, got {type(to_string).__name__}")
    return SocketMetaSupplier(
        lambda: WriteSocketP(host, port, to_string, charset), "write_socket_p"
    )
