"""Row 18: what the Pipeline API costs over the Core DAG an expert writes by hand.

- 18a, 18b: word count over the same files, `Sources.files` -> flat_map -> grouping_key ->
  aggregate(counting()) -> map sink on SparkEngine (local[2]), against examples/wordcount.py's
  DAG reading the files with the same processor (`read_files_p`), and against the
  hand-optimised RDD job (`textFile`, a dict per partition, `reduceByKey`);
- 18c: the stock-exchange sliding-window count of row 13a as a pipeline against the hand-built
  window DAG, CONTINUOUS exactly-once, events per second (a ratio >= 1 means no slower).

Every count is checked against the others (18a, 18b) or against the plain count (18c) first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import streaming_rows, wordcount
from bench.report import Goal, Row
from bench.timing import Samples, alternate


def count_pipeline_on_spark_engine(engine: Any, directory: Path) -> dict[str, int]:
    """Word count as a pipeline on SparkEngine, its tasks reading the files (`Sources.files`)."""
    from jetspark.core import JobConfig
    from jetspark.core.pipeline import Pipeline, Sinks, Sources
    from jetspark.processors.aggregate import counting
    from jetspark.processors.functions import whole_item

    counts = engine.get_map("pipeline-counts")
    counts.clear()
    p = Pipeline.create("word-count")
    p.draw_from(Sources.files(str(directory), shared_file_system=True)).flat_map(
        wordcount.example().words
    ).grouping_key(whole_item).aggregate(counting()).drain_to(Sinks.map("pipeline-counts"))
    engine.new_job(p, JobConfig(name="bench pipeline word count")).join()
    return dict(counts)


def pipeline_rows(
    spark: Any, directory: Path, megabytes: float, rounds: int, seconds: float
) -> list[Row]:
    """Rows 18a-c (module docstring), `rounds` alternating rounds each."""
    from jetspark.core import ExecutionMode

    word_counts = {
        "pipeline": lambda: count_pipeline_on_spark_engine(spark.engine, directory),
        "dag": lambda: wordcount.count_files_on_spark_engine(spark.engine, directory),
        "rdd": lambda: wordcount.count_rdd_preaggregated(spark.context, directory),
    }
    alternate(word_counts, 1)  # warm-up: the user code shipped, the Python workers started
    times, counts = alternate(word_counts, rounds)
    if not counts["pipeline"] == counts["dag"] == counts["rdd"]:
        raise AssertionError("the pipeline's word counts differ from the DAG's or the RDD's")
    size = f"word count {megabytes:.3g} MB, local[2]: pipeline vs"
    pipeline, continuous, dag = times["pipeline"], [], []
    for _ in range(rounds):
        mode = ExecutionMode.CONTINUOUS
        continuous.append(streaming_rows.spark_engine_rate(spark, mode, seconds, pipeline=True))
        dag.append(streaming_rows.spark_engine_rate(spark, mode, seconds))
    return [
        Row.compare(
            "18a",
            f"{size} the hand-built DAG (examples/wordcount.py, both `read_files_p`)",
            "s",
            pipeline,
            times["dag"],
            goal=Goal("<=", 1.0),
        ),
        Row.compare(
            "18b",
            f"{size} RDD `textFile` mapPartitions dict + reduceByKey",
            "s",
            pipeline,
            times["rdd"],
        ),
        Row.compare(
            "18c",
            "stock-exchange windows, CONTINUOUS exactly-once: pipeline vs the hand-built "
            "window DAG (row 13a's)",
            "events/s",
            Samples(tuple(continuous)),
            Samples(tuple(dag)),
            goal=Goal(">=", 0.95),
        ),
    ]
