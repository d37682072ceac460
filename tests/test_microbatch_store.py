"""The snapshot store SparkEngine makes for a job with a guarantee that names none: a temporary
directory, gone once the job ended, however it ended, except across `job.restart()`, which
restores from it (tests/test_temporary_stores.py: after a failure or a refused submission)."""

from __future__ import annotations

import os
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from microbatch_jobs import engine_with_words, guaranteed
from test_temporary_stores import endless_dag

from jetspark.core import ExecutionMode, JobCancelledError

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture
def engine(spark_engine: Any) -> Any:
    return engine_with_words(spark_engine, 600)


def _identity(item: Any) -> Any:
    return item


def _fail_on_w3(item: Any) -> Any:
    if item == "w3":
        raise jobs.InjectedFault("w3 is not welcome")
    return item


@pytest.mark.parametrize("mode", [ExecutionMode.MICRO_BATCH, ExecutionMode.CONTINUOUS])
def test_the_store_of_a_completed_job_is_removed(engine: Any, mode: ExecutionMode) -> None:
    job = engine.new_job(jobs.counting_dag(_identity), guaranteed(mode))
    directory = job.snapshot_store.directory
    job.join(120)
    assert engine.get_map("counts") == jobs.expected_counts(engine.get_list("words"))
    assert not os.path.exists(directory)


def test_the_store_of_a_cancelled_job_is_removed(engine: Any) -> None:
    job = engine.new_job(jobs.counting_dag(jobs.KillAt(10**9)), guaranteed())
    directory = job.snapshot_store.directory
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(120)
    assert not os.path.exists(directory)


def test_a_restarted_job_keeps_the_temporary_store_until_it_ends(engine: Any) -> None:
    job = engine.new_job(endless_dag(), guaranteed())
    directory = job.snapshot_store.directory
    restarted = job.restart()  # the same store, restored from its latest snapshot
    assert restarted.snapshot_store.directory == directory
    assert os.path.isdir(directory)
    restarted.cancel()
    with pytest.raises(JobCancelledError):
        restarted.join(120)
    assert not os.path.exists(directory)
