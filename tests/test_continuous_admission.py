"""Admission on a continuous job's listeners (core/spark/continuous/sockets.py, issue #44): a
flood of strangers cannot keep a member out. Unproven connections are bounded per source
address and in all, the oldest (silent ones first) dropped to make room; a peer silent past the
greeting's deadline is dropped; drops are logged as one line per interval; `accept` failing for
want of file descriptors comes back; a member's connection is tried again with backoff while
refused or dropped, then fails naming address, port and settings. Real sockets on loopback
(127.0.0.2 and up are other source addresses of it), injected clocks, no Spark."""

from __future__ import annotations

import dataclasses
import errno
import logging
import queue
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from proven_sockets import SECRET
from test_continuous_failures import FakeClock

from jetspark.core.spark.continuous.frames import MAGIC, ForgedFrameError, Frames, handshake
from jetspark.core.spark.continuous.member import MemberTask
from jetspark.core.spark.continuous.security import ChannelSecurity
from jetspark.core.spark.continuous.settings import HEARTBEAT_TIMEOUT, MEMBER_PORT
from jetspark.core.spark.continuous.sockets import (
    CONNECT_BACKOFF_FIRST,
    CONNECT_BACKOFF_LAST,
    GREETING_SECONDS,
    MAX_UNPROVEN,
    UNPROVEN_PER_SOURCE,
    Admission,
    Gate,
    Listener,
    UnreachableError,
    connect,
)

PURPOSE = "control"
WAIT = 60.0
"""A bound on any wait of the test (never reached unless something hangs)."""
FLOOD_THREADS = 48


@dataclasses.dataclass
class Served:
    gate: Gate
    address: tuple[str, int]
    admitted: queue.Queue[socket.socket]


def _accepting_handshake(connection: socket.socket) -> Frames:
    return handshake(connection, SECRET, PURPOSE, 0, initiator=False)


def _proving(connection: socket.socket) -> Frames:
    return handshake(connection, SECRET, PURPOSE, 1, initiator=True)


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """Starts gates on 127.0.0.1 (their listener as `wrap` makes it, if given) whose handshake
    is the real one; closes them at the end."""
    gates: list[Gate] = []

    def start(
        admission: Admission | None = None,
        wrap: Callable[[socket.socket], Listener] | None = None,
    ) -> Served:
        server = socket.create_server(("127.0.0.1", 0))
        listener = wrap(server) if wrap is not None else server
        admitted: queue.Queue[socket.socket] = queue.Queue()
        gate = Gate(
            listener,
            "the test's listener",
            _accepting_handshake,
            lambda connection, frames: admitted.put(connection),
            admission=admission or Admission(),
        )
        gates.append(gate)
        return Served(gate, server.getsockname(), admitted)

    yield start
    for gate in gates:
        gate.close()
        gate.join(WAIT)


def _stranger(address: tuple[str, int], source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(address, timeout=WAIT, source_address=(source, 0))


def _closed_by_peer(connection: socket.socket) -> bool:
    """True once the listener closed `connection` (waits up to WAIT for it)."""
    connection.settimeout(WAIT)
    try:
        while connection.recv(1 << 16):
            pass  # what the listener said before it closed
    except TimeoutError:
        return False
    except OSError:
        pass  # reset
    return True


def _open(connection: socket.socket) -> bool:
    """True while the listener has neither closed `connection` nor sent anything on it."""
    connection.setblocking(False)
    try:
        return bool(connection.recv(1))
    except BlockingIOError:
        return True


def _greeted(address: tuple[str, int], source: str) -> socket.socket:
    """A stranger that sent one byte and got the listener's greeting: its handshake runs."""
    connection = _stranger(address, source)
    connection.sendall(MAGIC[:1])
    greeting = b""
    while len(greeting) < len(MAGIC):
        greeting += connection.recv(len(MAGIC) - len(greeting))
    assert greeting == MAGIC
    return connection


def _close_all(connections: list[socket.socket]) -> None:
    for connection in connections:
        connection.close()


# ------------------------------------------------------------------------------ the flood


class Flood:
    """Threads that each hold a silent connection to one of `addresses` (in turn) and make a
    new one as soon as it is dropped, until `stop`; a refused one is tried again after
    REFUSED_PAUSE."""

    REFUSED_PAUSE = 0.01

    def __init__(self, addresses: list[tuple[str, int]], threads: int) -> None:
        self.connections = 0
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(addresses[index % len(addresses)],))
            for index in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, address: tuple[str, int]) -> None:
        while not self._stopped.is_set():
            try:
                connection = socket.create_connection(address, timeout=1.0)
            except OSError:
                self._stopped.wait(self.REFUSED_PAUSE)  # not listening (yet), or backlog full
                continue
            with self._lock:
                self.connections += 1
            with connection:
                while not self._stopped.is_set():
                    try:
                        if not connection.recv(1):
                            break  # dropped: reconnect at once
                    except TimeoutError:
                        continue  # still held: check the stop, hold on
                    except OSError:
                        break

    def stop(self) -> None:
        self._stopped.set()
        for thread in self._threads:
            thread.join(WAIT)


