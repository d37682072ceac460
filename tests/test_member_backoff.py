"""A member's idle backoff (runtime/member.py): doubling from 10 µs to 1 ms, then, once nothing
moved for QUIET_SECONDS, QUIET_BACKOFF_SECONDS at a time so a quiet member costs little of a
core; progress starts it over. The clock is the test's."""

from __future__ import annotations

import pytest

from jetspark.core.runtime import member
from jetspark.core.runtime.member import (
    MAX_BACKOFF_SECONDS,
    MIN_BACKOFF_SECONDS,
    QUIET_BACKOFF_SECONDS,
    QUIET_SECONDS,
    Backoff,
)


class Clock:
    """Time that passes only in the driver's waits, which it records."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(member.time, "monotonic", fake.monotonic)
    return fake


def test_a_driver_idles_longer_only_once_quiet_and_starts_over_after_progress(clock: Clock) -> None:
    backoff = Backoff()
    while clock.now < 100.0 + QUIET_SECONDS + 0.01:
        backoff.idle(clock.wait)
    assert clock.waits[0] == MIN_BACKOFF_SECONDS
    at_cap = [wait for wait in clock.waits if wait == MAX_BACKOFF_SECONDS]
    assert len(at_cap) >= int(QUIET_SECONDS / MAX_BACKOFF_SECONDS) - 1
    assert max(clock.waits) <= QUIET_BACKOFF_SECONDS
    backoff.idle(clock.wait)
    assert clock.waits[-1] == QUIET_BACKOFF_SECONDS
    backoff.reset()
    backoff.idle(clock.wait)
    assert clock.waits[-1] == MIN_BACKOFF_SECONDS
