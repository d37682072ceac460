"""The control connection between a continuous job's driver and each member's Spark task.

Each member task opens one TCP connection to the driver's coordinator and says who it is; the
driver answers with what the run restores and tells it, in order, which snapshot to take, which
one is committed, and when the job has completed (or is cancelled, or the task is fenced: a newer
attempt of the stage has started). The member reports its snapshot parts, its sinks' writes, its
metrics, its end and a processor's failure. Messages are `(kind, payload)` pairs, pickled and
length-prefixed, written through the connection's authenticated frames (frames.py: keys of this
connection derived from the job's secret); nothing is decoded before its frame passed the check,
so another process that connects, or injects into a connection, can neither run code nor speak
for a member. Data between members never passes here (see streams.py).

The two directions decode differently, because only one of them must carry code. The driver's
messages are cloudpickled and a member unpickles them as they are: a user's class defined in
the driver's script, such as a snapshot store's subclass in what a run restores, reaches the
member by value. A member's messages never need that, and the driver decodes them with
`decode_from_member`, a restricted unpickler that finds by name only the types on an explicit
allow-list (`MESSAGE_TYPES`: jetspark's metrics and sealed-file reports, a few harmless builtin
and standard-library value types) and checks each message's shape, so that whoever holds the
job's key (a member, or anyone who read it where Spark does not encrypt: secret_source.py)
cannot make the driver call anything else: what `pickle.loads` would call on their say-so is
refused before it is even imported. The sinks' writes to named lists and maps (RESULTS) are
the user's items, of the user's classes, which only unpickling rebuilds: the driver unpickles
them as PySpark's `collect` unpickles what executors send, since the job's key is known only to
processes Spark trusts (Spark's RPC encrypted, or the key derived on the executors from Spark's
own secret: secret_source.py; without `spark.authenticate` Spark trusts whoever reaches it).
Where the key crosses the network readable (`spark.jetspark.continuous.plaintextSecret=warn`)
they decode with the allow-list too, jetspark's result item types besides (`ITEM_TYPES`), and
an item of any other class fails the job with an error naming the list or map and the class:
a class an unpickler finds may be called with any arguments and given any state, so its
constructor and `__setstate__` would run on the driver at the sender's command. A restricted
unpickler rather than a data-only encoding (msgpack): the messages keep jetspark's own
dataclasses, and tuples, sets and datetimes in the user's items stay what they were, with no
converter per type.

Liveness: each end sends a heartbeat every `Liveness.interval` from a thread of its own, whatever
else it does (a restore or a save of many minutes, a snapshot interval of ten), and counts the
other end as lost once nothing at all came from it for `Liveness.timeout` while it was reading:
an idle job is a healthy one, and time an end spends on a message it received is not silence.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import select
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from pyspark import cloudpickle

from jetspark.core.errors import JobFailedError
from jetspark.core.runtime.metrics import JobMetrics
from jetspark.core.serialization import decode_batch
from jetspark.core.spark.continuous.frames import Frames
from jetspark.core.spark.continuous.settings import Liveness
from jetspark.core.spark.failures import FAILURE_FIELDS
from jetspark.core.spark.shared_storage import SealedFiles
from jetspark.core.spark.stages.records import LIST, MAP

_LENGTH = struct.Struct("<I")

# member -> driver
HELLO = "hello"
"""(run token, member, stage attempt): the attempt is the lowest task attempt id of the stage
attempt's tasks, which they learn from each other through `allGather`."""
PART = "part"
"""(snapshot id, part name, tag, held, bytes per vertex, host, [SealedFiles]): the member saved
the snapshot, its part written on host, its transactional sinks having sealed those files."""
RESULTS = "results"
"""[(kind, name, payload)]: what the member's sinks wrote to named lists and maps."""
METRICS = "metrics"
"""The member's JobMetrics, sent now and then while it runs."""
FINISHED = "finished"
"""The member's processors all completed."""
FAILED = "failed"
"""The facts of a processor's failure as plain data: message, cause type name, traceback
text... (failures.failure_report)."""
PENDING = "pending"
"""(snapshot id, ["vertex#index", ...]): the member's processors that have not saved the
snapshot under way yet (sent now and then while it waits for them)."""

# driver -> member
WELCOME = "welcome"
"""(epoch, RestoreSpec or None, first snapshot id): the member may build and run."""
SNAPSHOT = "snapshot"
"""Snapshot id: take it (sources save and emit its barrier)."""
COMMITTED = "committed"
"""Snapshot id: it is committed (processors learn it through `snapshot_committed`)."""
COMPLETED = "completed"
"""Every member finished: the final states count as committed, the task may end."""
STOP = "stop"
"""A reason: the task must end now (the job was cancelled, or the task is fenced)."""

# both ways
HEARTBEAT = "heartbeat"
"""Nothing: the sender is alive (`receive` consumes it)."""
_READ_BYTES = 1 << 16

