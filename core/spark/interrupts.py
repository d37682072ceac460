"""Ctrl-C in a driver whose SparkContext jetspark created: a KeyboardInterrupt where the main
thread is, but never inside a call to the JVM.

PySpark's own SIGINT handler cancels every job through the JVM from inside whatever call Ctrl-C
interrupted, and then raises KeyboardInterrupt there. Py4J's connection is not reentrant, so
the cancel fails ("reentrant call", Py4JNetworkError) and the interrupted call's connection
breaks: Py4J logs both with tracebacks. Here a Ctrl-C that finds the main thread inside a JVM
call cancels the jobs from another thread (the call may be waiting for one of them) and comes
back as soon as the call has returned.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from types import FrameType

from pyspark import SparkContext

RETRY_SECONDS = 0.05
"""How soon a Ctrl-C that found the main thread inside a JVM call is delivered again."""


def install(context: SparkContext) -> None:
    """Makes Ctrl-C behave as the module says for `context`, in place of PySpark's handler;
    only from the main thread, where Python runs signal handlers."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, functools.partial(_interrupt, context))


def _interrupt(context: SparkContext, signal_number: int, frame: FrameType | None) -> None:
    if not _inside_jvm_call(frame):
        raise KeyboardInterrupt
    threading.Thread(
        target=_cancel_and_interrupt_again, args=(context,), name="ctrl-c", daemon=True
    ).start()


def _inside_jvm_call(frame: FrameType | None) -> bool:
    """Whether `frame` or one of its callers is Py4J's code."""
    while frame is not None:
        if f"{os.sep}py4j{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _cancel_and_interrupt_again(context: SparkContext) -> None:
    with contextlib.suppress(Exception):  # a context stopping meanwhile has no jobs left
        context.cancelAllJobs()
    time.sleep(RETRY_SECONDS)
    os.kill(os.getpid(), signal.SIGINT)
