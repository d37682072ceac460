"""The driver JVM jetspark launches for its own SparkContexts: its console, and its failures to
start in Python terms.

Quiet, the JVM's stderr passes through `JvmConsole`, which drops the JVM's startup warning about
incubator modules, the bodies of the exceptions Spark logs (the exception line, `Caused by:`
lines and stack frames) and what the tasks Spark kills print (`killed_tasks.py`): the failure
reaches the user as a `SparkStartError`, a `JobFailedError` or a `JobCancelledError` instead.
Everything else goes on, the Python workers' own stderr of a local master included. A launch
that fails (spark-submit refusing its arguments, say a YARN master without `HADOOP_CONF_DIR`)
ends with the JVM's main thread dying: that line's message becomes the `SparkStartError`.
"""

from __future__ import annotations

import collections
import os
import re
import threading
from typing import IO

from jetspark.core.spark.failures import spark_error_summary
from jetspark.core.spark.killed_tasks import KilledTaskOutput

_JVM_NOISE = ("WARNING: Using incubator modules",)
"""Lines the JVM writes to stderr before any log configuration applies, dropped from it."""
_LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (ERROR|WARN) ")
_EXCEPTION_LINE = re.compile(r"^[a-z][\w$]*(\.[\w$]+)+(: .*)?$")
_STACK_LINE = re.compile(r"^(\s+at \S+\(.*\)|\s+\.\.\. \d+ (more|common frames omitted))\s*$")
_CHAINED_LINE = re.compile(r"^\s*(Caused by|Suppressed): ")
_MAIN_THREAD_DIED = re.compile(r'^Exception in thread "main" ([\w$.]+)(?:: (.*))?$')
_KEPT_LINES = 20
"""Lines of the JVM's stderr kept for the message of a launch that fails without an exception."""


class SparkStartError(RuntimeError):
    """A SparkContext could not be created: why, in Python terms (the Py4J or PySpark error, with
    any JVM stack, is the `__cause__`)."""


class JvmConsole:
    """Forwards a driver JVM's stderr to `target` from a thread of its own, quiet or not (see the
    module's docstring); keeps what a failed launch said."""

    def __init__(self, target: IO[str], *, quiet: bool) -> None:
        self._target = target
        self._quiet = quiet
        self._read_end, self.write_end = os.pipe()
        """The file descriptor to give the JVM as its stderr (closed here by `launched`)."""
        self._fatal: str | None = None
        self._last_lines: collections.deque[str] = collections.deque(maxlen=_KEPT_LINES)
        self._in_exception = False
        self._thread = threading.Thread(target=self._forward, name="jvm-stderr", daemon=True)
        self._thread.start()

    def launched(self) -> None:
        """Called once the JVM was started (or failed to start): closes this process's copy of
        the pipe's write end, so the thread ends when the JVM does."""
        os.close(self.write_end)

    def failure(self, timeout: float = 10.0) -> str:
        """Why the JVM exited while starting: the message of the exception its main thread died
        of, else its last lines on stderr. Waits (at most `timeout` s) for its stderr to end."""
        fatal = self.died_of(timeout)
        if fatal is not None:
            return fatal
        said = " / ".join(line.strip() for line in self._last_lines if line.strip())
        return f"the driver JVM exited as it started ({said or 'it wrote nothing on stderr'})"

    def died_of(self, timeout: float = 10.0) -> str | None:
        """The message of the exception the JVM's main thread died of (quiet, the console hides
        that line with the stack), or None. Waits (at most `timeout` s) for its stderr to end."""
        self._thread.join(timeout)
        return self._fatal

    def _forward(self) -> None:
        killed = KilledTaskOutput()
        with os.fdopen(self._read_end, "rb") as source:
            for raw in iter(source.readline, b""):
                line = raw.decode(errors="replace")
                self._last_lines.append(line)
                for kept in killed.feed(line) if self._quiet else [line]:
                    self._show(kept)
        for kept in killed.flush():
            self._show(kept)

    def _show(self, line: str) -> None:
        """Writes `line` to the console when `_shown` lets it through."""
        if self._shown(line.rstrip("\n")):
            try:
                self._target.write(line)
                self._target.flush()
            except (OSError, ValueError):  # the terminal went away, or exiting
                pass

    def _shown(self, line: str) -> bool:
        """Whether `line` reaches the console; notes the main thread's dying words."""
        died = _MAIN_THREAD_DIED.match(line)
        if died is not None:
            self._fatal = died.group(2) or died.group(1)
            self._in_exception = True
            return not self._quiet
        if not self._quiet:
            return True
        if line.startswith(_JVM_NOISE):
            return False
        body = (
            _STACK_LINE.match(line)
            or _CHAINED_LINE.match(line)
            or (self._in_exception and _EXCEPTION_LINE.match(line))
        )
        self._in_exception = bool(_LOG_LINE.match(line) or body)
        return not body


def start_error(error: BaseException, master: str) -> SparkStartError:
    """The SparkStartError of a context on `master` that failed in the JVM with `error` (a Py4J
    error): the JVM exception's message and, when it was caused by another, the root cause."""
    text = str(error)
    summary = spark_error_summary(text)
    causes = [line for line in text.splitlines() if _CHAINED_LINE.match(line)]
    root = causes[-1].split(": ", 1)[1].strip() if causes else ""
    because = f" (root cause: {_short(root)})" if root and root not in summary else ""
    return SparkStartError(f"Spark could not start on {master}: {_short(summary)}{because}")


def _short(message: str, limit: int = 300) -> str:
    """`message` without the package of its exception class, cut at `limit` characters."""
    name, colon, rest = message.partition(": ")
    if colon and _EXCEPTION_LINE.match(name):
        message = f"{name.rsplit('.', 1)[-1]}: {rest}"
    return message if len(message) <= limit else message[: limit - 3] + "..."
