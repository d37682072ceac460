"""Where a continuous job's connections listen and how they are made: the one place that opens
its sockets (the driver's coordinator, each member's listener, the connections to them).

A listener takes the first free port of its range (settings.PortRange: Spark's way, the
configured port, then the next ones up to `spark.port.maxRetries` more; 0 is any free port). A
port that cannot be bound, or a peer that cannot be reached, is an error naming the host and
the port, and the setting that decides it. A `Gate` lets in only the connections whose peer
proves the job's key (frames.py), a few at a time, and drops the others.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import threading
from collections.abc import Callable

from jetspark.core.spark.continuous.frames import Frames, address_of
from jetspark.core.spark.continuous.settings import PORT_RETRIES, PortRange

_log = logging.getLogger("jetspark.spark")

MAX_UNPROVEN = 16
"""How many connections of one listener may be in their handshake at once; more are closed at
once."""


class UnreachableError(ConnectionError):
    """A member could not connect to the driver's coordinator or to another member."""


def listen(host: str, ports: PortRange, what: str, host_from: str) -> socket.socket:
    """A listening socket for `what` on `host` (the address `host_from` gives), at the first
    port of `ports` it can bind."""
    failure: OSError | None = None
    for port in ports.candidates():
        try:
            return socket.create_server((host, port))
        except OSError as error:
            failure = error
            if error.errno != errno.EADDRINUSE:
                break  # another port of the range fails the same way
    assert failure is not None
    if failure.errno == errno.EADDRINUSE:
        advice = f"{ports.key} and {PORT_RETRIES} decide the ports tried"
    else:
        advice = f"is {host} ({host_from}) an address of this machine?"
    raise OSError(
        failure.errno,
        f"{what} cannot listen on {host} at {ports.text()}: {failure.strerror or failure}; "
        f"{advice}",
    ) from failure


def connect(address: tuple[str, int], timeout: float, who: str, what: str) -> socket.socket:
    """A connection from `who` to `what` at `address`, made within `timeout` seconds."""
    host, port = address
    try:
        return socket.create_connection(address, timeout=timeout)
    except OSError as error:
        reason = "no answer" if isinstance(error, TimeoutError) else error.strerror or error
        raise UnreachableError(
            f"{who} cannot reach {what} at {host}:{port} ({reason}): that address and port "
            "must accept connections from every executor (a firewall may drop them; "
            "docs/deploy.md, 'Continuous jobs on a cluster', lists the settings)"
        ) from error


class Gate:
    """Accepts connections on `server` from a thread of its own and runs each one's `handshake`
    on a thread of its own, at most MAX_UNPROVEN at once; a connection whose peer proves the key
    goes on to `admitted` on that thread while fewer than `max_open()` such connections are
    open, any other is closed and logged naming the peer. `close` closes the listener and
    every connection still in its handshake."""

    def __init__(
        self,
        server: socket.socket,
        what: str,
        handshake: Callable[[socket.socket], Frames],
        admitted: Callable[[socket.socket, Frames], None],
        max_open: Callable[[], int] | None = None,
    ) -> None:
        self._server = server
        self._what = what
        self._handshake = handshake
        self._admitted = admitted
        self._max_open = max_open
        self._lock = threading.Lock()
        self._unproven: set[socket.socket] = set()
        self._proven: list[socket.socket] = []
        """Connections let in; one its owner closed has no file descriptor any more."""
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._start(self._accept, "jetspark-accept")

    def _start(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed or len(self._unproven) >= MAX_UNPROVEN:
                    full = not self._closed
                    connection.close()
                    if full:
                        _log.warning(
                            "%s: dropped a connection from %s: %d others are still to prove "
                            "the key",
                            self._what,
                            address_of(connection),
                            MAX_UNPROVEN,
                        )
                    continue
                self._unproven.add(connection)
                self._start(self._prove, "jetspark-handshake", connection)

    def _prove(self, connection: socket.socket) -> None:
        peer = address_of(connection)
        try:
            frames = self._handshake(connection)
        except OSError as refused:
            with self._lock:
                closed = self._closed
                self._unproven.discard(connection)
            connection.close()
            if not closed:
                _log.warning("%s: dropped a connection from %s: %s", self._what, peer, refused)
            return
        with self._lock:
            self._unproven.discard(connection)
            closed = self._closed
            self._proven = [proven for proven in self._proven if proven.fileno() >= 0]
            limit = self._max_open() if self._max_open is not None else None
            full = not closed and limit is not None and len(self._proven) >= limit
            if not (closed or full):
                self._proven.append(connection)
        if full:
            _log.warning(
                "%s: dropped a connection from %s: %d connections that proved the key are open "
                "already",
                self._what,
                peer,
                limit,
            )
        if closed or full:
            connection.close()
            return
        self._admitted(connection, frames)

    def close(self) -> None:
        """Stops accepting and closes the connections still in their handshake."""
        with self._lock:
            self._closed = True
            unproven = list(self._unproven)
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (Linux)
        self._server.close()
        for connection in unproven:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def join(self, seconds: float) -> None:
        """Waits up to `seconds` for the gate's accept and handshake threads to end (after
        `close`)."""
        for thread in list(self._threads):
            if thread is not threading.current_thread():
                thread.join(seconds)
