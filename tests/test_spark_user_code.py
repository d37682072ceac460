"""Your own code on Spark (issue 12): user modules ship themselves, errors name the vertex and
carry no JVM stack, the console shows jetspark's own stage progress.

The processors below are defined in this test module, which the executors cannot import (pytest
puts tests/ on the driver's sys.path only), and nothing registers it to be pickled by value:
SparkEngine finds and ships it by itself. `user_project.py` runs a user's project as a script
from a third directory (`test_spark_cluster.py` runs the same on the standalone cluster).
"""

from __future__ import annotations

import io
import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException
from user_project import EXPECTED_COUNTS, run_driver, write_project

from jetspark.core import (
    DAG,
    AbstractProcessor,
    ExecutionMode,
    JobConfig,
    JobFailedError,
    ProcessingGuarantee,
)
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.failures import (
    missing_module_advice,
    python_traceback,
    spark_error_summary,
)
from jetspark.core.spark.progress import StageProgress
from jetspark.core.spark.user_code import is_user_module, modules_pickled_by_reference
from jetspark.edges import between
from jetspark.processors import (
    aggregate_by_key_p,
    map_p,
    read_list_p,
    read_rdd_p,
    write_list_p,
    write_map_p,
)
from jetspark.processors.aggregate import to_list

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

JVM_FRAME = "at org.apache"
ONE_ITEM_BATCHES = JobConfig(
    processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, execution_mode=ExecutionMode.MICRO_BATCH
)
"""With SparkEngine(batch_items=1): batch 1 saves an object in a snapshot."""

SPARK_ERRORS = (Py4JJavaError, CapturedException)
"""How a failed Spark action surfaces: a Py4J error, or once Spark SQL installed its handler in
the process (a SparkSession exists), pyspark's captured exception."""


class Shout(AbstractProcessor):
    """A processor class of this test module: upper-cases words."""

    def try_process0(self, word: str) -> bool:
        return self.try_emit(shout(word))


def shout(word: str) -> str:
    """A helper function of this test module."""
    return word.upper()


def first_letter(word: str) -> str:
    return word[0]


@dataclass(frozen=True)
class Guarded:
    """A function object holding a lock, which cannot be pickled."""

    lock: Any

    def __call__(self, item: Any) -> Any:
        with self.lock:
            return item


def words_dag() -> DAG:
    """words -> Shout -> (distributed, partitioned by first letter) -> sink."""
    dag = DAG("shout")
    source = dag.new_vertex("source", read_list_p("words"))
    upper = dag.new_vertex("upper", Shout)
    sink = dag.new_vertex("sink", write_list_p("shouted"))
    dag.edge(between(source, upper))
    dag.edge(between(upper, sink).distributed().partitioned(first_letter))
    return dag


def test_processors_of_a_test_module_run_on_the_executors(spark_engine: SparkEngine) -> None:
    spark_engine.get_list("words")[:] = ["cat", "dog", "ant", "cow"]
    spark_engine.get_list("shouted").clear()
    spark_engine.new_job(words_dag()).join(timeout=120)
    assert sorted(spark_engine.get_list("shouted")) == ["ANT", "CAT", "COW", "DOG"]


def test_the_dry_run_sees_the_modules_pickled_by_reference() -> None:
    assert "json" in modules_pickled_by_reference(map_p(json.dumps))
    assert is_user_module(__name__)
    assert not is_user_module("json")
    assert not is_user_module("numpy")
    assert not is_user_module("jetspark.core.dag")


def test_an_unpicklable_supplier_is_named_at_submit_time(spark_engine: SparkEngine) -> None:
    dag = DAG("guarded")
    source = dag.new_vertex("source", read_list_p("words"))
    guarded = dag.new_vertex("guarded-vertex", map_p(Guarded(threading.Lock())))
    dag.edge(between(source, guarded))
    with pytest.raises(JobFailedError) as caught:
        spark_engine.new_job(dag)
    assert str(caught.value) == (
        "vertex 'guarded-vertex': its processor supplier cannot be sent to the executors: "
        "TypeError: cannot pickle '_thread.lock' object"
    )
    assert caught.value.vertex_name == "guarded-vertex"
    assert isinstance(caught.value.__cause__, TypeError)


def test_an_unpicklable_key_function_names_the_edge(spark_engine: SparkEngine) -> None:
    dag = DAG("guarded-key")
    source = dag.new_vertex("source", read_list_p("words"))
    sink = dag.new_vertex("sink", write_list_p("out"))
    dag.edge(between(source, sink).distributed().partitioned(Guarded(threading.Lock())))
    with pytest.raises(JobFailedError, match=r"^edge 'source:0 -> sink:0': its key function"):
        spark_engine.new_job(dag)


