"""SparkEngine takes a snapshot store for one job at submit: a second job on the same store is
refused at once, naming the first, which runs on undisturbed; the store is free again once the
first job ended."""

from __future__ import annotations

from typing import Any

import pytest

from jetspark.core import (
    DAG,
    DirectorySnapshotStore,
    ExecutionMode,
    JobCancelledError,
    JobConfig,
    ProcessingGuarantee,
    SnapshotError,
)
from jetspark.edges import between
from jetspark.processors import stream_journal_p, write_list_p

pytestmark = pytest.mark.spark


def _endless(name: str) -> DAG:
    dag = DAG(name)
    source = dag.new_vertex("source", stream_journal_p("journal"))
    dag.edge(between(source, dag.new_vertex("sink", write_list_p(f"{name}-out"))))
    return dag


@pytest.mark.parametrize("mode", [ExecutionMode.CONTINUOUS, ExecutionMode.MICRO_BATCH])
def test_a_second_job_on_a_store_in_use_is_refused_naming_the_first(
    spark_engine: Any, tmp_path: Any, mode: ExecutionMode
) -> None:
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2)
    engine.get_list("journal").extend(range(20))
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    config = JobConfig(
        name="first",
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=50,
        execution_mode=mode,
    )
    first = engine.new_job(_endless("first"), config, snapshot_store=store)
    try:
        second = JobConfig(
            name="second",
            processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
            execution_mode=mode,
        )
        with pytest.raises(SnapshotError, match="first"):
            engine.new_job(_endless("second"), second, snapshot_store=store)
        assert not first.status.is_terminal
    finally:
        first.cancel()
        with pytest.raises(JobCancelledError):
            first.join(120)
    again = engine.new_job(
        _endless("first"), config, snapshot_store=store, restore_from=store.latest()
    )
    again.cancel()
    with pytest.raises(JobCancelledError):
        again.join(120)
