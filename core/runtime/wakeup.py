"""Waking an idle tasklet driver when another thread gives it input, instead of polling.

A driver (a member's cooperative loop, or the thread of a non-cooperative tasklet) that found
nothing to do waits briefly before its next round (member.Backoff). Input pushed into its queues
by another thread — a non-cooperative source feeding the cooperative loop, the loop feeding a
non-cooperative sink — ends that wait at once: each queue notifies its consumer's Wakeup, which
costs two attribute writes while the driver is busy and one byte on a socket pair while it waits.
"""

from __future__ import annotations

import contextlib
import select
import socket
from collections.abc import Callable


class Wakeup:
    """One driver's wake-up: `notify()` from any thread; `begin_round()` and `wait()` from the
    driver.

    The protocol is free of lost wake-ups: the driver clears `notified` before a round and, when
    the round did nothing, sets `waiting` before it looks at `notified` again; a producer sets
    `notified` after its push and sends a byte only when it then sees `waiting`. Either the driver
    sees the notification, or the producer sees the driver waiting.
    """

    __slots__ = ("_receiver", "_sender", "notified", "waiting")

    def __init__(self) -> None:
        self._receiver, self._sender = socket.socketpair()
        self._receiver.setblocking(False)
        self._sender.setblocking(False)
        self.notified = False
        """Input arrived since the driver's round began."""
        self.waiting = False
        """The driver is waiting (or about to): a notification must send a byte."""

    def fileno(self) -> int:
        """Readable while a notification waits to be taken (for a driver's selector)."""
        return self._receiver.fileno()

    def notify(self) -> None:
        """Input arrived for the driver: ends its wait, or keeps it from starting one."""
        self.notified = True
        if self.waiting:
            # OSError: bytes already fill the buffer, or the runtime has ended
            with contextlib.suppress(OSError):
                self._sender.send(b"\0")

    def begin_round(self) -> None:
        """The driver starts a round: notifications from now on count for its next wait."""
        self.notified = False

    def wait(self, seconds: float, block: Callable[[float], object] | None = None) -> None:
        """Waits up to `seconds` unless input arrived since the round began. `block(seconds)`
        must return once `fileno()` is readable (a selector watching it with other sockets);
        the default watches this wake-up alone."""
        self.waiting = True
        try:
            if not self.notified:
                (block or self._block)(seconds)
        finally:
            self.waiting = False
        # takes this wait's notification bytes (a late one ends the next wait early)
        with contextlib.suppress(BlockingIOError):
            self._receiver.recv(4096)

    def _block(self, seconds: float) -> None:
        select.select((self._receiver,), (), (), seconds)

    def close(self) -> None:
        """Releases the socket pair; a notification after this does nothing."""
        self._sender.close()
        self._receiver.close()
