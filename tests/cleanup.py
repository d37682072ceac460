"""Ending a test run by a signal runs its teardown: SIGTERM (a CI timeout, `kill`) is turned
into the KeyboardInterrupt that Ctrl-C raises, so pytest unwinds as for Ctrl-C and every
fixture stops what it started (the standalone clusters' JVMs run in process groups of their
own, which nothing else would stop)."""

from __future__ import annotations

import signal
import threading
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def end_runs_by_signal_with_teardown() -> None:
    """Makes SIGTERM raise KeyboardInterrupt in the main thread (SIGINT does already)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
