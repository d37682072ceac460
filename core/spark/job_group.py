"""The Spark jobs of one jetspark job, which share a job group (`SparkJob.group`), as Spark's
status tracker sees them, at a cost per look that does not grow with the group's past.

A micro-batch job runs one Spark job per batch, and Spark retains up to `spark.ui.retainedJobs`
of them: asking for each one's state on every look (py4j round trips per job and per stage)
made a look cost more than a second after a thousand batches. `GroupJobs` fetches the group's
job ids in one round trip and asks only about the jobs it has not yet seen end with no task
running, nor any other GroupJobs of the group had before it was made (a job that ended is over
for good), so a look costs the same after ten batches or ten thousand.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

_log = logging.getLogger("jetspark.spark")

TASKS_END_TIMEOUT_SECONDS = 120.0
"""How long a failed or cancelled job waits for its Spark tasks to stop before it ends."""
_POLL_SECONDS = 0.05
_RUNNING = "RUNNING"


def _ints(context: Any, java_array: Any) -> list[int]:
    """A Java int[] as a list, in one py4j round trip (iterating it costs two per element)."""
    text = context._jvm.java.util.Arrays.toString(java_array)
    return [int(part) for part in text.strip("[]").split(",") if part.strip()]


_KEPT_GROUPS = 64
_over_in_group: dict[tuple[int, str], set[int]] = {}
"""(context, group) -> the group's jobs some GroupJobs saw end with no task running."""
_registry_lock = threading.Lock()


def _over_in(context: Any, group: str) -> set[int]:
    key = (id(context), group)
    with _registry_lock:
        found = _over_in_group.get(key)
        if found is None:
            found = _over_in_group[key] = set()
            while len(_over_in_group) > _KEPT_GROUPS:
                del _over_in_group[next(iter(_over_in_group))]
        return found


class GroupJobs:
    """The Spark jobs of job group `group` on `context`, as far as they may still run tasks
    (module docstring). Each watcher (a progress display, the wait for a job's tasks, a
    micro-batch job's driver) has its own, so that it sees the last state of every job that
    ends while it watches."""

    def __init__(self, context: Any, group: str) -> None:
        self._context = context
        self._tracker = context.statusTracker()
        self._group = group
        self._shared_over = _over_in(context, group)
        with _registry_lock:
            over = set(self._shared_over)
        self._over = over
        """Jobs that ended with no task running: nothing of theirs runs again."""

    def stages(self) -> list[Any]:
        """The stages (SparkStageInfo, with tasks) of the group's jobs that may still run
        tasks, by stage id; a job's stages are listed once more after it ended, then never."""
        java_ids = self._context._jsc.statusTracker().getJobIdsForGroup(self._group)
        job_ids = _ints(self._context, java_ids)
        self._over &= set(job_ids)  # as Spark forgets jobs, so does this
        over: list[int] = []
        stages = []
        for job_id in job_ids:
            if job_id in self._over:
                continue
            job, job_stages = self._job(job_id)
            stages.extend(job_stages)
            if job is None or (
                job.status != _RUNNING and not any(s.numActiveTasks for s in job_stages)
            ):
                over.append(job_id)
        self._over.update(over)
        with _registry_lock:
            self._shared_over.intersection_update(job_ids)
            self._shared_over.update(over)
        return sorted(stages, key=lambda s: s.stageId)

    def _job(self, job_id: int) -> tuple[Any, list[Any]]:
        job = self._tracker.getJobInfo(job_id)
        if job is None:
            return None, []
        stages = []
        for stage_id in _ints(self._context, job.stageIds):
            stage = self._tracker.getStageInfo(stage_id)
            if stage is not None and stage.numTasks:
                stages.append(stage)
        return job, stages

    def running_tasks(self) -> int:
        """How many tasks of the group's jobs run now."""
        return sum(stage.numActiveTasks for stage in self.stages())


def wait_for_tasks_to_end(
    context: Any, group: str, timeout: float = TASKS_END_TIMEOUT_SECONDS, left_running: int = 0
) -> int:
    """Waits until no more than `left_running` tasks of `group` run (the tasks of members on
    a host that vanished, which Spark ends only once it notices), or logs a warning after
    `timeout`; returns how many still run.

    Spark fails a cancelled or failed job at once, while its running tasks stop only when they
    notice (a Python worker is killed a few seconds later): a job must not look ended while
    its tasks may still write sink files or snapshot parts.
    """
    if context._jsc is None:
        return 0  # the context stopped, and its tasks with it
    jobs = GroupJobs(context, group)
    deadline = time.monotonic() + timeout
    while (running := jobs.running_tasks()) > left_running:
        if time.monotonic() >= deadline:
            _log.warning(
                "%d Spark task(s) of job group %s still run %.0f s after the job ended; they "
                "may still write to its sinks and snapshot store",
                running,
                group,
                timeout,
            )
            return running
        time.sleep(_POLL_SECONDS)
    return running
