"""Progress of a job's Spark stages, read from Spark's status tracker, for the console.

On a terminal each running stage gets a tqdm bar (tasks done of the stage's tasks, elapsed
time); otherwise each finished stage gets one plain line. The contexts jetspark creates turn
Spark's own console progress bar off (`session.engine_conf`), so the two never mix.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any

from tqdm import tqdm

from jetspark.core.job import Job
from jetspark.core.spark.job_group import GroupJobs

POLL_SECONDS = 0.5
_BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} tasks [{elapsed}]"


class StageProgress:
    """Shows the stages of the Spark jobs in `group` (a job group, see `SparkJob.group`) on
    `stream`: bars when `bars` (default: when `stream` is a terminal), else a line per
    finished stage and its seconds (`clock`). Call `poll()` now and then, and `close()` at
    the end."""

    def __init__(
        self,
        context: Any,
        group: str,
        stream: IO[str] | None = None,
        *,
        bars: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._jobs = GroupJobs(context, group)
        self._stream = stream if stream is not None else sys.stderr
        self._bars_on = self._stream.isatty() if bars is None else bars
        self._clock = clock
        self._bars: dict[int, tqdm] = {}
        self._started: dict[int, float] = {}
        self._finished: set[int] = set()
        self._last_finish = clock()
        """When the last stage finished (at first, when watching began): a stage seen running
        is taken to have started then, as the status tracker gives no start times."""

    def poll(self) -> None:
        """Reads the status tracker once and updates what is shown."""
        stages = self._jobs.stages()
        self._finished &= {stage.stageId for stage in stages}  # the others are never shown again
        for stage in stages:
            if stage.stageId in self._finished:
                continue
            done = stage.numCompletedTasks >= stage.numTasks
            if not done and not stage.numActiveTasks and not stage.numCompletedTasks:
                continue  # not running yet (or skipped: its output was already there)
            self._started.setdefault(stage.stageId, self._last_finish)
            if self._bars_on:
                self._draw(stage, done)
            elif done:
                seconds = self._clock() - self._started[stage.stageId]
                tasks = f"{stage.numTasks} task{'s' * (stage.numTasks != 1)}"
                print(
                    f"  Spark stage {stage.stageId} finished: {tasks} in {seconds:.1f} s",
                    file=self._stream,
                    flush=True,
                )
            if done:
                self._finished.add(stage.stageId)
                self._started.pop(stage.stageId)
                self._last_finish = max(self._last_finish, self._clock())

    def close(self) -> None:
        """A last poll, then closes the bars still open (a failed or cancelled job's)."""
        self.poll()
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()

    def _draw(self, stage: Any, done: bool) -> None:
        bar = self._bars.get(stage.stageId)
        if bar is None:
            bar = self._bars[stage.stageId] = tqdm(
                total=stage.numTasks,
                desc=f"Spark stage {stage.stageId}",
                file=self._stream,
                leave=True,
                dynamic_ncols=True,
                bar_format=_BAR_FORMAT,
            )
            bar.start_t -= self._clock() - self._started[stage.stageId]  # when it started
        bar.update(stage.numCompletedTasks - bar.n)
        if done:
            bar.close()
            del self._bars[stage.stageId]


def wait_with_progress(
    job: Job,
    context: Any,
    group: str,
    stream: IO[str] | None = None,
    poll_seconds: float = POLL_SECONDS,
) -> None:
    """`job.join()`, showing the progress of its Spark stages (`StageProgress`) meanwhile."""
    progress = StageProgress(context, group, stream)
    try:
        while True:
            try:
                job.join(poll_seconds)
                return
            except TimeoutError:
                progress.poll()
    finally:
        progress.close()
