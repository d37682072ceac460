"""SparkEngine on the session's local[2] SparkContext: the same verdicts as LocalEngine for the
shared jobs of spark_jobs.py, with 2 and 3 members; failures, retries, cancellation, bad input,
explain(), Spark UI names and RDD interop."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark import RDD
from runtime_processors import (
    Endless,
    Failing,
    ListSink,
    ListSource,
    MapSink,
    ScriptSource,
    SumByKey,
)
from spark_jobs import (
    LP,
    SHARED_JOBS,
    expected,
    local_verdict,
    routing_dag,
    run_job,
    run_subprocess,
)
from test_local_engine import TEXT, tf_idf_dag, word_count_dag

from jetspark.core import (
    DAG,
    Context,
    DagValidationError,
    JobCancelledError,
    JobFailedError,
    JobStatus,
    LocalEngine,
    Outbox,
)
from jetspark.core.runtime.metrics import JobMetrics
from jetspark.core.spark import SparkEngine
from jetspark.edges import Edge, between, from_
from jetspark.partitioning import HASH_CODE
from jetspark.processors.sinks import write_rdd_p
from jetspark.processors.sources import read_rdd_p

pytestmark = [pytest.mark.spark, pytest.mark.timeout(120)]

SORTED_STAGES: dict[str, list[int]] = {
    "word_count": [],
    "tf_idf": [],
    "routing": [],
    "priority_union": [],
    "priority_sort": [],
    "priority_resort": [2],
    "exchange": [],
    "windowed_count": [],
}
"""Per shared job, the stages whose input Spark sorts again to keep edge priorities: one
upstream stage's sorted shuffle and the union of co-partitioned shuffles of one rank each keep
them for free."""


@pytest.fixture(scope="module", params=[2, 3], ids=["members=2", "members=3"])
def spark(request: pytest.FixtureRequest, spark_engine: SparkEngine) -> SparkEngine:
    """The session's engine (local[2], 2 members), and one with 3 members on its context."""
    assert spark_engine.members == 2
    if request.param == spark_engine.members:
        return spark_engine
    return SparkEngine(spark=spark_engine.context, members=request.param)


@pytest.mark.parametrize("name", SHARED_JOBS)
def test_local_engine_gives_the_expected_verdict(name: str) -> None:
    assert local_verdict(name) == expected(name)


@pytest.mark.parametrize("name", SHARED_JOBS)
def test_spark_gives_local_engines_verdict(name: str, spark: SparkEngine, tmp_path: Path) -> None:
    job, verdict = run_job(name, spark, tmp_path)
    assert verdict == local_verdict(name)
    assert job.translation is not None
    assert sorted(job.translation.sorted_stages) == SORTED_STAGES[name]


def test_a_stage_read_by_several_stages_runs_once(spark: SparkEngine, tmp_path: Path) -> None:
    """routing's source stage feeds four stages through one shuffle: its tasks run once, and
    its metrics reach the driver through one heir."""
    job, _ = run_job("routing", spark, tmp_path)
    tracker = spark.context.statusTracker()
    tasks = sum(
        tracker.getStageInfo(stage).numCompletedTasks
        for spark_job in tracker.getJobIdsForGroup(job.group)
        for stage in tracker.getJobInfo(spark_job).stageIds
    )
    assert tasks == 5 * spark.members
    assert len(job.metrics.of_vertex("source")) == spark.members * LP


def _counters(metrics: JobMetrics) -> dict[str, Any]:
    """Per vertex and per edge totals: what does not depend on how a member spread its work."""
    vertices: dict[str, Counter[str]] = {}
    for p in metrics.processors:
        totals = vertices.setdefault(p.vertex, Counter())
        totals.update(
            received=sum(p.received_count.values()), emitted=sum(p.emitted_count.values())
        )
    edges = {e.name: (e.emitted_count, e.received_count) for e in metrics.edges}
    return {"vertices": vertices, "edges": edges}


def test_metrics_match_local_engines(spark: SparkEngine, tmp_path: Path) -> None:
    spark_job, _ = run_job("word_count", spark, tmp_path / "spark")
    local_job, _ = run_job("word_count", LocalEngine(members=spark.members), tmp_path / "local")
    assert _counters(spark_job.metrics) == _counters(local_job.metrics)
    assert len(spark_job.metrics.of_vertex("combine")) == spark.members * LP


