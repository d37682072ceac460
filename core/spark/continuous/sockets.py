"""Where a continuous job's connections listen and how they are made: the one place that opens
its sockets (the driver's coordinator, each member's listener, the connections to them).

A listener takes the first free port of its range (settings.PortRange: Spark's way, the
configured port, then the next ones up to `spark.port.maxRetries` more; 0 is any free port). A
port that cannot be bound is an error naming the host and the port, and the setting that
decides it; a peer that refuses, resets or drops a connection is tried again with backoff for
the heartbeat timeout before that is an error naming it too. A `Gate` lets in only the
connections whose peer proves the job's key (frames.py) and bounds the ones that have not yet,
per source address and in all, so that a flood of strangers cannot keep a member out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import random
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from jetspark.core.spark.continuous.frames import Frames, HandshakeError
from jetspark.core.spark.continuous.settings import HEARTBEAT_TIMEOUT, PORT_RETRIES, PortRange

_log = logging.getLogger("jetspark.spark")

UNPROVEN_PER_SOURCE = 4
"""How many connections from one address a listener keeps before they proved the key: a member
makes one at a time per listener, so a few leave room for a retry and for members sharing a
host, while one stranger's flood holds no more than these."""
MAX_UNPROVEN = 64
"""How many connections a listener keeps in all before they proved the key: room for 16 sources
at their bound, a few file descriptors and threads of the driver's or a member's budget."""
GREETING_SECONDS = 5.0
"""How long a connection may stay silent before its first byte: a member greets at once, so
only a stranger (or a process stalled for seconds, which then retries) is dropped by it."""
DROP_LOG_SECONDS = 10.0
"""How often a listener logs the unproven connections it dropped (one line for all of them)."""
ACCEPT_PAUSE_FIRST = 0.05
ACCEPT_PAUSE_LAST = 1.0
"""An `accept` that fails for want of file descriptors or memory is tried again after
ACCEPT_PAUSE_FIRST seconds, doubling up to ACCEPT_PAUSE_LAST while it keeps failing."""
CONNECT_BACKOFF_FIRST = 0.05
CONNECT_BACKOFF_LAST = 2.0
"""A connection refused, reset or dropped in its handshake is tried again after a jittered
wait of up to CONNECT_BACKOFF_FIRST seconds, doubling up to CONNECT_BACKOFF_LAST."""

_SWEEP_SECONDS = 0.25
"""How often (real time) a gate looks for silent connections past GREETING_SECONDS and for a
log line that is due."""
_SCARCE = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
"""`accept` errors that last a while: tried again after a pause."""
_PASSING = frozenset(
    {
        errno.ECONNABORTED,
        errno.EPROTO,
        errno.EPERM,
        errno.EINTR,
        errno.ENETDOWN,
        errno.ENOPROTOOPT,
        errno.EHOSTDOWN,
        errno.ENONET,
        errno.EHOSTUNREACH,
        errno.EOPNOTSUPP,
        errno.ENETUNREACH,
        errno.ETIMEDOUT,
    }
)
"""`accept` errors of one connection (Linux passes a new connection's network errors on): tried
again at once."""
_RETRIED = (
    ConnectionRefusedError,
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    HandshakeError,
)
"""How a connection attempt fails when its listener is not up yet or dropped it: tried again."""

_Proof = TypeVar("_Proof")


class UnreachableError(ConnectionError):
    """A member could not connect to the driver's coordinator or to another member."""


class Listener(Protocol):
    """What a Gate uses of its listening socket."""

    def accept(self) -> tuple[socket.socket, Any]: ...

    def shutdown(self, how: int) -> None: ...

    def close(self) -> None: ...


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


