"""A driver for the Kafka jobs on a real standalone cluster, the 127.0.0.1 one of
test_spark_cluster_faults.py or the network namespaces of test_netns_cluster.py (no tests here).

`python kafka_cluster_child.py MASTER WORK BOOTSTRAP` runs kafka_jobs.windowed_dag CONTINUOUS
and exactly-once on 2 members (one per worker) against the broker at BOOTSTRAP: half the records
are produced, and once a snapshot is committed an executor JVM is killed with SIGKILL and the
rest produced; the job restarts by itself. Prints, as its last line, the JSON of the committed
results read back with read_committed, the expected ones, the killed executors and the restarts.
"""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

from kafka_jobs import (
    expected_window_results,
    produce_numbers,
    produce_window_closers,
    topic_name,
    wait_for_results,
    windowed_dag,
)
from spark_cluster_child import _kill_an_executor_after_a_commit

from jetspark.core import DirectorySnapshotStore, ExecutionMode, JobConfig, ProcessingGuarantee
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.session import create_context

RECORDS = 3000
PARTITIONS = 3


def create_topics(bootstrap: str, *topics: str) -> None:
    """Creates each topic with PARTITIONS partitions (from the driver's host)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    requests = [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in topics]
    for future in admin.create_topics(requests).values():
        future.result(60)


def main(master: str, work: str, bootstrap: str) -> None:
    broker = SimpleNamespace(bootstrap_servers=bootstrap)
    source, sink = topic_name("in"), topic_name("out")
    create_topics(bootstrap, source, sink)
    context = create_context(master, "jetspark-kafka-executor-kill")
    engine = SparkEngine(context, members=2)
    snapshots = os.path.join(work, "snapshots")
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=200,
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    produce_numbers(broker, source, range(RECORDS // 2), PARTITIONS)
    job = engine.new_job(
        windowed_dag(broker, source, sink),
        config,
        snapshot_store=DirectorySnapshotStore(snapshots),
    )
    killed: list[int] = []
    _kill_an_executor_after_a_commit(context, snapshots, os.path.join(work, "killed"), killed)
    produce_numbers(broker, source, range(RECORDS // 2, RECORDS), PARTITIONS)
    produce_window_closers(broker, source, PARTITIONS, RECORDS + 1000)
    expected = expected_window_results(range(RECORDS))
    try:
        results = wait_for_results(broker, sink, expected, job)
    finally:
        job.cancel()
    output = {
        "results": results,
        "expected": expected,
        "killed": killed,
        "restarts": job.metrics.restarts,
    }
    print(json.dumps(output))


if __name__ == "__main__":
    main(*sys.argv[1:])
