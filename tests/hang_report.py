"""What a test says when a job it joins does not end: the job's state, Spark's active stages
and the driver's thread stacks, so that a hang seen once in CI can be told apart afterwards."""

from __future__ import annotations

import sys
import threading
import traceback
from typing import Any


class JobHung(TimeoutError):
    """A job still running after the test's wait; the message holds what was seen."""


def join_or_report(job: Any, timeout: float, context: Any = None) -> None:
    """`job.join(timeout)`; a JobHung with the job's metrics, `context`'s active stages and
    every driver thread's stack when it is still running after `timeout` seconds."""
    try:
        job.join(timeout)
    except TimeoutError as still_running:
        raise JobHung(f"{still_running}\n{_report(job, context)}") from None


def _report(job: Any, context: Any) -> str:
    lines = [f"metrics: {job.metrics}"]
    if context is not None and context._jsc is not None:
        tracker = context.statusTracker()
        for stage_id in tracker.getActiveStageIds():
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                lines.append(
                    f"active stage {stage_id} attempt {stage.currentAttemptId} {stage.name!r}: "
                    f"{stage.numActiveTasks} running, {stage.numFailedTasks} failed, "
                    f"{stage.numCompletedTasks} completed of {stage.numTasks}"
                )
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        stack = "".join(traceback.format_stack(frame)[-8:])
        lines.append(f"--- thread {names.get(ident, ident)}\n{stack}")
    return "\n".join(lines)
