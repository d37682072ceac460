"""Watermarks: the event-time progress markers that flow between processors (manual §7.2.3)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

_IDLE_TIMESTAMP = 2**63 - 1


@dataclass(frozen=True, slots=True, order=True)
class Watermark:
    """Declares that no item with a timestamp below `timestamp` will follow on this stream."""

    timestamp: int

    def __post_init__(self) -> None:
        """Refuses a timestamp that is not an int (a bool, a float, NaN, a str...) at once,
        rather than truncating it or failing later inside watermark coalescing."""
        timestamp = self.timestamp
        if type(timestamp) is int:
            return
        if isinstance(timestamp, numbers.Integral) and not isinstance(timestamp, bool):
            object.__setattr__(self, "timestamp", int(timestamp))  # numpy ints and the like
            return
        raise TypeError(
            f"Watermark timestamp must be an int, got {type(timestamp).__name__} {timestamp!r}"
        )

    def is_idle_message(self) -> bool:
        """True for IDLE_MESSAGE, which excludes an input from watermark coalescing."""
        return self.timestamp == _IDLE_TIMESTAMP


IDLE_MESSAGE = Watermark(_IDLE_TIMESTAMP)
"""Emitted by a source that has no data for a while: coalescing ignores it until it speaks again."""
