"""A continuous job's listener lets in a bounded number of connections that proved the key
(core/spark/continuous/sockets.py, issue #33): the coordinator's serves at most
CONNECTIONS_PER_MEMBER per member at once, and one more is dropped, logged naming its peer,
until the owner closed one of those it serves. Real handshakes over loopback, no Spark."""

from __future__ import annotations

import logging
import queue
import socket
from collections.abc import Iterator

import pytest
from proven_sockets import SECRET

from jetspark.core.spark.continuous.frames import Frames, handshake
from jetspark.core.spark.continuous.sockets import Gate

PURPOSE = "control"
WAIT = 60.0
"""A bound on any wait of the test (never reached unless something hangs)."""


@pytest.fixture
def gate() -> Iterator[tuple[Gate, tuple[str, int], queue.Queue[socket.socket]]]:
    """A gate that serves at most 2 proven connections; the test gets each one it serves."""
    server = socket.create_server(("127.0.0.1", 0))
    served: queue.Queue[socket.socket] = queue.Queue()

    def serve(connection: socket.socket, frames: Frames) -> None:
        served.put(connection)

    gate = Gate(
        server,
        "the test's coordinator",
        lambda connection: handshake(connection, SECRET, PURPOSE, 0, initiator=False),
        serve,
        max_open=lambda: 2,
    )
    try:
        yield gate, server.getsockname(), served
    finally:
        gate.close()
        gate.join(WAIT)


def _proven_connection(address: tuple[str, int]) -> socket.socket:
    connection = socket.create_connection(address, timeout=WAIT)
    handshake(connection, SECRET, PURPOSE, 1, initiator=True)
    return connection


def _closed_by_peer(connection: socket.socket) -> bool:
    try:
        return connection.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_proven_connection_past_the_bound_is_dropped_until_one_served_closes(
    gate: tuple[Gate, tuple[str, int], queue.Queue[socket.socket]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, address, served = gate
    first, second = _proven_connection(address), _proven_connection(address)
    serving = [served.get(timeout=WAIT), served.get(timeout=WAIT)]

    with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
        third = _proven_connection(address)
        assert _closed_by_peer(third)
    peer = f"127.0.0.1:{third.getsockname()[1]}"
    assert [r.getMessage() for r in caplog.records] == [
        f"the test's coordinator: dropped a connection from {peer}: 2 connections that proved "
        "the key are open already"
    ]
    assert served.empty()

    serving.pop().close()  # the owner is done with one: room for the next
    fourth = _proven_connection(address)
    serving.append(served.get(timeout=WAIT))
    for connection in (first, second, third, fourth, *serving):
        connection.close()
