"""Two ends of a loopback connection after their handshake (core/spark/continuous/frames.py),
for tests of what runs over a continuous job's connections without Spark."""

from __future__ import annotations

import socket
import threading

from jetspark.core.spark.continuous.frames import Frames, handshake
from jetspark.core.spark.continuous.security import TlsMaterial

SECRET = b"k" * 32


def proven_pair(
    purpose: str = "test", secret: bytes = SECRET, tls: TlsMaterial | None = None
) -> tuple[tuple[socket.socket, Frames], tuple[socket.socket, Frames]]:
    """((initiator's socket, its frames), (acceptor's socket, its frames)): blocking TCP
    sockets on loopback, without Nagle's delay as the job's own; over TLS with `tls`."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        initiator = socket.create_connection(server.getsockname())
        acceptor, _ = server.accept()
    for end in (initiator, acceptor):
        end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    proven: dict[str, Frames] = {}

    def accept() -> None:
        proven["acceptor"] = handshake(
            acceptor, secret, purpose, 1, initiator=False, tls=tls and tls.context(True)
        )

    thread = threading.Thread(target=accept)
    thread.start()
    proven["initiator"] = handshake(
        initiator, secret, purpose, 0, initiator=True, tls=tls and tls.context(False)
    )
    thread.join()
    return (initiator, proven["initiator"]), (acceptor, proven["acceptor"])
