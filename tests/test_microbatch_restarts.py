"""A micro-batch job restarts from its last committed snapshot by itself when a batch's Spark job
fails for a reason of the infrastructure (here a Python worker that dies, as a lost executor's
would), at most `JobConfig.max_restarts` times, and counts it; a processor's own exception
still fails the job naming it. On local[2] Spark does not retry a task, so the batch's job
fails at once: what the test sees is jetspark's restart, not Spark's retry."""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from microbatch_jobs import engine_with_words, guaranteed

from jetspark.core import DirectorySnapshotStore, JobFailedError

pytestmark = [pytest.mark.spark, pytest.mark.timeout(400)]


class EndWorkerOnce:
    """The identity, except that at its `at`-th item of a batch after the first commit to
    `snapshots` it ends the Python worker running it, the first time only (`marker`, a file,
    says it happened)."""

    def __init__(self, work: Path, at: int) -> None:
        self.marker = str(work / "ended")
        self.snapshots = str(work / "snapshots")
        self.at = at
        self.seen = 0

    def __call__(self, item: Any) -> Any:
        self.seen += 1
        if self.seen == self.at and self._after_a_commit() and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return item

    def _after_a_commit(self) -> bool:
        return bool(glob.glob(os.path.join(self.snapshots, "snapshot-*", "MANIFEST")))


def _reject_w3(item: Any) -> Any:
    if item == "w3":
        raise jobs.InjectedFault("w3 is not welcome")
    return item


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    return engine_with_words(spark_engine, 1000)


def test_a_lost_python_worker_restarts_the_job_from_its_last_snapshot(
    engine: Any, tmp_path: Path
) -> None:
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    dag = jobs.counting_dag(EndWorkerOnce(tmp_path, 50))
    job = engine.new_job(dag, guaranteed(), snapshot_store=store)
    job.join(300)
    assert (tmp_path / "ended").exists()
    assert engine.get_map("counts") == jobs.expected_counts(engine.get_list("words"))
    assert job.metrics.restarts == 1


def test_restarts_are_bounded_by_max_restarts(engine: Any, tmp_path: Path) -> None:
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    dag = jobs.counting_dag(EndWorkerOnce(tmp_path, 50))
    job = engine.new_job(dag, guaranteed(max_restarts=0), snapshot_store=store)
    with pytest.raises(JobFailedError, match="failed on Spark"):
        job.join(300)
    assert job.metrics.restarts == 0


def test_a_processors_exception_fails_the_job_without_a_restart(engine: Any) -> None:
    job = engine.new_job(jobs.counting_dag(_reject_w3), guaranteed())
    with pytest.raises(JobFailedError, match="vertex 'fault'") as failure:
        job.join(300)
    assert failure.value.vertex_name == "fault"
    assert job.metrics.restarts == 0
