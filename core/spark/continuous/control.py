"""The control connection between a continuous job's driver and each member's Spark task.

Each member task opens one TCP connection to the driver's coordinator and says who it is; the
driver answers with what the run restores and tells it, in order, which snapshot to take, which
one is committed, and when the job has completed (or is cancelled, or the task is fenced: a newer
attempt of the stage has started). The member reports its snapshot parts, its sinks' writes, its
metrics, its end and a processor's failure. Messages are `(kind, payload)` pairs, pickled and
length-prefixed and authenticated: each message carries an HMAC-SHA256 tag under the run's
secret key (shipped to the tasks with their function), checked before anything is unpickled, so
another process that connects can neither run code nor speak for a member. Data between members
never passes here (see streams.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import pickle
import socket
import struct
import threading
from typing import Any

_LENGTH = struct.Struct("<I")
_TAG_BYTES = hashlib.sha256().digest_size

# member -> driver
HELLO = "hello"
"""(run token, member, stage attempt): the attempt is the lowest task attempt id of the stage
attempt's tasks, which they learn from each other through `allGather`."""
PART = "part"
"""(snapshot id, part name, tag, held, bytes per vertex): the member saved the snapshot."""
RESULTS = "results"
"""[(kind, name, payload)]: what the member's sinks wrote to named lists and maps."""
METRICS = "metrics"
"""Pickled JobMetrics of the member, sent now and then while it runs."""
FINISHED = "finished"
"""The member's processors all completed."""
FAILED = "failed"
"""The facts of a processor's failure (see failures.task_failure)."""

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


class ForgedMessageError(ConnectionError):
    """A message on a control connection was not written with the run's key."""


def tag(key: bytes, body: bytes) -> bytes:
    """The HMAC-SHA256 of `body` under `key`."""
    return hmac.digest(key, body, "sha256")


class ControlConnection:
    """One end of a control connection: `send` from any thread, `receive` from one."""

    def __init__(self, connection: socket.socket, key: bytes) -> None:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._key = key
        self._socket = connection
        self._send_lock = threading.Lock()
        self._reader = connection.makefile("rb")
        self.peer = connection.getpeername()

    def send(self, kind: str, payload: Any = None) -> None:
        """Sends one message (OSError when the other end is gone)."""
        body = pickle.dumps((kind, payload), protocol=5)
        frame = _LENGTH.pack(len(body)) + tag(self._key, body) + body
        with self._send_lock:
            self._socket.sendall(frame)

    def receive(self) -> tuple[str, Any] | None:
        """The next message, or None once the other end closed the connection (or broke it);
        ForgedMessageError when a message fails authentication."""
        try:
            header = self._reader.read(_LENGTH.size + _TAG_BYTES)
            if len(header) < _LENGTH.size + _TAG_BYTES:
                return None
            (length,) = _LENGTH.unpack_from(header)
            body = self._reader.read(length)
        except OSError:
            return None
        if len(body) < length:
            return None
        if not hmac.compare_digest(header[_LENGTH.size :], tag(self._key, body)):
            raise ForgedMessageError(f"a message from {self.peer} failed authentication")
        return pickle.loads(body)

    def close(self) -> None:
        """Closes the connection; a blocked `receive` on the other end returns None."""
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self._socket.close()
