"""A Spark task sends what its sinks write as it goes: no sink buffers a task's whole output.

The stage task runs in-process here (no Spark): its generator is what `mapPartitionsWithIndex`
iterates, so the records it yields before its source is exhausted are the ones that left the
task's memory early."""

from __future__ import annotations

from typing import Any

import pytest

from jetspark.core import DAG, JobConfig
from jetspark.core.runtime.plan import plan_job
from jetspark.core.serialization import decode_batch
from jetspark.core.spark.stages.plan import plan_stages
from jetspark.core.spark.stages.records import LIST, MAP, RDD, RESULT
from jetspark.core.spark.stages.task import StageTask
from jetspark.core.spark.stages.task_stores import RESULT_BATCH
from jetspark.edges import between
from jetspark.processors import generate_p, write_list_p, write_map_p
from jetspark.processors.sinks import write_rdd_p

ITEMS = 10 * RESULT_BATCH


class Shipped:
    """What a broadcast variable of the driver's (empty) stores gives a task."""

    value = {"lists": {}, "maps": {}}


def _pair(n: int) -> tuple[int, int]:
    return (n, n * n)


@pytest.mark.parametrize(
    ("kind", "sink", "item"),
    [
        (LIST, write_list_p("out"), None),
        (MAP, write_map_p("out"), _pair),
        (RDD, write_rdd_p("out"), None),
    ],
)
def test_sink_writes_leave_the_task_in_batches_while_it_runs(
    kind: str, sink: Any, item: Any
) -> None:
    emitted: list[int] = []

    def count(n: int) -> Any:
        emitted.append(n)
        return item(n) if item else n

    dag = DAG()
    source = dag.new_vertex("source", generate_p(ITEMS, count))
    out = dag.new_vertex("sink", sink)
    dag.edge(between(source, out))
    plan = plan_job(dag, JobConfig(), 1, 1)
    stage = plan_stages(dag).stages[0]
    task = StageTask(plan, 0, stage.vertices, frozenset(), Shipped())
    received: list[Any] = []
    emitted_when_first_sent = None
    for _member, body in task(0, iter(())):
        if body[0] == RESULT and body[1] == kind:
            if emitted_when_first_sent is None:
                emitted_when_first_sent = len(emitted)
            batch = decode_batch(body[3])
            assert len(batch) <= RESULT_BATCH
            received.extend(batch)
    assert emitted_when_first_sent is not None and emitted_when_first_sent < ITEMS // 2
    expected = [item(n) if item else n for n in range(ITEMS)]
    assert sorted(received) == expected