def test_a_flood_reconnecting_when_dropped_does_not_keep_a_handshaking_client_out(
    serve: Callable[..., Served],
) -> None:
    served = serve()
    flood = Flood([served.address], FLOOD_THREADS)
    try:
        for _ in range(int(WAIT * 100)):  # the flood is under way: many more than the bounds
            if flood.connections >= 4 * FLOOD_THREADS:
                break
            threading.Event().wait(0.01)
        assert flood.connections >= 4 * FLOOD_THREADS
        connection, frames = connect(
            served.address, WAIT, "member 1", "the test's listener", MEMBER_PORT, _proving
        )
        assert served.admitted.get(timeout=WAIT) is not None
        assert frames.peer_identity == 0
        connection.close()
    finally:
        flood.stop()


# ------------------------------------------------------------------------------ the bounds


def test_past_the_bound_of_one_source_its_oldest_unproven_connections_are_dropped(
    serve: Callable[..., Served],
) -> None:
    served = serve(Admission(clock=FakeClock()))
    crowd = [_stranger(served.address, "127.0.0.2") for _ in range(UNPROVEN_PER_SOURCE + 2)]
    other = _stranger(served.address, "127.0.0.3")
    try:
        assert all(_closed_by_peer(connection) for connection in crowd[:2])
        assert all(_open(connection) for connection in [*crowd[2:], other])
    finally:
        _close_all([*crowd, other])


def test_past_the_total_bound_the_oldest_unproven_connections_of_all_are_dropped(
    serve: Callable[..., Served],
) -> None:
    served = serve(Admission(clock=FakeClock()))
    sources = MAX_UNPROVEN // UNPROVEN_PER_SOURCE + 1
    crowd = [  # round the sources: none past its own bound
        _stranger(served.address, f"127.0.0.{2 + index % sources}")
        for index in range(MAX_UNPROVEN + 4)
    ]
    try:
        assert all(_closed_by_peer(connection) for connection in crowd[:4])
        assert all(_open(connection) for connection in crowd[4:])
    finally:
        _close_all(crowd)


def test_silent_connections_make_room_before_older_ones_in_their_handshake(
    serve: Callable[..., Served],
) -> None:
    served = serve(Admission(clock=FakeClock()))
    talking = _greeted(served.address, "127.0.0.2")
    silent = [_stranger(served.address, "127.0.0.2") for _ in range(UNPROVEN_PER_SOURCE)]
    try:
        assert _closed_by_peer(silent[0])
        assert all(_open(connection) for connection in [talking, *silent[1:]])
    finally:
        _close_all([talking, *silent])


def test_a_connection_silent_past_the_greeting_deadline_is_dropped(
    serve: Callable[..., Served],
) -> None:
    clock = FakeClock()
    served = serve(Admission(clock=clock))
    silent = _stranger(served.address, "127.0.0.2")
    talking = _greeted(served.address, "127.0.0.2")  # answered: the one before it is in too
    try:
        clock.now = GREETING_SECONDS
        assert _closed_by_peer(silent)
        assert _open(talking)  # it spoke: its handshake has its own budget (frames.py)
    finally:
        _close_all([talking, silent])


# ------------------------------------------------------------------------------ accept errors


class ShortOfDescriptors:
    """A listener whose `accept` fails with each of `failures` first, then accepts."""

    def __init__(self, server: socket.socket, failures: list[int]) -> None:
        self._server = server
        self._failures = failures

    def accept(self) -> tuple[socket.socket, Any]:
        if self._failures:
            code = self._failures.pop(0)
            raise OSError(code, f"injected {errno.errorcode[code]}")
        return self._server.accept()

    def shutdown(self, how: int) -> None:
        self._server.shutdown(how)

    def close(self) -> None:
        self._server.close()


def test_a_listener_out_of_file_descriptors_comes_back_and_admits_a_client(
    serve: Callable[..., Served], caplog: pytest.LogCaptureFixture
) -> None:
    failures = [errno.EMFILE] * 3 + [errno.ECONNABORTED, errno.ENFILE]
    with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
        served = serve(wrap=lambda server: ShortOfDescriptors(server, failures))
        connection, _ = connect(
            served.address, WAIT, "member 1", "the test's listener", MEMBER_PORT, _proving
        )
        served.admitted.get(timeout=WAIT)
    connection.close()
    assert not failures
    assert [r.getMessage() for r in caplog.records] == [
        "the test's listener: cannot accept connections (injected EMFILE); trying again every "
        "1 s at most"
    ]  # once per spell of failures: only an accepted connection ends one


# ------------------------------------------------------------------------------ the log


