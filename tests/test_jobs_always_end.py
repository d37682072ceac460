"""Jobs that always end: whatever goes wrong on a job's driver side, the job is marked ended
(FAILED with the error, when it had not failed or been cancelled already), `join()` raises that
error, `engine.stop()` returns and the snapshot store is free for the next job, on both engines.

Causes: the store's lease cannot be given back (a store of the user's own whose release
fails), the store's lease file cannot be removed (a store gone read-only or unmounted), the
SparkContext stops under a running job.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    ExecutionMode,
    JobCancelledError,
    JobConfig,
    JobFailedError,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.job import JobStatus
from jetspark.core.store_lease import LOCK_FILE
from jetspark.edges import between
from jetspark.processors import stream_journal_p, write_list_p

CHILD = Path(__file__).with_name("job_end_child.py")


def _config(mode: ExecutionMode) -> JobConfig:
    return JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=50,
        execution_mode=mode,
    )


@pytest.fixture(params=["local", "spark"])
def engine(request: pytest.FixtureRequest) -> Any:
    """LocalEngine(2), or SparkEngine on the session's local[2] running CONTINUOUS."""
    if request.param == "local":
        return LocalEngine(2)
    from jetspark.core.spark import SparkEngine

    spark_engine = request.getfixturevalue("spark_engine")
    # the store class travels with the members' tasks
    return SparkEngine(spark_engine.context, members=2, ship=[jobs])


def _mode(engine: Any) -> ExecutionMode:
    return ExecutionMode.AUTO if isinstance(engine, LocalEngine) else ExecutionMode.CONTINUOUS


def _endless_dag() -> DAG:
    dag = DAG("endless")
    source = dag.new_vertex("source", stream_journal_p("journal"))
    dag.edge(between(source, dag.new_vertex("sink", write_list_p("endless-out"))))
    return dag


@pytest.mark.spark
def test_a_lease_that_cannot_be_given_back_fails_the_job_that_completed(
    engine: Any, tmp_path: Path
) -> None:
    engine.get_list("in").extend(range(100))
    store = jobs.UnmountedOnRelease(str(tmp_path / "snapshots"))
    job = engine.new_job(jobs.copy_dag(), _config(_mode(engine)), snapshot_store=store)
    with pytest.raises(JobFailedError, match="ending it failed: OSError: the share went away"):
        job.join(120)
    assert job.status is JobStatus.FAILED
    assert sorted(engine.get_list("out")) == list(range(100))
    # the directory itself was given back
    DirectorySnapshotStore(str(tmp_path / "snapshots")).acquire("next").release()


@pytest.mark.spark
def test_a_lease_file_that_cannot_be_removed_leaves_the_store_free(
    engine: Any, tmp_path: Path
) -> None:
    engine.get_list("journal").extend(range(20))
    store = DirectorySnapshotStore(str(tmp_path / "snapshots"))
    job = engine.new_job(_endless_dag(), _config(_mode(engine)), snapshot_store=store)
    lock = tmp_path / "snapshots" / LOCK_FILE
    os.unlink(lock)
    os.mkdir(lock)  # unlink() of it fails, as on a store gone read-only
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(120)
    os.rmdir(lock)
    again = engine.new_job(_endless_dag(), _config(_mode(engine)), snapshot_store=store)
    again.cancel()
    with contextlib.suppress(JobCancelledError):
        again.join(120)
    assert again.status is JobStatus.CANCELLED


@pytest.mark.spark
@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["continuous", "micro_batch"])
def test_a_spark_context_stopped_under_a_running_job_ends_it(tmp_path: Path, mode: str) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    result = subprocess.run(
        [sys.executable, str(CHILD), str(tmp_path), mode],
        capture_output=True,
        text=True,
        timeout=500,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["status"] == "FAILED", report
    assert report["raised"].startswith("JobFailedError"), report
    assert report["stop_returned"] and report["store_free"], report
