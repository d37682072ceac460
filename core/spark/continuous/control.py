"""The control connection between a continuous job's driver and each member's Spark task.

Each member task opens one TCP connection to the driver's coordinator and says who it is; the
driver answers with what the run restores and tells it, in order, which snapshot to take, which
one is committed, and when the job has completed (or is cancelled, or the task is fenced: a newer
attempt of the stage has started). The member reports its snapshot parts, its sinks' writes, its
metrics, its end and a processor's failure. Messages are `(kind, payload)` pairs, pickled with
cloudpickle (as the task's own function is: a user's class defined in the driver's script, such
as a snapshot store's subclass in what a run restores, reaches the member by value) and
length-prefixed, written through the connection's authenticated frames (frames.py: keys of this
connection derived from the job's secret, shipped to the tasks with their function); nothing is
unpickled before its frame passed the check, so another process that connects, or injects into
a connection, can neither run code nor speak for a member. Data between members never passes
here (see streams.py).

Liveness: each end sends a heartbeat every `Liveness.interval` from a thread of its own, whatever
else it does (a restore or a save of many minutes, a snapshot interval of ten), and counts the
other end as lost once nothing at all came from it for `Liveness.timeout` while it was reading:
an idle job is a healthy one, and time an end spends on a message it received is not silence.
"""

from __future__ import annotations

import contextlib
import pickle
import select
import socket
import struct
import threading
from typing import Any

from pyspark import cloudpickle

from jetspark.core.spark.continuous.frames import Frames
from jetspark.core.spark.continuous.settings import Liveness

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
"""Pickled JobMetrics of the member, sent now and then while it runs."""
FINISHED = "finished"
"""The member's processors all completed."""
FAILED = "failed"
"""The facts of a processor's failure (see failures.task_failure)."""
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


class SilentPeerError(ConnectionError):
    """Nothing, not even a heartbeat, came from the other end for the liveness timeout."""


class ControlConnection:
    """One end of a control connection: `send` from any thread, `receive` from one; with a
    `liveness`, it sends heartbeats on a thread of its own until closed."""

    def __init__(
        self, connection: socket.socket, frames: Frames, liveness: Liveness | None = None
    ) -> None:
        connection.settimeout(None)  # silence is measured by `receive`, never by a send
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._frames = frames
        self._socket = connection
        self._send_lock = threading.Lock()
        self._received = bytearray(frames.early)
        self._liveness = liveness
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
        SilentPeerError when nothing came for the liveness timeout."""
        while True:
            header = self._read(_LENGTH.size)
            if header is None:
                return None
            (length,) = _LENGTH.unpack(header)
            body = self._read(length)
            if body is None:
                return None
            message = pickle.loads(body)
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
