"""Jobs driven by Spark's own streaming engine: a `read_stream_p` vertex over a Structured
Streaming DataFrame (processors/stream_sources.py).

The DataFrame's query runs with `foreachBatch`: Spark tracks the source's offsets in its
checkpoint directory (`spark-checkpoint/` inside the job's snapshot store, named to Spark by a
`file:` URI, so a cluster whose default file system is another one, HDFS say, still writes it
there), and each Spark batch `b` becomes jetspark micro-batch `base + b + 1` (runner.py): it
restores snapshot `base + b`, its stream vertex reads exactly the rows of Spark's batch, and it
commits snapshot `base + b + 1`. `base` is fixed when the checkpoint is made: the id of the
snapshot the query's first batch restores (0 without one; a snapshot of another store is
copied into this one under a new id first), kept in `spark-checkpoint.base` beside it. After a
driver crash Spark replays the batches its commit log lacks: a replayed batch whose snapshot is
already committed is skipped (its state is in the snapshot, its output published when it was
committed), any other one restores the state it started from. So nothing is committed twice.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

from jetspark.core.errors import JobCancelledError, SnapshotError
from jetspark.core.files import write_atomically
from jetspark.core.spark.microbatch.runner import MicroBatchRunner

CHECKPOINT_DIRECTORY = "spark-checkpoint"
BASE_FILE = "spark-checkpoint.base"
_POLL_SECONDS = 0.2


def run_streaming_query(
    runner: MicroBatchRunner, config: Any, name: str, vertex: str, frame: Any, restoring: bool
) -> None:
    """Runs the job's batches as Spark's streaming query delivers them, until the job is
    cancelled (JobCancelledError) or the query fails."""
    job = runner.job
    checkpoint = os.path.abspath(os.path.join(runner.store.directory, CHECKPOINT_DIRECTORY))
    if os.path.exists(checkpoint) and not restoring:
        raise SnapshotError(
            f"{runner.store} holds the Spark checkpoint of an earlier run of this stream: "
            "continue it with restore_from=store.latest(), or give the job an empty store"
        )
    runner.start()
    base = _batch_base(runner, checkpoint)

    def each_batch(batch: Any, batch_id: int) -> None:
        snapshot_id = base + batch_id + 1
        if runner.last is not None and runner.last.snapshot_id >= snapshot_id:
            return  # a batch Spark replays after a crash, already committed here
        runner.run_batch(config, snapshot_id, {vertex: batch.rdd})

    query = (
        frame.writeStream.queryName(name)
        .option("checkpointLocation", pathlib.Path(checkpoint).as_uri())
        .foreachBatch(each_batch)
        .start()
    )
    try:
        while not job.cancel_event.is_set():
            if query.awaitTermination(_POLL_SECONDS):
                return
        raise JobCancelledError(f"{job.name} was cancelled")
    finally:
        if query.isActive:
            query.stop()


def _batch_base(runner: MicroBatchRunner, checkpoint: str) -> int:
    """The id of the snapshot Spark's batch 0 restores (module docstring): recorded beside a
    new checkpoint, read back for an existing one (0 for a checkpoint recorded without it)."""
    path = os.path.join(runner.store.directory, BASE_FILE)
    if os.path.exists(checkpoint):
        try:
            with open(path, encoding="ascii") as file:
                return int(file.read())
        except FileNotFoundError:
            return 0
    base = runner.last.snapshot_id if runner.last is not None else 0
    write_atomically(path, str(base).encode("ascii"), 0o600)
    return base