# --- faults and bad input ---------------------------------------------------------------------


@pytest.mark.parametrize("callback", ["init", "process", "complete"])
def test_a_failing_processor_fails_the_job_with_its_traceback(
    callback: str, spark_engine: SparkEngine
) -> None:
    dag = DAG("failing")
    source = dag.new_vertex("source", lambda: ScriptSource({u: [u, u + 10] for u in range(4)}), LP)
    sink = dag.new_vertex("sink", lambda: Failing(callback, []), LP)
    dag.edge(between(source, sink).distributed())
    job = spark_engine.new_job(dag)
    with pytest.raises(JobFailedError) as caught:
        job.join(timeout=60)
    error = caught.value
    assert job.status is JobStatus.FAILED
    assert (error.vertex_name, error.callback) == ("sink", callback)
    assert error.processor_index in range(2 * LP)
    message = str(error)
    assert f"vertex 'sink', processor #{error.processor_index} failed in {callback}" in message
    assert f"ValueError: boom in {callback}" in message
    assert "Traceback (most recent call last)" in message and "in _maybe_fail" in message


def test_a_cancelled_job_stops_even_right_after_submission(spark_engine: SparkEngine) -> None:
    dag = DAG("endless")
    source = dag.new_vertex("source", Endless, 1)
    sink = dag.new_vertex("sink", lambda: ListSink("endless"), 1)
    dag.edge(between(source, sink).distributed())
    job = spark_engine.new_job(dag)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(timeout=30)
    assert job.status is JobStatus.CANCELLED


def counting_dag(route: Callable[[Edge], Edge]) -> DAG:
    """Counts the words of list "words" after a distributed edge routed by `route`."""
    dag = DAG("counting")
    source = dag.new_vertex("source", lambda: ListSource("words"), LP)
    count = dag.new_vertex("count", SumByKey, LP)
    sink = dag.new_vertex("sink", lambda: MapSink("counts"), 1)
    dag.edge(route(between(source, count).distributed()))
    dag.edge(between(count, sink))
    return dag


@pytest.mark.parametrize(
    ("route", "explanation"),
    [
        (
            lambda edge: edge.partitioned(str, HASH_CODE),
            ["hash() of str/bytes is randomised per worker process", "allow_nondeterministic=True"],
        ),
        (Edge.isolated, ["isolated routing works on local edges only"]),
    ],
    ids=["hash-code", "isolated"],
)
def test_a_distributed_edge_spark_cannot_route_is_refused_at_submit(
    route: Callable[[Edge], Edge], explanation: list[str], spark_engine: SparkEngine
) -> None:
    with pytest.raises(DagValidationError) as caught:
        spark_engine.new_job(counting_dag(route))
    message = str(caught.value)
    assert "source" in message and "count" in message
    assert all(fragment in message for fragment in explanation), message


def test_hash_code_on_a_distributed_edge_runs_when_the_user_opts_in(
    spark_engine: SparkEngine,
) -> None:
    """The opt-in is honoured; PySpark gives every worker the driver's hash seed here."""
    words = [word for line in TEXT[:500] for word in line.split()]
    spark_engine.get_list("words")[:] = words
    spark_engine.get_map("counts").clear()
    dag = counting_dag(lambda edge: edge.partitioned(str, HASH_CODE, allow_nondeterministic=True))
    spark_engine.new_job(dag).join(timeout=60)
    assert spark_engine.get_map("counts") == Counter(words)


def test_a_task_failing_on_its_first_attempt_is_retried_and_loses_no_line(
    tmp_path: Path,
) -> None:
    """local[2,3]: Spark tries a task up to 3 times; its own process, as one context fits one."""
    output = run_subprocess("local[2,3]", 2, ["retry"], tmp_path)
    verdict = output["verdicts"]["retry"]
    assert verdict.pop("failed_attempts") > 0
    assert verdict == expected("retry")


# --- what a user sees: explain(), Spark UI names --------------------------------------------


