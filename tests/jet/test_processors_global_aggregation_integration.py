"""Port of Jet 0.7 `com.hazelcast.jet.impl.processor.Processors_globalAggregationIntegrationTest`
on a one-member LocalEngine (Jet's test starts one member), single-stage and two-stage.

Deliberate differences: Jet sleeps a second after the job to see no more items arrive; a
jetspark job that has completed emits nothing more, so the port checks the list once. On more
members the all-to-one edge leaves the other members' aggregate processors without input:
Jet 0.7's `aggregateP` (a GroupP with a constant key) emits nothing there, jetspark's emits the
result of an empty accumulator (the TF-IDF job's per-member document count relies on one
result per processor), so this DAG would give `[0, 3]` on two members.
"""

from __future__ import annotations

import pytest

from jetspark.core import DAG, LocalEngine
from jetspark.edges import between
from jetspark.processors import accumulate_p, aggregate_p, combine_p, read_list_p, write_list_p
from jetspark.processors.aggregate import summing

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("single_stage_processor", [True, False])
def test_smoke_test(single_stage_processor: bool) -> None:
    """`Processors_globalAggregationIntegrationTest.smokeTest`."""
    engine = LocalEngine()
    engine.get_list("source").extend([1, 2])
    summing_op = summing()
    dag = DAG()
    source = dag.new_vertex("source", read_list_p("source"), local_parallelism=1)
    sink = dag.new_vertex("sink", write_list_p("sink"))
    if single_stage_processor:
        aggregate = dag.new_vertex("aggregate", aggregate_p(summing_op), local_parallelism=1)
        dag.edge(between(source, aggregate).distributed().all_to_one())
        dag.edge(between(aggregate, sink).isolated())
    else:
        accumulate = dag.new_vertex("accumulate", accumulate_p(summing_op))
        combine = dag.new_vertex("combine", combine_p(summing_op), local_parallelism=1)
        dag.edge(between(source, accumulate))
        dag.edge(between(accumulate, combine).distributed().all_to_one())
        dag.edge(between(combine, sink).isolated())
    engine.new_job(dag).join(timeout=60)
    assert engine.get_list("sink") == [3]
