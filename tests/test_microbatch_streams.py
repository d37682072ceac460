"""read_stream_p jobs publish each batch once the driver committed it, whatever the stream does
next; continue in another store without losing Spark's first batch; count the rows they read;
and keep Spark's checkpoint in the snapshot store whatever Hadoop's default file system is.

Every wait is for a committed batch (bounded, never a speed check); what is asserted then is
the published files."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_tolerance_jobs import committed_lines
from test_spark_streams import (
    EXACTLY_ONCE,
    land,
    lines_dag,
    session,  # noqa: F401 (the fixture: a SparkSession)
    wait_for,
)

from jetspark.core import DirectorySnapshotStore, JobCancelledError
from jetspark.core.job import Job

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


def stop(job: Job) -> None:
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(120)


def test_a_quiet_stream_publishes_its_last_batch(
    spark_engine: Any,
    session: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    incoming, out = tmp_path / "incoming", tmp_path / "out"
    incoming.mkdir()
    lines = [f"line {n}" for n in range(100)]
    land(incoming, "only.txt", lines)  # one file, then nothing more
    job = spark_engine.new_job(
        lines_dag(session.readStream.text(str(incoming)), out),
        EXACTLY_ONCE,
        snapshot_store=DirectorySnapshotStore(tmp_path / "snapshots"),
    )
    wait_for(job, lambda: job.metrics.batch_count >= 1)
    assert committed_lines(str(out)) == sorted(line.upper() for line in lines)
    assert job.metrics.batches[0].input_items == 100
    stop(job)


def test_a_stream_continued_in_another_store_loses_no_batch(
    spark_engine: Any,
    session: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    first_store = DirectorySnapshotStore(tmp_path / "first")
    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    land(tmp_path / "before", "a.txt", [f"a{n}" for n in range(5)])
    job = spark_engine.new_job(
        lines_dag(session.readStream.text(str(tmp_path / "before")), out),
        EXACTLY_ONCE,
        snapshot_store=first_store,
    )
    wait_for(job, lambda: job.metrics.batch_count >= 1)
    stop(job)
    land(tmp_path / "after", "b.txt", [f"b{n}" for n in range(5)])
    land(tmp_path / "after", "c.txt", [f"c{n}" for n in range(5)])
    frame = session.readStream.option("maxFilesPerTrigger", 1).text(str(tmp_path / "after"))
    job = spark_engine.new_job(
        lines_dag(frame, out),
        EXACTLY_ONCE,
        snapshot_store=DirectorySnapshotStore(tmp_path / "second"),  # empty
        restore_from=first_store.latest(),
    )
    wait_for(job, lambda: job.metrics.batch_count >= 2)  # one file per Spark batch
    stop(job)
    expected = [f"{file}{n}".upper() for file in "abc" for n in range(5)]
    assert committed_lines(str(out)) == sorted(expected)
    assert [batch.input_items for batch in job.metrics.batches] == [5, 5]


@pytest.fixture
def default_file_system(spark_engine: Any) -> Iterator[Callable[[str], None]]:
    """Sets Hadoop's fs.defaultFS on the session's context for one test."""
    configuration = spark_engine.context._jsc.hadoopConfiguration()
    before = configuration.get("fs.defaultFS")

    def set_default(uri: str) -> None:
        configuration.set("fs.defaultFS", uri)

    yield set_default
    configuration.set("fs.defaultFS", before)


def test_the_checkpoint_is_in_the_store_whatever_the_default_file_system(
    spark_engine: Any,
    session: Any,  # noqa: F811
    tmp_path: Path,
    default_file_system: Callable[[str], None],
) -> None:
    incoming, out = tmp_path / "incoming", tmp_path / "out"
    incoming.mkdir()
    land(incoming, "only.txt", ["one", "two"])
    frame = session.readStream.text(incoming.as_uri())  # a path with its scheme
    default_file_system("nosuchfs://elsewhere/")  # as HDFS would be on a cluster
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    job = spark_engine.new_job(lines_dag(frame, out), EXACTLY_ONCE, snapshot_store=store)
    wait_for(job, lambda: job.metrics.batch_count >= 1)
    stop(job)
    assert (tmp_path / "snapshots" / "spark-checkpoint" / "commits").is_dir()
    assert committed_lines(str(out)) == ["ONE", "TWO"]
