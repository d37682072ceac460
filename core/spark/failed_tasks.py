"""Which task of a failed barrier stage failed, where and why, as Spark reports it.

Spark fails a barrier stage's job naming the task that failed first (`ResultTask(stage,
partition)`) and its reason, but neither its host nor its executor; those come from Spark's
status store (what its web UI shows), which the listener bus fills a moment after the job
failed. A continuous job's member is the partition of that index, so this names a lost member
by index, host, executor and Spark's reason: an executor that exited (with its exit code), a
Python worker that exited unexpectedly, a task Spark killed, a Python exception.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any

from jetspark.core.spark.failures import spark_error_summary

_log = logging.getLogger("jetspark.spark")

LISTENER_WAIT_MILLIS = 5000
"""How long the look waits for Spark's listener bus to report the failed tasks."""
_BARRIER_TASK = re.compile(r"barrier task ResultTask\((\d+), (\d+)\) finished unsuccessfully")
_WORKER_CRASHED = re.compile(r"Python worker exited unexpectedly(?: \((\w+)\))?")
_TASK_KILLED = re.compile(r"^TaskKilled \((.*)\)\s*$", re.DOTALL)
_EXECUTOR_LOST = "ExecutorLostFailure"
_KILLED = "task killed"
_ENDED = ("FAILED", "KILLED")
_MAX_TASKS = 100_000


@dataclasses.dataclass(frozen=True)
class FailedTask:
    """A task of a failed stage: its partition (a continuous job's member index), the host
    and executor it ran on, and Spark's reason in one line."""

    partition: int
    host: str
    executor: str
    reason: str

    def where(self) -> str:
        """Member, host and executor, for a message."""
        return f"member {self.partition} on host {self.host}, executor {self.executor}"

    def text(self) -> str:
        """Member, host, executor and reason, for a message."""
        return f"{self.where()} ({self.reason})"


def spark_reason(message: str) -> str:
    """Spark's reason for a task's end in one line: an executor's loss as Spark says it (with
    the exit code when it knows one), a Python worker that crashed, a killed task, else the
    failure without JVM frames (the Python exception of its traceback)."""
    text = message.strip()
    first = text.splitlines()[0] if text else ""
    if first.startswith(_EXECUTOR_LOST):
        return first
    if (killed := _TASK_KILLED.match(text)) is not None:
        return f"{_KILLED}: {killed.group(1).strip()}"
    if (crashed := _WORKER_CRASHED.search(text)) is not None:
        return crashed.group(0)
    return spark_error_summary(text) if text else "no reason given"


def first_failed(error_text: str) -> tuple[int, int] | None:
    """(stage id, partition) of the barrier task whose failure failed the stage, as the text
    of Spark's job failure names it, or None."""
    match = _BARRIER_TASK.search(error_text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def failed_member(context: Any, error_text: str) -> FailedTask | None:
    """The lost member of a continuous job whose barrier stage failed with `error_text`: the
    one whose failure looks most like a loss (an executor lost, then a Python worker crashed,
    then the task that failed first). None when Spark's status store does not tell."""
    named = first_failed(error_text)
    if named is None:
        return None
    stage, first = named
    try:
        ended = _ended_tasks(context, stage)
    except Exception as error:  # a stopped context, a Spark without the method: no names
        _log.debug("the status store did not name the failed tasks: %s", error)
        return None
    if not ended:
        return None

    def rank(task: FailedTask) -> int:
        if task.reason.startswith(_EXECUTOR_LOST):
            return 0
        if _WORKER_CRASHED.match(task.reason):
            return 1
        if task.partition == first:
            return 2
        return 4 if task.reason.startswith(_KILLED) else 3

    return min(ended.values(), key=lambda task: (rank(task), task.partition))


def silent_member(context: Any, group: str, member: int, reason: str) -> FailedTask | None:
    """Member `member` of the latest stage of job group `group`, with `reason`: one the driver
    found silent and ended the stage of itself (its task may still count as running, its host
    gone). None when Spark's status store does not tell."""
    try:
        tracker = context.statusTracker()
        stages = [
            stage
            for job in tracker.getJobIdsForGroup(group)
            if (info := tracker.getJobInfo(job)) is not None
            for stage in info.stageIds
        ]
        if not stages or context._jsc is None:
            return None
        status = context._jsc.sc().statusStore()
        stage = max(stages)
        tasks = status.taskList(stage, status.lastStageAttempt(stage).attemptId(), _MAX_TASKS)
        for index in range(tasks.size()):
            task = tasks.apply(index)
            if task.partitionId() == member:
                return FailedTask(member, task.host(), task.executorId(), reason)
    except Exception as error:  # a stopped context, a Spark without the method: no names
        _log.debug("the status store did not name the silent member's task: %s", error)
    return None


def _ended_tasks(context: Any, stage: int) -> dict[int, FailedTask]:
    """Partition -> its failed or killed task in the last attempt of `stage`."""
    if context._jsc is None:
        return {}
    scheduler = context._jsc.sc()
    try:
        scheduler.listenerBus().waitUntilEmpty(LISTENER_WAIT_MILLIS)
    except Exception as error:  # a busy bus: what it reported so far
        _log.debug("Spark's listener bus did not drain: %s", error)
    status = scheduler.statusStore()
    attempt = status.lastStageAttempt(stage).attemptId()
    tasks = status.taskList(stage, attempt, _MAX_TASKS)
    ended: dict[int, FailedTask] = {}
    for index in range(tasks.size()):
        task = tasks.apply(index)
        if task.status() not in _ENDED:
            continue
        message = task.errorMessage()
        reason = spark_reason(message.get() if message.isDefined() else "")
        failed = FailedTask(task.partitionId(), task.host(), task.executorId(), reason)
        known = ended.get(failed.partition)
        if known is None or task.status() == "FAILED":
            ended[failed.partition] = failed
    return ended
