"""Word count, every way the benchmarks run it; each returns the counts as a dict.

jetspark runs the manual's two-stage DAG, `build_dag` of examples/wordcount.py, reading the
files as a user would: `read_rdd_p(sc.textFile(dir))` on SparkEngine, `read_files_p(dir)` on
LocalEngine. The baselines are what a user writes instead, reading the files the same way
(`sc.textFile(dir)`, `open()`), and every side splits lines with the example's `words()`
(lowercase, split on `\\W+`), so they all do the same work and get the same counts.
"""

from __future__ import annotations

import importlib.util
import itertools
import operator
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from jetspark.core import JobConfig, LocalEngine

_EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@cache
def load_example(name: str) -> ModuleType:
    """examples/<name>.py as module `jetspark_example_<name>`, loaded once (examples/ is not a
    package)."""
    module_name = f"jetspark_example_{name}"
    spec = importlib.util.spec_from_file_location(module_name, _EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def example() -> ModuleType:
    """examples/wordcount.py, loaded once."""
    return load_example("wordcount")


def count_lines(lines: Iterable[str]) -> dict[str, int]:
    """The words of `lines` counted in one plain dict loop: what a user writes in Python."""
    split = example().words
    counts: dict[str, int] = {}
    get = counts.get
    for line in lines:
        for word in split(line):
            counts[word] = get(word, 0) + 1
    return counts


def count_plainly(directory: Path) -> dict[str, int]:
    """The single-process baseline: the files' lines, straight from the file objects, counted
    by `count_lines`."""
    paths = sorted(p for p in directory.iterdir() if p.is_file())
    with ExitStack() as stack:
        files = [stack.enter_context(path.open(encoding="utf-8")) for path in paths]
        return count_lines(itertools.chain.from_iterable(files))


def count_on_local_engine(directory: Path, members: int = 1) -> dict[str, int]:
    """The example's DAG on a fresh LocalEngine, reading the files with `read_files_p`."""
    from jetspark.processors import read_files_p

    engine = LocalEngine(members=members)
    # the members share this process's file system: each file is read once, by one of them
    dag = example().build_dag(source=read_files_p(str(directory), shared_file_system=True))
    engine.new_job(dag, JobConfig(name="bench word count")).join()
    return dict(engine.get_map(example().COUNTS))


def count_on_spark_engine(engine: Any, directory: Path) -> dict[str, int]:
    """The example's DAG on SparkEngine, reading `sc.textFile(dir)` with `read_rdd_p`."""
    from jetspark.processors import read_rdd_p

    counts = engine.get_map(example().COUNTS)
    counts.clear()
    source = read_rdd_p(engine.context.textFile(str(directory)))
    engine.new_job(example().build_dag(source=source), JobConfig(name="bench word count")).join()
    return dict(counts)


def count_files_on_spark_engine(engine: Any, directory: Path) -> dict[str, int]:
    """The example's DAG on SparkEngine, its tasks reading the files with `read_files_p`: large
    files are cut into line-aligned byte ranges spread over the members."""
    from jetspark.processors import read_files_p

    counts = engine.get_map(example().COUNTS)
    counts.clear()
    source = read_files_p(str(directory), shared_file_system=True)
    engine.new_job(example().build_dag(source=source), JobConfig(name="bench word count")).join()
    return dict(counts)


def count_rdd(context: Any, directory: Path) -> dict[str, int]:
    """The textbook PySpark word count: `flatMap` / `map` / `reduceByKey`."""
    return (  # type: ignore[no-any-return]
        context.textFile(str(directory))
        .flatMap(example().words)
        .map(lambda word: (word, 1))
        .reduceByKey(operator.add)
        .collectAsMap()
    )


def _partition_counts(lines: Iterable[str]) -> Iterator[tuple[str, int]]:
    """One partition's words counted in a dict: the pre-aggregation of the optimised RDD job."""
    return iter(count_lines(lines).items())


def count_rdd_preaggregated(context: Any, directory: Path) -> dict[str, int]:
    """The hand-optimised PySpark word count: a dict per partition, then `reduceByKey`."""
    return (  # type: ignore[no-any-return]
        context.textFile(str(directory))
        .mapPartitions(_partition_counts)
        .reduceByKey(operator.add)
        .collectAsMap()
    )


def count_dataframe(session: Any, directory: Path) -> dict[str, int]:
    """Spark SQL's word count, all in the JVM: split, explode, group by, count.

    Java's `\\W` is ASCII-only, Python's is not: on non-ASCII text the counts can differ.
    """
    from pyspark.sql import functions as f

    tokens = session.read.text(str(directory)).select(
        f.explode(f.split(f.lower(f.col("value")), r"\W+")).alias("word")
    )
    rows = tokens.where(f.col("word") != "").groupBy("word").count().collect()
    return {row["word"]: row["count"] for row in rows}
