"""A driver process for test_kafka_spark.py's driver-kill test (no tests here).

`python kafka_driver_child.py BOOTSTRAP SOURCE SINK SNAPSHOTS MEMBERS MODE [restore]` runs
kafka_jobs.windowed_dag on local[3] with MEMBERS members, in execution mode MODE (an
ExecutionMode's name) and exactly-once, taking snapshots into SNAPSHOTS (restoring the latest
one with `restore`), and prints "running" once the job was submitted; it runs until it is
killed or the job ends.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

from kafka_jobs import windowed_dag

from jetspark.core import DirectorySnapshotStore, ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.session import create_context


def main(
    bootstrap: str, source: str, sink: str, snapshots: str, members: str, mode: str, *restore: str
) -> None:
    engine = SparkEngine(create_context("local[3]", "jetspark-kafka-driver"), members=int(members))
    store = DirectorySnapshotStore(snapshots)
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=200,
        execution_mode=ExecutionMode[mode],
    )
    restored = store.latest() if restore == ("restore",) else None
    dag = windowed_dag(SimpleNamespace(bootstrap_servers=bootstrap), source, sink)
    job = engine.new_job(dag, config, snapshot_store=store, restore_from=restored)
    print("running", flush=True)
    job.join()


if __name__ == "__main__":
    main(*sys.argv[1:])
