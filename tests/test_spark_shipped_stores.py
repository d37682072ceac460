"""A Spark job ships only the named stores its sources declare they read (issue 15)."""

from __future__ import annotations

import sys

import pytest
from pyspark import cloudpickle

from jetspark.core import DAG, JobStatus
from jetspark.core.abstract_processor import AbstractProcessor
from jetspark.core.spark.shipped_stores import shipped_contents, stores_read_by
from jetspark.core.stores import Stores
from jetspark.edges import from_
from jetspark.processors import read_list_p, read_map_p, write_list_p
from jetspark.processors.sources import SourceFn

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # executors cannot import tests


class StoreSizes(AbstractProcessor):
    """A source that reports how many entries the task sees in the map 'earlier-output'."""

    def complete(self) -> bool:
        return self.try_emit(("earlier-output", len(self.context.stores.get_map("earlier-output"))))


def dag_with(*sources: object) -> DAG:
    dag = DAG("shipping")
    sink = dag.new_vertex("sink", write_list_p("out"), local_parallelism=1)
    for ordinal, source in enumerate(sources):
        vertex = dag.new_vertex(f"source-{ordinal}", source, local_parallelism=1)
        dag.edge(from_(vertex).to(sink, ordinal))
    return dag


def driver_stores() -> Stores:
    stores = Stores()
    stores.get_list("in").extend([1, 2])
    stores.get_map("docs").update({0: "a"})
    stores.get_map("earlier-output").update({"word": [(0, 1.0)]})
    return stores


def test_sources_that_declare_their_stores_ship_only_those():
    dag = dag_with(read_list_p("in"), read_map_p("docs"))
    assert stores_read_by(dag) == {("list", "in"), ("map", "docs")}
    assert shipped_contents(dag, driver_stores()) == {
        "lists": {"in": [1, 2]},
        "maps": {"docs": {0: "a"}},
    }


def test_a_source_that_declares_nothing_ships_every_non_empty_store():
    dag = dag_with(read_list_p("in"), StoreSizes)
    assert stores_read_by(dag) is None
    assert shipped_contents(dag, driver_stores())["maps"] == {
        "docs": {0: "a"},
        "earlier-output": {"word": [(0, 1.0)]},
    }


@pytest.mark.spark
@pytest.mark.timeout(120)
def test_a_spark_job_leaves_earlier_outputs_on_the_driver(spark_engine):
    spark_engine.get_map("earlier-output").update({"word": [(0, 1.0)]})
    spark_engine.get_list("in").extend([1, 2])
    try:
        declared = SourceFn(StoreSizes, (("list", "in"),))
        job = spark_engine.new_job(dag_with(read_list_p("in"), declared))
        job.join()
        assert job.status is JobStatus.COMPLETED
        out = spark_engine.get_list("out")  # one StoreSizes processor on each of 2 members
        assert sorted(out, key=str) == [("earlier-output", 0)] * 2 + [1, 2]
        spark_engine.get_list("out").clear()
        job = spark_engine.new_job(dag_with(StoreSizes))  # declares nothing: everything shipped
        job.join()
        assert spark_engine.get_list("out") == [("earlier-output", 1)] * 2
    finally:
        for name in ("in", "out"):
            spark_engine.get_list(name).clear()
        spark_engine.get_map("earlier-output").clear()
