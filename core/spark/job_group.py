"""The Spark jobs of one jetspark job, which share a job group (`SparkJob.group`), as Spark's
status tracker sees them."""

from __future__ import annotations

import logging
import time
from collections.abc import Container
from typing import Any

_log = logging.getLogger("jetspark.spark")

TASKS_END_TIMEOUT_SECONDS = 120.0
"""How long a failed or cancelled job waits for its Spark tasks to stop before it ends."""
_POLL_SECONDS = 0.05


def group_stages(tracker: Any, group: str, skip: Container[int] = ()) -> list[Any]:
    """The stages (SparkStageInfo, with tasks) of the Spark jobs in `group`, by stage id,
    without those in `skip`."""
    stages = []
    for job_id in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job_id)
        for stage_id in info.stageIds if info is not None else ():
            if stage_id in skip:
                continue
            stage = tracker.getStageInfo(stage_id)
            if stage is not None and stage.numTasks:
                stages.append(stage)
    return sorted(stages, key=lambda s: s.stageId)


def wait_for_tasks_to_end(
    context: Any, group: str, timeout: float = TASKS_END_TIMEOUT_SECONDS
) -> None:
    """Waits until no task of `group` runs any more, or logs a warning after `timeout`.

    Spark fails a cancelled or failed job at once, while its running tasks stop only when they
    notice (a Python worker is killed a few seconds later): a job must not look ended while
    its tasks may still write sink files or snapshot parts.
    """
    tracker = context.statusTracker()
    deadline = time.monotonic() + timeout
    while running := sum(stage.numActiveTasks for stage in group_stages(tracker, group)):
        if time.monotonic() >= deadline:
            _log.warning(
                "%d Spark task(s) of job group %s still run %.0f s after the job ended; they "
                "may still write to its sinks and snapshot store",
                running,
                group,
                timeout,
            )
            return
        time.sleep(_POLL_SECONDS)
