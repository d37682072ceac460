"""Watermarks: the event-time progress markers that flow between processors (manual §7.2.3)."""

from __future__ import annotations

from dataclasses import dataclass

_IDLE_TIMESTAMP = 2**63 - 1


@dataclass(frozen=True, slots=True, order=True)
class Watermark:
    """Declares that no item with a timestamp below `timestamp` will follow on this stream."""

    timestamp: int

    def is_idle_message(self) -> bool:
        """True for IDLE_MESSAGE, which excludes an input from watermark coalescing."""
        return self.timestamp == _IDLE_TIMESTAMP


IDLE_MESSAGE = Watermark(_IDLE_TIMESTAMP)
"""Emitted by a source that has no data for a while: coalescing ignores it until it speaks again."""