@pytest.mark.parametrize(
    ("build", "lines"),
    [
        (
            lambda: word_count_dag(LP),
            [
                "Stage 0: source+tokenize+accumulate",
                "Stage 1: combine+sink",
                "tokenize  local parallelism 2, total {total}",
                "local edge  tokenize:0 -> accumulate:0  partitioned by",
                "in  shuffle from stage 0: accumulate:0 -> combine:0  partitioned by",
                "(MurmurHashPartitioner)",
            ],
        ),
        (
            tf_idf_dag,
            [
                "Stage 0: stopword-source+doc-source+doc-lines+tokenize+tf",
                "Stage 1: doc-count+tf-idf+sink",
                "local edge  doc-count:0 -> tf-idf:0  broadcast, priority -1",
                "in  shuffle from stage 0: doc-source:0 -> doc-count:0  broadcast",
            ],
        ),
        (
            lambda: routing_dag(2),
            [
                "out shuffled once by target member, read by stage(s) 1, 2, 3, 4",
                "in  shuffle from stage 0: source:3 -> all-to-one:0  all-to-one",
            ],
        ),
    ],
    ids=["word count", "tf-idf", "routing"],
)
def test_explain_names_stages_shuffles_members_and_parallelism(
    build: Callable[[], DAG], lines: list[str], spark: SparkEngine
) -> None:
    text = spark.explain(build())
    assert f"on Spark: {spark.members} members" in text
    for line in lines:
        assert line.format(total=LP * spark.members) in text, text


def test_the_spark_ui_names_stages_after_vertices_and_jobs_after_the_dag(
    spark_engine: SparkEngine, tmp_path: Path
) -> None:
    job, _ = run_job("word_count", spark_engine, tmp_path)
    assert job.translation is not None
    names = [rdd.name() for rdd in job.translation.outputs]
    assert names == ["source+tokenize+accumulate", "combine+sink"]
    context = spark_engine.context
    store = context._jsc.sc().statusStore()
    descriptions = {
        store.job(spark_job).description().get()
        for spark_job in context.statusTracker().getJobIdsForGroup(job.group)
    }
    assert descriptions == {"jetspark word count: source+tokenize+accumulate | combine+sink"}


# --- RDD interop -----------------------------------------------------------------------------


@pytest.mark.parametrize("partitions", [1, 5])
def test_an_rdd_goes_through_a_job_without_passing_the_driver(
    partitions: int, spark: SparkEngine
) -> None:
    """An RDD with fewer or more partitions than members feeds read_rdd_p (which drops the RDD
    when pickled into tasks); write_rdd_p's items come back as an RDD, not into a store."""
    words = [word for line in TEXT[:300] for word in line.split()]
    dag = DAG("rdd in, rdd out")
    source = dag.new_vertex("source", read_rdd_p(spark.context.parallelize(words, partitions)))
    count = dag.new_vertex("count", SumByKey, LP)
    sink = dag.new_vertex("sink", write_rdd_p("counts"))
    dag.edge(between(source, count).distributed().partitioned(str))
    dag.edge(between(count, sink))
    spark.get_list("counts").clear()
    job = spark.new_job(dag)
    job.join(timeout=60)
    counts = job.rdd("counts")
    assert isinstance(counts, RDD)
    assert dict(counts.collect()) == Counter(words)
    assert spark.get_list("counts") == []


class CountsInits(SumByKey):
    """SumByKey that also appends a line to the file `path` when a processor starts."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def init(self, outbox: Outbox, context: Context) -> None:
        super().init(outbox, context)
        with open(self.path, "a") as log:
            log.write("init\n")


def test_job_rdd_reads_the_kept_output_without_running_the_job_again(
    spark_engine: SparkEngine, tmp_path: Path
) -> None:
    """The RDD sink's items ride to the terminal stage, whose output job.rdd() must reuse."""
    inits = tmp_path / "inits"
    words = [word for line in TEXT[:100] for word in line.split()]
    dag = DAG("rdd sink before a shuffle")
    source = dag.new_vertex("source", lambda: ListSource("words"), 1)
    copy = dag.new_vertex("copy", write_rdd_p("copy"))
    count = dag.new_vertex("count", lambda: CountsInits(str(inits)), 1)
    sink = dag.new_vertex("sink", lambda: MapSink("counts"), 1)
    dag.edge(from_(source, 0).to(copy))
    dag.edge(from_(source, 1).to(count).distributed().partitioned(str))
    dag.edge(between(count, sink))
    spark_engine.get_list("words")[:] = words
    job = spark_engine.new_job(dag)
    job.join(timeout=60)
    assert inits.read_text().count("init") == spark_engine.members
    assert sorted(job.rdd("copy").collect()) == sorted(words)
    assert inits.read_text().count("init") == spark_engine.members
