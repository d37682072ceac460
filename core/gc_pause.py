"""Python's cyclic garbage collector, paused while a snapshot is built or taken apart.

A processor saving a million keys creates a million or more objects in one callback, and
decoding or restoring that state as many again. Each of those allocations counts towards the
collector's thresholds, so it runs again and again meanwhile, and its full collections scan
every object the process holds, the new ones included: measured on a window of 500,000 keys,
building the snapshot entries took 0.41 s with the collector on and 0.20 s with it paused
(bench/PROFILE.md, issue 45). Paused, it runs once afterwards, as usual.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType


class _PausedGC:
    """`with paused_gc:` pauses the collector for the block, unless it was off already; blocks
    on several threads nest: it runs again once the last one has left."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._resume = False

    def __enter__(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._depth += 1

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._resume:
                gc.enable()


paused_gc = _PausedGC()
"""The process's one pause of the collector (module docstring)."""