VALUE_TYPES: frozenset[tuple[str, str]] = frozenset(
    [
        *(
            ("builtins", name)
            for name in ("complex", "dict", "float", "frozenset", "int", "list", "range")
        ),
        *(("builtins", name) for name in ("set", "slice", "str", "tuple")),
        *(("collections", name) for name in ("Counter", "OrderedDict", "defaultdict", "deque")),
        *(("datetime", name) for name in ("date", "datetime", "time", "timedelta", "timezone")),
        ("decimal", "Decimal"),
        ("fractions", "Fraction"),
        ("uuid", "UUID"),
    ]
)
"""(module, qualified name) of the value types the driver finds by name in what a member sends
(builtins for collections' factories and values without an opcode of their own): calling one
with any arguments builds a value and nothing else."""
MESSAGE_TYPES = VALUE_TYPES | {
    *(
        ("jetspark.core.runtime.metrics", name)
        for name in ("JobMetrics", "ProcessorMetrics", "EdgeMetrics", "SnapshotReport")
    ),
    ("jetspark.core.spark.shared_storage", "SealedFiles"),
}
"""The types a member's messages may hold."""
ITEM_TYPES = VALUE_TYPES | {
    ("jetspark.processors.windowing", "KeyedWindowResult"),
    ("jetspark.processors.events", "JetEvent"),
    ("jetspark.processors.kafka_source", "KafkaRecord"),
    ("jetspark.core.pipeline.test_kit", "SimpleEvent"),
    *(
        ("jetspark.core.pipeline.items", name)
        for name in (
            "TimestampedEntry",
            "EarlyTimestampedEntry",
            "TimestampedItem",
            "EarlyTimestampedItem",
            "Tag",
            "ItemsByTag",
        )
    ),
}
"""The types of the items a member's sinks may write to the driver's named lists and maps:
plain values and jetspark's result types."""


class SilentPeerError(ConnectionError):
    """Nothing, not even a heartbeat, came from the other end for the liveness timeout."""


class RefusedMessageError(ConnectionError):
    """A member's message that is not one of the protocol's, or holds a type outside the
    allow-list: nothing in it was called, and the connection is dropped."""


class _RefusedTypeError(Exception):
    """A pickle named a type outside the allow-list (not an UnpicklingError: nothing that
    turns those into "corrupt" may hide it)."""

    def __init__(self, module: str, name: str) -> None:
        super().__init__(f"{module}.{name}")
        self.type_name = f"{module}.{name}"


class _AllowListUnpickler(pickle.Unpickler):
    """An unpickler that finds (imports) only the types of `allowed`."""

    def __init__(self, data: bytes | memoryview, allowed: frozenset[tuple[str, str]]) -> None:
        super().__init__(io.BytesIO(data))
        self._allowed = allowed

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._allowed:
            raise _RefusedTypeError(module, name)
        return super().find_class(module, name)


def _fields(payload: Any, *types: type) -> bool:
    """Whether `payload` is a tuple of values of `types`, in order."""
    return (
        type(payload) is tuple
        and len(payload) == len(types)
        and all(isinstance(value, kind) for value, kind in zip(payload, types, strict=True))
    )


def _facts(payload: Any) -> bool:
    return (
        type(payload) is dict
        and payload.keys() >= FAILURE_FIELDS
        and all(isinstance(value, (str, int, type(None))) for value in payload.values())
    )


_SHAPES: dict[str, Callable[[Any], bool]] = {
    HELLO: lambda payload: _fields(payload, str, int, int),
    PART: lambda payload: (
        _fields(payload, int, str, bytes, tuple, dict, str, list)
        and all(isinstance(sealed, SealedFiles) for sealed in payload[6])
    ),
    RESULTS: lambda payload: (
        type(payload) is list
        and all(_fields(r, str, str, bytes) and r[0] in (LIST, MAP) for r in payload)
    ),
    METRICS: lambda payload: isinstance(payload, JobMetrics),
    FINISHED: lambda payload: payload is None,
    FAILED: _facts,
    PENDING: lambda payload: (
        _fields(payload, int, list) and all(isinstance(name, str) for name in payload[1])
    ),
    HEARTBEAT: lambda payload: payload is None,
}
"""What the payload of each kind of a member's message is."""


def decode_from_member(body: bytes) -> tuple[str, Any]:
    """A member's message, decoded on the driver with the MESSAGE_TYPES allow-list and checked
    against its kind's shape; RefusedMessageError for anything else."""
    try:
        message = _AllowListUnpickler(body, MESSAGE_TYPES).load()
    except _RefusedTypeError as refused:
        raise RefusedMessageError(
            f"a message holds {refused.type_name}, which the driver does not decode from a member"
        ) from None
    except Exception as error:  # not a pickle at all, or a value its type refused
        raise RefusedMessageError(
            f"a message is no pickle of the protocol ({type(error).__name__}: {error})"
        ) from None
    shape = _SHAPES.get(message[0]) if type(message) is tuple and len(message) == 2 else None
    if shape is None or not shape(message[1]):
        raise RefusedMessageError(f"a message is none of the protocol's ({message!r:.80})")
    return message


