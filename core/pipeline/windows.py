"""WindowDefinition: the windows `stream_stage.window(...)` aggregates over (manual §4.12)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from jetspark.processors.windowing import SlidingWindowPolicy


class WindowKind(enum.Enum):
    """Which kind of window a WindowDefinition describes."""

    SLIDING = "sliding"
    TUMBLING = "tumbling"
    SESSION = "session"


@dataclass(frozen=True)
class WindowDefinition:
    """A sliding, tumbling or session window, with sizes in the units of the event timestamps."""

    kind: WindowKind
    window_size: int = 0
    slide_by: int = 0
    session_timeout: int = 0
    early_results_period: int = 0
    """Milliseconds between the partial results of open windows (0: none; Jet 4)."""

    @staticmethod
    def sliding(window_size: int, slide_by: int) -> WindowDefinition:
        """Windows of `window_size` advancing by `slide_by` (a divisor of the size)."""
        _check_positive(window_size=window_size, slide_by=slide_by)
        SlidingWindowPolicy(frame_size=slide_by, window_size=window_size)  # validates the pair
        return WindowDefinition(WindowKind.SLIDING, window_size, slide_by)

    @staticmethod
    def tumbling(window_size: int) -> WindowDefinition:
        """Back-to-back windows of `window_size`."""
        _check_positive(window_size=window_size)
        return WindowDefinition(WindowKind.TUMBLING, window_size, window_size)

    @staticmethod
    def session(session_timeout: int) -> WindowDefinition:
        """Bursts of events per key, closed after `session_timeout` without an event."""
        _check_positive(session_timeout=session_timeout)
        return WindowDefinition(WindowKind.SESSION, session_timeout=session_timeout)

    def set_early_results_period(self, early_results_period_ms: int) -> WindowDefinition:
        """This definition, also emitting every `early_results_period_ms` the partial results
        of the windows that hold data but are still open (each marked `is_early`); the final
        result follows when the watermark closes the window (Jet 4's `setEarlyResultsPeriod`;
        0 turns it off)."""
        value = early_results_period_ms
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(
                f"WindowDefinition: early_results_period must be an int >= 0 (ms), got {value!r}"
            )
        return replace(self, early_results_period=value)

    @property
    def frame_size(self) -> int:
        """The step at which results are emitted (0 for session windows)."""
        return self.slide_by

    def policy(self) -> SlidingWindowPolicy:
        """The Core API window policy of a sliding or tumbling window."""
        if self.kind is WindowKind.SESSION:
            raise ValueError("a session window has no sliding window policy")
        return SlidingWindowPolicy(frame_size=self.slide_by, window_size=self.window_size)

    def describe(self) -> str:
        """The default name of a stage aggregating over this window (Jet's)."""
        return f"{self.kind.value}-window"


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"WindowDefinition: {name} must be an int >= 1, got {value!r}")