def test_a_spark_failure_outside_processors_is_python_level(spark_engine: SparkEngine) -> None:
    """The user's own RDD fails inside Spark before any processor sees it: the message has the
    Python exception and traceback, no JVM frame; the Py4J error is its `spark_error`, out of
    the chain of causes a traceback prints (issue #36)."""

    def broken(x: int) -> int:
        raise ValueError(f"bad record {x}")

    rdd = spark_engine.context.parallelize([1, 2], 2).map(broken)
    dag = DAG("rdd")
    source = dag.new_vertex("source", read_rdd_p(rdd))
    sink = dag.new_vertex("sink", write_list_p("out"))
    dag.edge(between(source, sink).distributed())
    with pytest.raises(JobFailedError) as caught:
        spark_engine.new_job(dag).join(timeout=120)
    message = str(caught.value)
    assert message.startswith("job-") and " failed on Spark: ValueError: bad record " in message
    assert "--- traceback in the Spark task ---\nTraceback (most recent call last):" in message
    assert JVM_FRAME not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    cause = caught.value.spark_error
    assert isinstance(cause, SPARK_ERRORS)
    if isinstance(cause, Py4JJavaError):  # SQL's handler, once installed, drops the JVM frames
        assert JVM_FRAME in str(cause)


def test_failure_text_is_summarised_without_jvm_frames(spark_engine: SparkEngine) -> None:
    def boom(_: int) -> int:
        raise KeyError("gone")

    with pytest.raises(SPARK_ERRORS) as caught:
        spark_engine.context.parallelize([1], 1).map(boom).collect()
    text = str(caught.value)
    assert spark_error_summary(text) == "KeyError: 'gone'"
    remote = python_traceback(text)
    assert remote is not None and remote.endswith("KeyError: 'gone'")
    assert JVM_FRAME not in remote
    assert spark_error_summary(
        "An error occurred while calling o1.x.\n: java.io.IOException: "
        "disk full\n\tat org.apache.spark.X.y(X.scala:1)\n"
    ) == ("java.io.IOException: disk full")


def test_objects_of_classes_shipped_by_value_cross_edges_but_snapshots_need_the_module(
    spark_engine: SparkEngine, tmp_path: Path
) -> None:
    """A module that reached the executors by value: objects of its classes cross a distributed
    edge with their class and come back to the driver as its own class. A snapshot keeps
    objects by reference (a later run must restore them as its own classes), so a job with a
    guarantee needs the module importable there: the error says so, and with ship=[path]
    the same job runs."""
    package = tmp_path / "points"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from dataclasses import dataclass\n\n"
        "@dataclass(frozen=True)\nclass Point:\n    x: int\n\n"
        "def to_point(x):\n    return Point(x)\n\n"
        "def x_of(point):\n    return point.x\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import points  # type: ignore[import-not-found]

        dag = DAG("points")
        source = dag.new_vertex("source", read_list_p("numbers"))
        make = dag.new_vertex("make", map_p(points.to_point))
        count = dag.new_vertex("collect", aggregate_by_key_p([points.x_of], to_list()))
        sink = dag.new_vertex("sink", write_map_p("points"))
        dag.edge(between(source, make)).edge(between(make, count).distributed())
        dag.edge(between(count, sink))
        expected = {x: [points.Point(x)] for x in (1, 2, 3)}
        by_value = SparkEngine(spark_engine.context)
        by_value.get_list("numbers").extend([1, 2, 3])
        by_value.new_job(dag).join(timeout=120)
        assert by_value.get_map("points") == expected
        received = [point for held in by_value.get_map("points").values() for point in held]
        assert {type(point) for point in received} == {points.Point}

        one_item_batches = SparkEngine(spark_engine.context, batch_items=1)
        one_item_batches.get_list("numbers").extend([1, 2, 3])
        with pytest.raises(JobFailedError) as caught:  # batch 1 saves [Point(1)]
            one_item_batches.new_job(dag, ONE_ITEM_BATCHES).join(timeout=120)
        assert caught.value.vertex_name == "collect"
        assert (
            "module 'points' reached the executors by value: objects of its classes may cross "
            "distributed edges, but a snapshot needs their module importable: ship it with "
            "SparkEngine(ship=[<path of points>])"
        ) in str(caught.value)
        shipped = SparkEngine(spark_engine.context, ship=[package], batch_items=1)
        shipped.get_list("numbers").extend([1, 2, 3])
        shipped.new_job(dag, ONE_ITEM_BATCHES).join(timeout=120)
        assert shipped.get_map("points") == expected
    finally:
        sys.path.remove(str(tmp_path))


