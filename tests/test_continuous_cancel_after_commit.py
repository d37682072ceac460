"""A continuous job cancelled right after a commit publishes what the committed snapshot holds:
the commit reaches the members just before the cancel, and a member whose loop had not taken
it in yet still tells its transactional sinks at shutdown (issue #32: one member's files of
that snapshot stayed `.part-*.tmp`).

The members' loops are slow on purpose (their source sleeps in every round), so the commit and
the cancel land within one round: the member stops before it would have taken the commit in.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobCancelledError,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.edges import between
from jetspark.processors import write_file_transactional_p

pytestmark = pytest.mark.spark

ITEMS = 100
ROUND_SECONDS = 0.1


class EmitsThenSleeps(AbstractProcessor):
    """Processor 0 emits 0 .. ITEMS - 1; then every processor sleeps ROUND_SECONDS per call,
    for good (an unbounded source that went quiet, on a slow loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.next = 0

    def complete(self) -> bool:
        if self.context.global_processor_index == 0 and self.next < ITEMS:
            while self.next < ITEMS and self.try_emit(self.next):
                self.next += 1
            return False
        time.sleep(ROUND_SECONDS)
        return False

    def save_to_snapshot(self) -> bool:
        return self.try_emit_to_snapshot(f"next-{self.context.global_processor_index}", self.next)

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key == f"next-{self.context.global_processor_index}":
            self.next = value


def _number(item: int) -> int:
    return item


@pytest.mark.parametrize("run", range(3))
def test_a_cancel_right_after_a_commit_publishes_the_committed_snapshot(
    spark_engine: Any, tmp_path: Any, run: int
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    out, snapshots = str(tmp_path / "out"), str(tmp_path / "snapshots")
    dag = DAG("cancel after commit")
    source = dag.new_vertex("source", EmitsThenSleeps).local_parallelism(1)
    sink = dag.new_vertex("sink", write_file_transactional_p(out)).local_parallelism(1)
    dag.edge(between(source, sink).distributed().partitioned(_number))
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=2000,  # the items are all in before the first snapshot
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    store = DirectorySnapshotStore(snapshots)
    job = engine.new_job(dag, config, snapshot_store=store)
    committed = os.path.join(snapshots, "COMMITTED")
    deadline = time.monotonic() + 120
    while not os.path.exists(committed):  # the first commit: cancel at once
        assert not job.status.is_terminal and time.monotonic() < deadline
        time.sleep(0.001)
    job.cancel()
    with contextlib.suppress(JobCancelledError):
        job.join(120)
    assert jobs.committed_lines(out) == sorted(str(n) for n in range(ITEMS))
