"""read_stream_p: a jetspark DAG over Spark's Structured Streaming sources. Files land in a
directory that `spark.readStream.text` watches; each Spark batch is a jetspark micro-batch;
the job is cancelled and continued from its store; every line is committed exactly once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fault_tolerance_jobs import committed_lines

from jetspark.core import (
    DAG,
    DagValidationError,
    DirectorySnapshotStore,
    JobCancelledError,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.job import Job
from jetspark.edges import between
from jetspark.processors import map_p, read_stream_p, write_file_transactional_p

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

EXACTLY_ONCE = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)


@pytest.fixture(scope="module")
def session(spark_engine: Any) -> Any:
    from pyspark.sql import SparkSession

    return SparkSession(spark_engine.context)


def _value(row: Any) -> str:
    return row.value


def _upper(line: str) -> str:
    return line.upper()


def lines_dag(frame: Any, out: Path) -> DAG:
    dag = DAG("landing-lines")
    source = dag.new_vertex("lines", read_stream_p(frame, map_fn=_value))
    upper = dag.new_vertex("upper", map_p(_upper))
    sink = dag.new_vertex("sink", write_file_transactional_p(str(out)))
    dag.edge(between(source, upper).distributed())
    dag.edge(between(upper, sink))
    return dag


def land(directory: Path, name: str, lines: list[str]) -> None:
    """Writes a file beside the directory, then moves it in whole (as Spark's file source
    expects of new files)."""
    staging = directory.parent / f".{name}"
    staging.write_text("".join(f"{line}\n" for line in lines))
    staging.rename(directory / name)


def wait_for(job: Job, condition: Any, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert not job.status.is_terminal, job.join(0)
        assert time.monotonic() < deadline, "the stream made no progress"
        time.sleep(0.1)


def test_files_landing_are_committed_once_across_a_cancel_and_a_continue(
    spark_engine: Any, session: Any, tmp_path: Path
) -> None:
    incoming, out = tmp_path / "incoming", tmp_path / "out"
    incoming.mkdir()
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    expected: list[str] = []

    def frame() -> Any:
        return session.readStream.option("maxFilesPerTrigger", 1).text(str(incoming))

    for run in range(2):
        job = spark_engine.new_job(
            lines_dag(frame(), out),
            EXACTLY_ONCE,
            snapshot_store=store,
            restore_from=store.latest() if run else None,
        )
        for batch in range(3):
            lines = [f"run{run}-file{batch}-line{n}" for n in range(50)]
            land(incoming, f"run{run}-{batch}.txt", lines)
            expected += [line.upper() for line in lines]
        before = len(job.metrics.batches)
        wait_for(job, lambda: len(job.metrics.batches) >= before + 3)  # noqa: B023
        job.cancel()
        with pytest.raises(JobCancelledError):
            job.join(120)
        land(incoming, f"between-{run}.txt", [f"between-{run}"])  # lands while no job runs
        expected.append(f"BETWEEN-{run}")
    last = spark_engine.new_job(
        lines_dag(frame(), out), EXACTLY_ONCE, snapshot_store=store, restore_from=store.latest()
    )
    # a batch's output is published when the next batch restores it: land one more file so
    # that every expected line is published, then wait for them
    land(incoming, "sentinel.txt", ["sentinel"])
    wait_for(last, lambda: len(committed_lines(str(out))) >= len(expected))
    last.cancel()
    with pytest.raises(JobCancelledError):
        last.join(120)
    committed = [line for line in committed_lines(str(out)) if line != "SENTINEL"]
    assert committed == sorted(expected)  # every line once: none lost, none twice


def test_bad_input_is_refused_clearly(spark_engine: Any, session: Any, tmp_path: Path) -> None:
    batch_frame = session.createDataFrame([(1,)], "x int")
    with pytest.raises(TypeError, match="batch DataFrame"):
        read_stream_p(batch_frame)
    frame = session.readStream.text(str(tmp_path))
    with pytest.raises(DagValidationError, match="needs JobConfig"):
        spark_engine.new_job(lines_dag(frame, tmp_path / "out"))
    job = LocalEngine().new_job(lines_dag(frame, tmp_path / "out"))
    with pytest.raises(Exception, match="runs on SparkEngine only"):
        job.join(30)