def connect(
    address: tuple[str, int],
    window: float,
    who: str,
    what: str,
    port_setting: str,
    prove: Callable[[socket.socket], _Proof],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[socket.socket, _Proof]:
    """A connection from `who` to `what` at `address` and what `prove` (its handshake) made of
    it. Refused, reset or dropped before the proof, it is tried again with capped, jittered
    exponential backoff until `window` seconds (the heartbeat timeout) passed, then fails with
    an UnreachableError naming the address and `port_setting`, the setting of its port."""
    host, port = address
    deadline = clock() + window
    tries = 0
    while True:
        tries += 1
        try:
            return _attempt(address, max(deadline - clock(), 0.001), prove)
        except _RETRIED as error:
            ceiling = min(CONNECT_BACKOFF_LAST, CONNECT_BACKOFF_FIRST * 2 ** (tries - 1))
            pause = random.uniform(ceiling / 2, ceiling)
            if clock() + pause < deadline:
                sleep(pause)
                continue
            failure: OSError = error
        except TimeoutError as error:
            failure = error
        reason = "no answer" if isinstance(failure, TimeoutError) else failure.strerror
        raise UnreachableError(
            f"{who} cannot reach {what} at {host}:{port} ({reason or failure}) after {tries} "
            f"tries in {window:g} s ({HEARTBEAT_TIMEOUT}): that address and port "
            f"({port_setting}) must accept connections from every executor (a firewall may "
            "drop them; docs/deploy.md, 'Continuous jobs on a cluster', lists the settings)"
        ) from failure


def _attempt(
    address: tuple[str, int], timeout: float, prove: Callable[[socket.socket], _Proof]
) -> tuple[socket.socket, _Proof]:
    """One try of `connect`: the connection is closed unless `prove` succeeds."""
    connection = socket.create_connection(address, timeout=timeout)
    try:
        return connection, prove(connection)
    except BaseException:
        connection.close()
        raise


@dataclasses.dataclass(frozen=True)
class Admission:
    """How a Gate treats connections that have not proven the key yet (module constants);
    `clock` (seconds) times their greeting and the log of the dropped ones."""

    per_source: int = UNPROVEN_PER_SOURCE
    total: int = MAX_UNPROVEN
    greeting_seconds: float = GREETING_SECONDS
    log_seconds: float = DROP_LOG_SECONDS
    clock: Callable[[], float] = time.monotonic


@dataclasses.dataclass
class _Unproven:
    source: str
    """The peer's host, as `accept` gave it."""
    peer: str
    """`host:port`, for messages."""
    arrived: float
    greeted: bool = False
    """The peer sent its first bytes: its handshake runs."""


_MADE_ROOM = "made room for newer ones"
_SILENT = "sent nothing within {seconds:g} s"
_FAILED = "failed the handshake"


class _DropLog:
    """Counts a listener's dropped unproven connections by source and reason, and logs them
    as one line once `seconds` passed since the first one it has not logged."""

    def __init__(self, what: str, seconds: float, clock: Callable[[], float]) -> None:
        self._what = what
        self._seconds = seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._sources: Counter[str] = Counter()
        self._reasons: Counter[str] = Counter()
        self._last_failure = ""

    def note(self, source: str, reason: str, failure: str = "") -> None:
        """One dropped connection from `source`; `failure` says how its handshake failed."""
        with self._lock:
            if self._since is None:
                self._since = self._clock()
            self._sources[source] += 1
            self._reasons[reason] += 1
            self._last_failure = failure or self._last_failure

    def flush(self, due_only: bool) -> None:
        """Logs what was noted (when its interval is over, with `due_only`)."""
        with self._lock:
            if self._since is None or (due_only and self._clock() - self._since < self._seconds):
                return
            sources, reasons, failure = self._sources, self._reasons, self._last_failure
            self._since, self._sources, self._reasons = None, Counter(), Counter()
            self._last_failure = ""
        total = sum(sources.values())
        shown = sources.most_common(5)
        listed = ", ".join(f"{host} ({count:,})" for host, count in shown)
        if len(sources) > len(shown):
            listed += f" and {len(sources) - len(shown)} more addresses"
        why = ", ".join(f"{count:,} {reason}" for reason, count in reasons.most_common())
        last = f"; the last failure: {failure}" if failure else ""
        _log.warning(
            "%s: dropped %s unproven connection%s from %s in the last %g s: %s%s",
            self._what,
            f"{total:,}",
            "" if total == 1 else "s",
            listed,
            self._seconds,
            why,
            last,
        )


class Gate:
    """Accepts connections on `server` from a thread of its own and runs each one's `handshake`
    on a thread of its own once the peer sent its first bytes; a connection whose peer proves
    the key goes on to `admitted` on that thread while fewer than `max_open()` such connections
    are open, any other is closed (and logged naming the peer).

    Unproven connections are bounded by `admission`: past `per_source` from one address the
    oldest of that address is dropped, past `total` the oldest of all, silent ones (no byte
    yet) before those in their handshake, never the one arriving, so a member that greets at
    once gets its handshake run however many strangers come after it; one silent for
    `greeting_seconds` is dropped. The dropped ones are logged once per `log_seconds` with
    their addresses and counts. `accept` failing for want of resources is tried again after a
    pause, a failed connection at once. `close` closes the listener and every connection still
    in its handshake."""

    def __init__(
        self,
        server: Listener,
        what: str,
        handshake: Callable[[socket.socket], Frames],
        admitted: Callable[[socket.socket, Frames], None],
        max_open: Callable[[], int] | None = None,
        admission: Admission = Admission(),
    ) -> None:
        self._server = server
        self._what = what
        self._handshake = handshake
        self._admitted = admitted
        self._max_open = max_open
        self._admission = admission
        self._drops = _DropLog(what, admission.log_seconds, admission.clock)
        self._lock = threading.Lock()
        self._unproven: dict[socket.socket, _Unproven] = {}
        """Oldest first."""
        self._per_source: Counter[str] = Counter()
        self._proven: list[socket.socket] = []
        """Connections let in; one its owner closed has no file descriptor any more."""
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._start(self._accept, "jetspark-accept")
        self._start(self._sweep, "jetspark-gate-sweep")

    def _start(self, target: Callable[..., None], name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _accept(self) -> None:
        pause = ACCEPT_PAUSE_FIRST
        while True:
            try:
                connection, address = self._server.accept()
            except OSError as error:
                if self._closed.is_set():
                    return
                if error.errno in _PASSING:
                    continue
                if error.errno not in _SCARCE:
                    _log.error("%s: stopped accepting connections: %s", self._what, error)
                    return
                if pause == ACCEPT_PAUSE_FIRST:
                    _log.warning(
                        "%s: cannot accept connections (%s); trying again every %g s at most",
                        self._what,
                        error.strerror or error,
                        ACCEPT_PAUSE_LAST,
                    )
                if self._closed.wait(pause):
                    return
                pause = min(2 * pause, ACCEPT_PAUSE_LAST)
                continue
            pause = ACCEPT_PAUSE_FIRST
            self._let_in(connection, address)

    def _let_in(self, connection: socket.socket, address: Any) -> None:
        """Takes `connection` into its handshake, dropping an older one past a bound."""
        source, peer = _source_and_peer(address)
        arrived = self._admission.clock()
        with self._lock:
            if self._closed.is_set():
                connection.close()
                return
            if self._per_source[source] >= self._admission.per_source:
                self._drop(self._victim(source), _MADE_ROOM)
            elif len(self._unproven) >= self._admission.total:
                self._drop(self._victim(None), _MADE_ROOM)
            self._unproven[connection] = _Unproven(source, peer, arrived)
            self._per_source[source] += 1
            self._start(self._prove, "jetspark-handshake", connection)

    def _victim(self, source: str | None) -> socket.socket:
        """The oldest silent unproven connection (of `source`, if given), else the oldest."""
        candidates = [
            connection
            for connection, unproven in self._unproven.items()
            if source is None or unproven.source == source
        ]
        return next(iter(self._silent(candidates)), candidates[0])

    def _silent(self, connections: list[socket.socket]) -> list[socket.socket]:
        """Those of `connections` (unproven) whose peer has not sent a byte, oldest first."""
        poller = select.poll()
        for connection in connections:
            poller.register(connection, select.POLLIN)
        readable = {descriptor for descriptor, _ in poller.poll(0)}
        return [
            connection
            for connection in connections
            if not self._unproven[connection].greeted and connection.fileno() not in readable
        ]

    def _take(self, connection: socket.socket) -> _Unproven | None:
        """Removes `connection` from the unproven ones, if there (the caller holds the lock)."""
        unproven = self._unproven.pop(connection, None)
        if unproven is not None:
            self._per_source[unproven.source] -= 1
            if not self._per_source[unproven.source]:
                del self._per_source[unproven.source]
        return unproven

    def _drop(self, connection: socket.socket, reason: str) -> None:
        """Counts `connection` dropped and wakes its handshake thread, which closes it (the
        caller holds the lock)."""
        unproven = self._take(connection)
        assert unproven is not None
        self._drops.note(unproven.source, reason)
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)

    def _sweep(self) -> None:
        """Drops the connections silent past the greeting's deadline; logs the drops when due."""
        silent_for = self._admission.greeting_seconds
        while not self._closed.wait(_SWEEP_SECONDS):
            now = self._admission.clock()
            with self._lock:
                late = [
                    connection
                    for connection, unproven in self._unproven.items()
                    if now - unproven.arrived >= silent_for
                ]
                for connection in self._silent(late):
                    self._drop(connection, _SILENT.format(seconds=silent_for))
            self._drops.flush(due_only=True)

    def _prove(self, connection: socket.socket) -> None:
        if not self._greeted(connection):
            connection.close()  # dropped, or the gate closed
            return
        try:
            frames = self._handshake(connection)
        except OSError as refused:
            with self._lock:
                unproven = self._take(connection)
            if unproven is not None:
                self._drops.note(unproven.source, _FAILED, f"{unproven.peer}: {refused}")
            connection.close()
            return
        self._proven_in(connection, frames)

    def _greeted(self, connection: socket.socket) -> bool:
        """Waits for the peer's first bytes (or its end, or a drop); False once dropped."""
        poller = select.poll()
        poller.register(connection, select.POLLIN)
        poller.poll()
        with self._lock:
            unproven = self._unproven.get(connection)
            if unproven is not None:
                unproven.greeted = True
        return unproven is not None

    def _proven_in(self, connection: socket.socket, frames: Frames) -> None:
        """Hands a connection that proved the key on to `admitted`, if there is room."""
        with self._lock:
            unproven = self._take(connection)  # None: dropped meanwhile, or the gate closed
            self._proven = [proven for proven in self._proven if proven.fileno() >= 0]
            limit = self._max_open() if self._max_open is not None else None
            full = unproven is not None and limit is not None and len(self._proven) >= limit
            if unproven is not None and not full:
                self._proven.append(connection)
        if unproven is None:
            connection.close()
            return
        if full:
            _log.warning(
                "%s: dropped a connection from %s: %d connections that proved the key are open "
                "already",
                self._what,
                unproven.peer,
                limit,
            )
            connection.close()
            return
        self._admitted(connection, frames)

    def close(self) -> None:
        """Stops accepting and closes the connections still in their handshake; logs the drops
        not logged yet."""
        with self._lock:
            self._closed.set()
            unproven = list(self._unproven)
            self._unproven.clear()
            self._per_source.clear()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (Linux)
        self._server.close()
        for connection in unproven:  # their handshake threads close them
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._drops.flush(due_only=False)

    def join(self, seconds: float) -> None:
        """Waits up to `seconds` for the gate's accept and handshake threads to end (after
        `close`)."""
        for thread in list(self._threads):
            if thread is not threading.current_thread():
                thread.join(seconds)


def _source_and_peer(address: Any) -> tuple[str, str]:
    """(host, `host:port`) of an address `accept` returned."""
    if isinstance(address, tuple):
        return str(address[0]), f"{address[0]}:{address[1]}"
    return repr(address), repr(address)
