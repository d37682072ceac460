"""Bad input met up front, with an error naming the culprit (issue 17, "Clear errors")."""

from __future__ import annotations

import math
from typing import Any

import pytest
from runtime_processors import Failing, ListSink, ListSource

from jetspark.core import (
    DAG,
    JobConfig,
    JobFailedError,
    LocalEngine,
    ProcessingGuarantee,
    Watermark,
)
from jetspark.edges import between
from jetspark.processors import generate_p, read_list_p

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("timestamp", ["5", 1.5, math.nan, True, None, 2.0])
def test_a_watermark_refuses_a_timestamp_that_is_not_an_int(timestamp: Any) -> None:
    with pytest.raises(TypeError, match="Watermark timestamp must be an int, got"):
        Watermark(timestamp)


def test_a_watermark_takes_any_integral_as_an_int() -> None:
    class Tick(int):
        pass

    watermark = Watermark(Tick(7))
    assert type(watermark.timestamp) is int and watermark == Watermark(7)


def pipeline() -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", lambda: ListSource("in"), 1)
    dag.edge(between(source, dag.new_vertex("sink", lambda: ListSink("out"), 1)))
    return dag


def test_new_job_refuses_what_is_not_a_dag_or_a_job_config() -> None:
    with pytest.raises(
        TypeError, match="new_job\\(\\) takes a DAG or a Pipeline, got str 'not a dag'"
    ):
        LocalEngine().new_job("not a dag")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a JobConfig \\(or None\\) as config, got dict"):
        LocalEngine().new_job(pipeline(), {"name": "x"})  # type: ignore[arg-type]


def test_new_job_refuses_a_snapshot_store_or_restore_point_of_the_wrong_kind(
    tmp_path: Any,
) -> None:
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE)
    with pytest.raises(TypeError, match=r"snapshot_store takes a SnapshotStore .*, got str"):
        LocalEngine().new_job(pipeline(), config, snapshot_store=str(tmp_path))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"restore_from takes a Snapshot \(store.latest\(\)\)"):
        LocalEngine().new_job(pipeline(), config, restore_from=7)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("snapshot_interval_millis", "10"),
        ("snapshot_interval_millis", 1.5),
        ("partition_count", True),
        ("max_watermark_retain_millis", None),
    ],
)
def test_job_config_refuses_a_setting_of_the_wrong_type(setting: str, value: Any) -> None:
    with pytest.raises(TypeError, match=f"{setting} must be an int, got"):
        JobConfig(**{setting: value})


def test_job_config_refuses_a_slow_callback_limit_that_is_no_positive_number() -> None:
    for value in ("5", 0, -1, math.nan):
        with pytest.raises(TypeError, match="slow_callback_millis must be a positive number"):
            JobConfig(slow_callback_millis=value)


def test_generate_p_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match=r"generate_p: count must be an int, got float 2\.5"):
        generate_p(2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="generate_p: count must not be negative"):
        generate_p(-1)
    with pytest.raises(TypeError, match="generate_p: map_fn must be callable"):
        generate_p(3, "x")  # type: ignore[arg-type]


def failure_of(dag: DAG, engine: LocalEngine | None = None) -> JobFailedError:
    with pytest.raises(JobFailedError) as caught:
        (engine or LocalEngine()).new_job(dag).join(timeout=20)
    return caught.value


def test_a_supplier_returning_one_instance_twice_fails_naming_the_vertex() -> None:
    shared = ListSink("out")
    dag = DAG()
    source = dag.new_vertex("source", lambda: ListSource("in"), 1)
    dag.edge(between(source, dag.new_vertex("sink", lambda: shared, 2)))
    error = failure_of(dag)
    assert error.vertex_name == "sink"
    assert "returned the same ListSink instance twice" in str(error)


def test_one_instance_on_two_members_is_refused_too() -> None:
    shared = ListSink("out")
    dag = DAG()
    source = dag.new_vertex("source", lambda: ListSource("in"), 1)
    dag.edge(between(source, dag.new_vertex("sink", lambda: shared, 1)))
    error = failure_of(dag, LocalEngine(members=2))
    assert "was already given to vertex 'sink'" in str(error)


def test_close_is_called_only_on_processors_whose_init_ran() -> None:
    first_closed: list[int] = []
    later_closed: list[int] = []
    dag = DAG()
    first = dag.new_vertex("first", lambda: Failing("init", first_closed), 1)
    later = dag.new_vertex("later", lambda: Failing("never", later_closed), 2)
    dag.edge(between(first, later))
    error = failure_of(dag)
    assert error.vertex_name == "first" and error.callback == "init"
    assert first_closed == [0]  # its init() ran (and raised): it is closed
    assert later_closed == []  # never initialised, never closed


class FixedPartitioner:
    """Gives every key the same partition id, whatever it is."""

    def __init__(self, result: Any) -> None:
        self.result = result

    def partition(self, key: object, partition_count: int) -> int:
        return self.result  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"FixedPartitioner({self.result!r})"


@pytest.mark.parametrize("result", [-1, 271, 3.0])
def test_a_partition_id_out_of_range_names_the_partitioner_and_the_value(result: Any) -> None:
    dag = DAG()
    source = dag.new_vertex("source", lambda: ListSource("in"), 1)
    sink = dag.new_vertex("sink", lambda: ListSink("out"), 2)
    dag.edge(between(source, sink).partitioned(lambda item: item, FixedPartitioner(result)))
    engine = LocalEngine(members=2)
    engine.get_list("in")[:] = ["a", "b"]
    error = failure_of(dag, engine)
    assert error.vertex_name == "source" and "routing to edge" in str(error)
    assert f"partitioner FixedPartitioner({result!r}) returned {result!r} for key 'a'" in str(error)
    assert "in range(271)" in str(error)


def test_read_list_p_refuses_a_none_item_naming_the_vertex_and_position() -> None:
    engine = LocalEngine()
    engine.get_list("with_none")[:] = ["a", None, "c"]
    dag = DAG()
    source = dag.new_vertex("reader", read_list_p("with_none"), 1)
    dag.edge(between(source, dag.new_vertex("sink", lambda: ListSink("out"), 1)))
    error = failure_of(dag, engine)
    assert error.vertex_name == "reader"
    assert "read_list_p('with_none') found None at position 1" in str(error)