def decode_results(
    records: list[tuple[str, str, bytes]], plain_data_only: bool
) -> list[tuple[str, str, list[Any]]]:
    """A RESULTS message's records, (kind, name, items), their items unpickled, or, with
    `plain_data_only` (the job's key is readable: module docstring), decoded with the
    ITEM_TYPES allow-list: JobFailedError naming the list or map and the type of an item of
    any other class. RefusedMessageError for a batch that is not one."""
    plain = plain_data_only
    return [(kind, name, _items(kind, name, items, plain)) for kind, name, items in records]


def _items(kind: str, name: str, payload: bytes, plain_data_only: bool) -> list[Any]:
    """The items of one batch of sink writes (serialization.decode_batch)."""
    loads = _allow_list_loads(ITEM_TYPES) if plain_data_only else pickle.loads
    try:
        return decode_batch(payload, loads)
    except _RefusedTypeError as refused:
        raise JobFailedError(
            f"a sink wrote to {kind} '{name}' an item of type {refused.type_name}, which the "
            "driver of a continuous job does not decode from its members (it decodes plain "
            "data only: None, bool, int, float, complex, str, bytes, tuples, lists, dicts, "
            "sets, datetimes, Decimal, Fraction, UUID and jetspark's result types, where the "
            "job's secret crosses the network readable, spark.jetspark.continuous."
            f"plaintextSecret=warn): write plain data to {kind} '{name}' "
            "(a tuple or dict of the item's fields, e.g. dataclasses.astuple(item)), or write "
            "such items through a file or Kafka sink"
        ) from None
    except Exception as error:  # not a batch, or a value its type refused
        raise RefusedMessageError(
            f"the writes to {kind} {name!r} are no batch of items ({type(error).__name__}: {error})"
        ) from None


def _allow_list_loads(allowed: frozenset[tuple[str, str]]) -> Callable[[memoryview], Any]:
    """`pickle.loads` finding only the types of `allowed`."""
    return lambda data: _AllowListUnpickler(data, allowed).load()


class ControlConnection:
    """One end of a control connection: `send` from any thread, `receive` from one; with a
    `liveness`, it sends heartbeats on a thread of its own until closed. `decode` turns a
    message's bytes into (kind, payload): a member trusts its driver (`pickle.loads`), the
    driver decodes a member's with `decode_from_member`."""

    def __init__(
        self,
        connection: socket.socket,
        frames: Frames,
        liveness: Liveness | None = None,
        decode: Callable[[bytes], tuple[str, Any]] = pickle.loads,
    ) -> None:
        connection.settimeout(None)  # silence is measured by `receive`, never by a send
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._frames = frames
        self._socket = connection
        self._send_lock = threading.Lock()
        self._received = bytearray(frames.early)
        self._liveness = liveness
        self._decode = decode
        self._closed = threading.Event()
        self.peer = frames.peer
        """`host:port` of the other end."""
        if liveness is not None:
            threading.Thread(
                target=self._beat, args=(liveness.interval,), name="jetspark-heartbeat", daemon=True
            ).start()

    def send(self, kind: str, payload: Any = None) -> None:
        """Sends one message (OSError when the other end is gone)."""
        body = cloudpickle.dumps((kind, payload), protocol=5)
        frame = bytearray()
        with self._send_lock:
            self._frames.seal(_LENGTH.pack(len(body)) + body, frame)
            self._socket.sendall(frame)

    def receive(self) -> tuple[str, Any] | None:
        """The next message other than a heartbeat, or None once the other end closed the
        connection (or broke it); frames.ForgedFrameError when a frame fails authentication,
        SilentPeerError when nothing came for the liveness timeout, what `decode` raises for a
        message it refuses."""
        while True:
            header = self._read(_LENGTH.size)
            if header is None:
                return None
            (length,) = _LENGTH.unpack(header)
            body = self._read(length)
            if body is None:
                return None
            message = self._decode(body)
            if message[0] != HEARTBEAT:
                return message

    def _read(self, size: int) -> bytes | None:
        """`size` authenticated bytes, or None at the end of the connection."""
        received = self._received
        while len(received) < size:
            self._wait_for_data()
            try:
                chunk = self._socket.recv(_READ_BYTES)
            except OSError:
                return None
            if not chunk:
                return None
            self._frames.open(chunk, received)
        data = bytes(received[:size])
        del received[:size]
        return data

    def _wait_for_data(self) -> None:
        if self._liveness is None or self._socket.fileno() < 0:
            return  # no limit, or closed by another thread: `recv` says so
        poll = select.poll()
        poll.register(self._socket, select.POLLIN)
        if not poll.poll(self._liveness.timeout * 1000):
            raise SilentPeerError(
                f"{self.peer} sent nothing, not even a heartbeat, for {self._liveness.timeout:g} s"
            )

    def _beat(self, interval: float) -> None:
        while not self._closed.wait(interval):
            try:
                self.send(HEARTBEAT)
            except OSError:
                return

    def close(self) -> None:
        """Closes the connection; a blocked `receive` on the other end returns None."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
