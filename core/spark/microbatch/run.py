"""The driver's side of a micro-batch job: batches of a bounded or Jet-streamed DAG, or the
batches Spark's own streaming query delivers to a `read_stream_p` vertex."""

from __future__ import annotations

from jetspark.core.config import JobConfig
from jetspark.core.dag import DAG
from jetspark.core.snapshot_store import DirectorySnapshotStore, Snapshot
from jetspark.core.spark.guarantees import stream_vertex
from jetspark.core.spark.job import EngineFacts, SparkJob
from jetspark.core.spark.job_group import wait_for_tasks_to_end
from jetspark.core.spark.microbatch.runner import MicroBatchRunner
from jetspark.core.spark.microbatch.spark_streams import run_streaming_query


def run_micro_batch_job(
    engine: EngineFacts,
    job: SparkJob,
    dag: DAG,
    config: JobConfig,
    restore_from: Snapshot | None,
) -> None:
    """Runs `job` batch after batch on the job's thread and ends it (never raises)."""
    assert isinstance(job.snapshot_store, DirectorySnapshotStore)
    runner = MicroBatchRunner(engine, job, dag, job.snapshot_store, restore_from)
    stream = stream_vertex(dag)
    error: BaseException | None = None
    try:
        if stream is None:
            runner.run(config)
        else:
            vertex, frame = stream
            name = dag.name or job.name
            run_streaming_query(runner, config, name, vertex, frame, restore_from is not None)
    except BaseException as failure:
        error = job.error_of(failure)
        wait_for_tasks_to_end(engine.context, job.group)
    job.mark_ended(error)
