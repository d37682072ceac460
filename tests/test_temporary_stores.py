"""A job with a processing guarantee that names no snapshot store leaves no temporary store
behind, however it ends: completed, failed, cancelled, or refused when submitted; a user's
store is never touched. The temporary directories are compared before and after each job, in a
temporary directory of the test's own (`tempfile.tempdir`)."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from microbatch_jobs import engine_with_words, guaranteed

from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    ExecutionMode,
    JobCancelledError,
    JobFailedError,
    LocalEngine,
)
from jetspark.edges import between
from jetspark.processors import stream_journal_p, write_list_p


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory `tempfile` makes its directories in, for this test alone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _stores(directory: Path) -> set[Path]:
    return set(directory.glob("jetspark-snapshots-*"))


def _fail_on_w3(item: Any) -> Any:
    if item == "w3":
        raise jobs.InjectedFault("w3 is not welcome")
    return item


def endless_dag() -> DAG:
    """The list "words", followed for ever as a stream journal, into the list "out": a job
    that ends only when cancelled."""
    dag = DAG()
    source = dag.new_vertex("source", stream_journal_p("words"))
    dag.edge(between(source, dag.new_vertex("sink", write_list_p("out"))))
    return dag


def _local_engine() -> LocalEngine:
    engine = jobs.engine(2)
    engine.get_list("words").extend(jobs.words(300))
    return engine


def test_a_failed_local_job_leaves_no_temporary_store(private_tmp: Path) -> None:
    job = _local_engine().new_job(jobs.counting_dag(_fail_on_w3), jobs.config())
    with pytest.raises(JobFailedError, match="w3 is not welcome"):
        job.join()
    assert _stores(private_tmp) == set()


def test_a_cancelled_local_job_leaves_no_temporary_store(private_tmp: Path) -> None:
    job = _local_engine().new_job(endless_dag(), jobs.config())
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join()
    assert _stores(private_tmp) == set()


@pytest.mark.spark
@pytest.mark.parametrize("mode", [ExecutionMode.MICRO_BATCH, ExecutionMode.CONTINUOUS])
def test_a_failed_spark_job_removes_its_temporary_store(
    spark_engine: Any, private_tmp: Path, mode: ExecutionMode
) -> None:
    engine = engine_with_words(spark_engine, 600)
    job = engine.new_job(jobs.counting_dag(_fail_on_w3), guaranteed(mode, max_restarts=0))
    assert _stores(private_tmp) == {Path(job.snapshot_store.directory)}
    with pytest.raises(JobFailedError, match="vertex 'fault'"):
        job.join()
    assert _stores(private_tmp) == set()


@pytest.mark.spark
def test_a_spark_job_refused_at_submission_removes_its_temporary_store(
    spark_engine: Any, private_tmp: Path
) -> None:
    engine = engine_with_words(spark_engine, 10)
    lock = threading.Lock()  # a lock cannot be pickled, so neither can a function holding one
    unpicklable = jobs.counting_dag(lambda item: lock and item)
    with pytest.raises(JobFailedError, match="vertex 'fault'"):
        engine.new_job(unpicklable, guaranteed())
    assert _stores(private_tmp) == set()


@pytest.mark.spark
def test_a_failed_spark_job_leaves_a_users_store_as_it_was(
    spark_engine: Any, tmp_path: Path
) -> None:
    store = DirectorySnapshotStore(str(tmp_path / "mine"))
    engine = engine_with_words(spark_engine, 600)
    job = engine.new_job(jobs.counting_dag(_fail_on_w3), guaranteed(), snapshot_store=store)
    with pytest.raises(JobFailedError):
        job.join()
    assert (tmp_path / "mine").is_dir()
