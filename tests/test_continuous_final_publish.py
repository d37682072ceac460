"""A continuous job that loses a member while its members publish their final states still
delivers every input exactly once (issue #32: the job restarted from before its end and `out`
held 200 items for 100 inputs).

The kill is placed, not timed: a processor of member 1 kills its own Python worker (SIGKILL)
in the `snapshot_committed()` that tells it its final state is committed, once, before the
member's transactional sink hears the same news.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import (
    DAG,
    AbstractProcessor,
    DirectorySnapshotStore,
    ExecutionMode,
    JobConfig,
    ProcessingGuarantee,
)
from jetspark.core.inbox import Inbox
from jetspark.edges import between, from_
from jetspark.processors import read_list_p, write_file_transactional_p, write_list_p

pytestmark = pytest.mark.spark

ITEMS = 100


class KillsWhenItsFinalStateIsCommitted(AbstractProcessor):
    """Takes items; processor 1 kills its Python worker when told that its final state is
    committed, the first time only (`marker` remembers)."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker
        self.completed = False

    def process(self, ordinal: int, inbox: Inbox) -> None:
        inbox.drain_to([])

    def complete(self) -> bool:
        self.completed = True
        return True

    def snapshot_committed(self) -> None:
        first = self.context.global_processor_index == 1 and not os.path.exists(self.marker)
        if self.completed and first:
            with open(self.marker, "w") as marker:
                marker.write(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)


def test_a_member_lost_while_publishing_final_states_leaves_every_item_once(
    spark_engine: Any, tmp_path: Any
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    engine.get_list("in").extend(range(ITEMS))
    files, marker = str(tmp_path / "files"), str(tmp_path / "killed")
    dag = DAG("lost while publishing")
    source = dag.new_vertex("source", read_list_p("in")).local_parallelism(2)
    # "a-kill" sorts before "files": on member 1 it is told first, so the sink's files of that
    # member are still unpublished when the member dies
    kill = dag.new_vertex("a-kill", lambda: KillsWhenItsFinalStateIsCommitted(marker))
    file_sink = dag.new_vertex("files", write_file_transactional_p(files))
    list_sink = dag.new_vertex("list", write_list_p("out"))
    for sink in (kill, file_sink, list_sink):
        sink.local_parallelism(1)
    dag.edge(between(source, kill).distributed())
    dag.edge(from_(source, 1).to(file_sink).distributed())
    dag.edge(from_(source, 2).to(list_sink).distributed())
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=600_000,  # the only snapshot is the one the job's end takes
        execution_mode=ExecutionMode.CONTINUOUS,
    )
    job = engine.new_job(dag, config, snapshot_store=DirectorySnapshotStore(tmp_path / "snaps"))
    job.join(240)
    assert os.path.exists(marker)
    assert job.metrics.restarts == 1
    assert sorted(engine.get_list("out")) == list(range(ITEMS))
    assert jobs.committed_lines(files) == sorted(str(n) for n in range(ITEMS))