def test_a_module_named_in_ship_travels_by_value(spark_engine: SparkEngine, tmp_path: Path) -> None:
    """A module from a folder that looks installed is not shipped by itself (the workers may
    have it); named with ship=[module], it travels by value."""
    folder = tmp_path / "site-packages"
    folder.mkdir()
    (folder / "shoutlib.py").write_text("def shout(word):\n    return word.upper() + '!'\n")
    sys.path.insert(0, str(folder))
    try:
        import shoutlib  # type: ignore[import-not-found]

        assert not is_user_module("shoutlib")
        engine = SparkEngine(spark_engine.context, ship=[shoutlib])
        dag = DAG("ship-module")
        source = dag.new_vertex("source", read_list_p("words"))
        loud = dag.new_vertex("loud", map_p(shoutlib.shout))
        sink = dag.new_vertex("sink", write_list_p("loud"))
        dag.edge(between(source, loud)).edge(between(loud, sink).distributed())
        engine.get_list("words").extend(["cat", "dog"])
        engine.new_job(dag).join(timeout=120)
        assert sorted(engine.get_list("loud")) == ["CAT!", "DOG!"]
    finally:
        sys.path.remove(str(folder))


@pytest.mark.parametrize("bars", [False, True], ids=["lines", "bars"])
def test_stage_progress(spark_engine: SparkEngine, bars: bool) -> None:
    """A line per finished stage (not a terminal), or a tqdm bar per stage (a terminal)."""
    spark_engine.get_list("words")[:] = ["cat", "dog"]
    job = spark_engine.new_job(words_dag())
    stream = io.StringIO()
    progress = StageProgress(spark_engine.context, job.group, stream, bars=bars)
    job.join(timeout=120)
    progress.close()
    output = stream.getvalue()
    members = spark_engine.members
    if bars:
        assert output.count(f"{members}/{members}") >= 2
        assert "Spark stage " in output
    else:
        lines = output.splitlines()
        assert len(lines) == 2
        for line in lines:
            assert line.startswith("  Spark stage ")
            assert f"finished: {members} tasks in " in line


def test_a_users_project_runs_from_anywhere_on_local(tmp_path: Path) -> None:
    """A script run from a third directory, its modules on a path only the driver has."""
    seen = run_driver(write_project(tmp_path), "local[2]")
    assert_user_project_results(seen)
    assert seen["stderr"] == ""


def assert_user_project_results(seen: dict[str, Any]) -> None:
    """What `user_project.run_driver` must see on any master."""
    assert seen["counts"] == EXPECTED_COUNTS
    assert seen["script_classes_cross"] is True
    in_snapshots = seen["script_classes_in_snapshots"]
    assert in_snapshots["vertex"] == "held"
    assert (
        "Tally is defined in the driver's script (__main__): its objects may cross distributed "
        "edges, but a snapshot needs their class importable: move it into a module"
    ) in in_snapshots["message"]
    assert seen["unpicklable"] == {
        "message": "vertex 'guarded-vertex': its processor supplier cannot be sent to the "
        "executors: TypeError: cannot pickle '_thread.lock' object",
        "vertex": "guarded-vertex",
        "cause": "TypeError",
    }
    missing = seen["missing_module"]["message"]
    assert "the executors cannot import module 'lockedlib' (needed by vertex 'shout')" in missing
    assert "SparkEngine(ship=[lockedlib])" in missing
    assert JVM_FRAME not in missing
    assert seen["missing_module"]["cause"] == "Py4JJavaError"
    assert seen["stopped"]["message"].startswith("the SparkEngine's SparkContext has been stopped")


def test_a_worker_python_without_jetspark_dependencies_is_named() -> None:
    """What a user's own context gets when its workers run a Python without mmh3."""
    advice = missing_module_advice("mmh3", {}, "/usr/bin/python3")
    assert advice.startswith(
        "the executors' Python (/usr/bin/python3) cannot import mmh3, which jetspark needs: "
    )
    assert f"PYSPARK_PYTHON, e.g. to this driver's {sys.executable}" in advice
    assert advice.endswith("pip install cryptography mmh3 msgpack numpy")
