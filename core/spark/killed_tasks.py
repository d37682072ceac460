"""What the tasks Spark kills print on stderr, recognised so that a quiet console can drop it.

When Spark kills a task (a cancelled job, a stopped context, Ctrl-C), the JVM closes the socket
of the Python worker running it while that worker still has output to flush; PySpark's daemon
then prints the worker's `BrokenPipeError`, with a traceback through its own frames only. A
killed barrier task's helper thread (`accept-connections`, which serves BarrierTaskContext)
dies of the TaskKilledException, which the JVM prints as an uncaught exception. Both reach the
executor's stderr, which on a local master is the driver JVM's. The task's end is reported by
the job itself (JobCancelledError, JobFailedError), so neither says anything new, and both read
as failures.
"""

from __future__ import annotations

import re

_TRACEBACK = "Traceback (most recent call last):"
_FRAME = re.compile(r'^  File "(?P<path>[^"]*)", line \d+')
_BROKEN_CONNECTION = ("BrokenPipeError", "ConnectionResetError")
_PYSPARK_FRAME = re.compile(r"[/\\]pyspark[/\\](daemon|worker|serializers|util)\.py$")
_KILLED_TASK_THREAD = re.compile(
    r'^Exception in thread "[^"]*" org\.apache\.spark\.TaskKilledException(: .*)?$'
)
MAX_LINES = 200
"""A traceback longer than this is passed on as it is."""


class KilledTaskOutput:
    """Passes stderr lines on, except those of tasks Spark killed (the module's docstring): a
    Python traceback whose frames are all PySpark's daemon and worker code and that ends in a
    broken connection, and the line of a thread that died of a TaskKilledException. `feed`
    returns the lines to show now (a traceback's once it ended); `flush` the ones held at the
    end of the stream."""

    def __init__(self) -> None:
        self._held: list[str] = []

    def feed(self, line: str) -> list[str]:
        """The lines to show now that `line` came (with its line break, if any)."""
        if not self._held:
            text = line.rstrip("\r\n")
            if text == _TRACEBACK:
                self._held.append(line)
                return []
            return [] if _KILLED_TASK_THREAD.match(text) else [line]
        self._held.append(line)
        if line.startswith((" ", "\t")) and len(self._held) < MAX_LINES:
            return []
        block, self._held = self._held, []
        return [] if _killed_worker(block) else block

    def flush(self) -> list[str]:
        """The lines still held (a traceback the stream ended in)."""
        block, self._held = self._held, []
        return block


def _killed_worker(block: list[str]) -> bool:
    """Whether the complete traceback `block` is a PySpark worker's broken connection."""
    frames = [match["path"] for line in block if (match := _FRAME.match(line))]
    return (
        bool(frames)
        and all(_PYSPARK_FRAME.search(path) for path in frames)
        and block[-1].startswith(_BROKEN_CONNECTION)
    )