def test_dropped_connections_are_logged_as_one_line_per_interval(
    serve: Callable[..., Served], caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
        served = serve(Admission(clock=clock))
        crowd = [_stranger(served.address, "127.0.0.2") for _ in range(UNPROVEN_PER_SOURCE + 10)]
        assert all(_closed_by_peer(connection) for connection in crowd[:10])
        assert not caplog.records  # within the interval: nothing yet
        clock.now = 10.0
        assert all(_closed_by_peer(connection) for connection in crowd[10:])  # silent too long
        _wait_for(lambda: len(caplog.records) == 1)
        assert caplog.records[0].getMessage() == (
            "the test's listener: dropped 14 unproven connections from 127.0.0.2 (14) in the "
            "last 10 s: 10 made room for newer ones, 4 sent nothing within 5 s"
        )
        garbage = _stranger(served.address, "127.0.0.3")
        garbage.sendall(b"x" * 44)
        assert _closed_by_peer(garbage)
        served.gate.close()  # what was not logged yet is, at the close
    (_, line) = [r.getMessage() for r in caplog.records]
    peer = f"127.0.0.3:{garbage.getsockname()[1]}"
    assert line == (
        "the test's listener: dropped 1 unproven connection from 127.0.0.3 (1) in the last "
        f"10 s: 1 failed the handshake; the last failure: {peer}: {peer} does not speak "
        "jetspark's protocol"
    )
    _close_all([*crowd, garbage])


def _wait_for(condition: Callable[[], bool]) -> None:
    event = threading.Event()
    for _ in range(int(WAIT * 100)):
        if condition():
            return
        event.wait(0.01)
    raise AssertionError("not within the test's bound")


# ------------------------------------------------------------------------------ connecting


def test_a_refused_then_dropped_connection_is_tried_again_with_growing_jittered_pauses(
    serve: Callable[..., Served],
) -> None:
    clock = FakeClock()
    pauses: list[float] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))  # bound, not listening: refused
    dropping = threading.Thread(target=_drop_two, args=(server,))

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        clock.sleep(seconds)
        if len(pauses) == 2:
            server.listen()
            dropping.start()

    connection, frames = connect(
        server.getsockname(),
        WAIT,
        "member 1",
        "the test's listener",
        MEMBER_PORT,
        _proving,
        clock=clock,
        sleep=sleep,
    )
    assert frames.peer_identity == 0
    connection.close()
    dropping.join(WAIT)
    assert len(pauses) == 4  # two refused, two dropped
    for tries, pause in enumerate(pauses):
        ceiling = min(CONNECT_BACKOFF_LAST, CONNECT_BACKOFF_FIRST * 2**tries)
        assert ceiling / 2 <= pause <= ceiling


def _drop_two(server: socket.socket) -> None:
    """Drops the next two connections before their handshake, then proves the key."""
    for _ in range(2):
        server.accept()[0].close()
    connection, _ = server.accept()
    _accepting_handshake(connection)
    connection.close()
    server.close()


def test_a_peer_refusing_for_the_whole_window_fails_naming_address_port_and_settings() -> None:
    clock = FakeClock()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        port = server.getsockname()[1]
        with pytest.raises(UnreachableError) as failure:
            connect(
                ("127.0.0.1", port),
                30.0,
                "member 0 on 127.0.0.1",
                "member 1",
                MEMBER_PORT,
                _proving,
                clock=clock,
                sleep=clock.sleep,
            )
    message = str(failure.value)
    assert message.startswith(
        f"member 0 on 127.0.0.1 cannot reach member 1 at 127.0.0.1:{port} (Connection refused) "
        "after "
    )
    assert f"tries in 30 s ({HEARTBEAT_TIMEOUT})" in message
    assert f"({MEMBER_PORT}) must accept connections from every executor" in message
    assert clock.now <= 30.0


def test_a_peer_holding_another_secret_is_not_tried_again(
    serve: Callable[..., Served],
) -> None:
    served = serve()
    tries: list[int] = []

    def forged(connection: socket.socket) -> Frames:
        tries.append(1)
        return handshake(connection, b"another job's secret", PURPOSE, 1, initiator=True)

    with pytest.raises(ForgedFrameError):
        connect(served.address, WAIT, "member 1", "the test's listener", MEMBER_PORT, forged)
    assert tries == [1]


# ------------------------------------------------------------------------------ secrets


def test_a_member_task_shows_no_secret_in_its_repr() -> None:
    secret = b"s3cr3t-of-the-job-32-bytes-long!"
    task = MemberTask(
        plan=None,  # type: ignore[arg-type]
        driver=("127.0.0.1", 7100),
        token="run-1",
        security=ChannelSecurity(secret),
        store=None,
        settings=None,  # type: ignore[arg-type]
    )
    assert "s3cr3t" not in repr(task)
    assert "run-1" in repr(task)
