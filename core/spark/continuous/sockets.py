"""Where a continuous job's connections listen and how they are made: the one place that opens
its sockets (the driver's coordinator, each member's listener, the connections to them).

A listener takes the first free port of its range (settings.PortRange: Spark's way, the
configured port, then the next ones up to `spark.port.maxRetries` more; 0 is any free port). A
port that cannot be bound, or a peer that cannot be reached, is an error naming the host and
the port, and the setting that decides it.
"""

from __future__ import annotations

import errno
import socket

from jetspark.core.spark.continuous.settings import PORT_RETRIES, PortRange


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
