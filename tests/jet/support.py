"""What the ported Jet tests share: an injected clock and Jet's `doAndDrain` loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jetspark.core.test_support import TestOutbox

MAX_ATTEMPTS = 10
"""Calls a callback may take to finish while its output is drained after each (Jet: 10)."""


class Clock:
    """An injected clock in milliseconds, set by the test (Jet's `MockClock`)."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def do_and_drain(action: Callable[[], bool], outbox: TestOutbox, drained: list[Any]) -> None:
    """Calls `action` until it returns True, moving ordinal 0's output into `drained` after
    each call (Jet's `doAndDrain` with `drainQueueAndReset`)."""
    for _ in range(MAX_ATTEMPTS):
        done = action()
        outbox.drain_queue(0, drained)
        if done:
            return
    raise AssertionError(f"action not done in {MAX_ATTEMPTS} attempts")
