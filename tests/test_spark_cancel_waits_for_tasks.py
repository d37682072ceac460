"""A cancelled job on SparkEngine ends only once its Spark tasks have stopped.

Spark fails a cancelled job at once while its running tasks stop only when they notice: a
`join()` that returned then could be followed by a task still writing sink files or snapshot
parts (a cancelled micro-batch's task recreated a snapshot directory that the caller had
already deleted). Here a processor blocks inside its task until a file appears; after the
cancelled job's `join()`, Spark runs no task of it any more, and releasing the processor
writes nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    JobCancelledError,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.spark.job_group import GroupJobs
from jetspark.edges import between
from jetspark.processors import generate_p

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


class BlocksUntilReleased(AbstractProcessor):
    """Marks `entered`, waits for `release` to exist, then writes `after_release`."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self._directory = directory

    def is_cooperative(self) -> bool:
        return False

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        Path(self._directory, "entered").touch()
        while not os.path.exists(os.path.join(self._directory, "release")):
            time.sleep(0.01)
        Path(self._directory, "after_release").touch()
        return True


def blocking_dag(directory: Path) -> DAG:
    dag = DAG("blocked")
    source = dag.new_vertex("numbers", generate_p(10))
    sink = dag.new_vertex("blocks", lambda: BlocksUntilReleased(str(directory)))
    dag.edge(between(source, sink).distributed())
    return dag


@pytest.mark.parametrize("guarantee", [None, ProcessingGuarantee.EXACTLY_ONCE])
def test_join_of_a_cancelled_job_returns_once_its_tasks_stopped(
    spark_engine: Any, tmp_path: Path, guarantee: ProcessingGuarantee | None
) -> None:
    if guarantee is None:
        job = spark_engine.new_job(blocking_dag(tmp_path))
    else:
        config = JobConfig(processing_guarantee=guarantee)
        store = DirectorySnapshotStore(tmp_path / "snapshots")
        job = spark_engine.new_job(blocking_dag(tmp_path), config, snapshot_store=store)
    deadline = time.monotonic() + 240
    while not (tmp_path / "entered").exists():
        assert time.monotonic() < deadline and not job.status.is_terminal, "never blocked"
        time.sleep(0.02)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(240)
    assert GroupJobs(spark_engine.context, job.group).running_tasks() == 0
    (tmp_path / "release").touch()
    time.sleep(1)  # a task still running would see the file within 10 ms
    assert not (tmp_path / "after_release").exists()
