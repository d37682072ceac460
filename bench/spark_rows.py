"""The rows that run on Spark: word count (1), TF-IDF and the fixed costs (2), shuffle transport
(5), scaling and members (6), memory (7). One SparkContext serves them all; start-up is timed
once and excluded from every other row.
"""

from __future__ import annotations

import math
import os
import pickle
import resource
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from bench import wordcount
from bench.report import Goal, Row
from bench.timing import Samples, alternate, seconds, single
from jetspark.core import DAG, JobConfig
from jetspark.edges import between
from jetspark.edges.config import DEFAULT_QUEUE_SIZE
from jetspark.processors import aggregate_p, generate_p, write_list_p
from jetspark.processors.aggregate import counting

_KB = 1024
"""Linux reports ru_maxrss in kilobytes."""


@dataclass
class Spark:
    """The run's SparkContext, its SparkEngine, and what starting them took."""

    context: Any
    engine: Any
    context_seconds: float
    engine_seconds: float
    _session: Any = None

    @property
    def session(self) -> Any:
        """A SparkSession over the context, for the DataFrame baseline (made on first use)."""
        if self._session is None:
            from pyspark.sql import SparkSession

            self._session = SparkSession(self.context)
        return self._session

    def java_version(self) -> str:
        """The JVM's own version."""
        return str(self.context._jvm.System.getProperty("java.version"))


def start_spark(master: str) -> Spark:
    """Starts a quiet SparkContext on `master` and a SparkEngine on it, timing each."""
    from pyspark import cloudpickle

    from jetspark.core.spark import SparkEngine
    from jetspark.core.spark.session import create_context

    # The hand-written RDD baselines are no jetspark jobs, so SparkEngine does not ship their
    # code: bench/ is not installed on the workers, its functions travel by value.
    for module in (sys.modules[__name__], wordcount, wordcount.example()):
        cloudpickle.register_pickle_by_value(module)
    context_seconds, context = seconds(lambda: create_context(master, "jetspark-bench"))
    engine_seconds, engine = seconds(lambda: SparkEngine(spark=context))
    return Spark(context, engine, context_seconds, engine_seconds)


def _word_counts(spark: Spark, directory: Path) -> dict[str, Callable[[], dict[str, int]]]:
    return {
        "jetspark": lambda: wordcount.count_on_spark_engine(spark.engine, directory),
        "rdd": lambda: wordcount.count_rdd(spark.context, directory),
        "preaggregated": lambda: wordcount.count_rdd_preaggregated(spark.context, directory),
        "dataframe": lambda: wordcount.count_dataframe(spark.session, directory),
    }


def warm_up(spark: Spark, directory: Path) -> None:
    """Runs every word count once on a small input: Python workers, the SQL engine, JIT."""
    alternate(_word_counts(spark, directory), 1)


def word_count(
    spark: Spark, directory: Path, megabytes: float, rounds: int, ascii_text: bool
) -> list[Row]:
    """Row 1: the manual's DAG on SparkEngine vs three hand-written Spark word counts.

    Every count must agree; the DataFrame's only on ASCII text (Java's `\\W` is ASCII-only).
    """
    times, counts = alternate(_word_counts(spark, directory), rounds)
    for name in ("rdd", "preaggregated", *(("dataframe",) if ascii_text else ())):
        if counts[name] != counts["jetspark"]:
            raise AssertionError(f"word counts of jetspark and {name} differ")
    size = f"word count {megabytes:.3g} MB, local[2]: SparkEngine vs"
    jet = times["jetspark"]
    return [
        Row.compare("1a", f"{size} RDD flatMap/map/reduceByKey", "s", jet, times["rdd"]),
        Row.compare(
            "1b",
            f"{size} RDD mapPartitions dict + reduceByKey",
            "s",
            jet,
            times["preaggregated"],
            goal=Goal("<=", 1.0),
        ),
        Row.compare(
            "1c",
            f"{size} DataFrame split/explode/groupBy",
            "s",
            jet,
            times["dataframe"],
            note="the moonshot",
        ),
    ]


def word_count_files(
    spark: Spark, directories: dict[str, Path], megabytes: float, rounds: int
) -> list[Row]:
    """Rows 1d, 1e: the manual's DAG on SparkEngine reading the files in its tasks with
    `read_files_p` (one file, then the same text in many files) vs the hand-optimised RDD job
    reading them with `sc.textFile`."""
    rows = []
    for number, (what, directory) in zip(("1d", "1e"), directories.items(), strict=True):
        times, counts = alternate(
            {
                "jetspark": lambda d=directory: wordcount.count_files_on_spark_engine(
                    spark.engine, d
                ),
                "preaggregated": lambda d=directory: wordcount.count_rdd_preaggregated(
                    spark.context, d
                ),
            },
            rounds,
        )
        if counts["jetspark"] != counts["preaggregated"]:
            raise AssertionError(f"word counts of {what} differ")
        title = (
            f"word count {megabytes:.3g} MB in {what}, local[2]: SparkEngine `read_files_p` vs "
            "RDD `textFile` mapPartitions dict + reduceByKey"
        )
        jet, rdd = times["jetspark"], times["preaggregated"]
        rows.append(Row.compare(number, title, "s", jet, rdd, goal=Goal("<=", 0.9)))
    return rows


def tf_idf(spark: Spark, corpus_dir: Path, megabytes: float, rounds: int) -> list[Row]:
    """Row 2: bench/bench_tfidf.py's measurement (SparkEngine vs the best RDD TF-IDF), repeated."""
    from bench import bench_tfidf
    from jetspark.processors.tfidf import scan_corpus

    corpus = scan_corpus(str(corpus_dir))
    runs = [bench_tfidf.measure(spark.engine, corpus) for _ in range(rounds)]
    jet = Samples(tuple(run["jetspark_seconds"] for run in runs))
    rdd = Samples(tuple(run["rdd_seconds"] for run in runs))
    title = (
        f"TF-IDF {megabytes:.3g} MB ({runs[0]['documents']:,} documents): SparkEngine vs "
        "hand-written RDD TF-IDF"
    )
    return [Row.compare("2", title, "s", jet, rdd, goal=Goal("<=", 1.0))]


def fixed_costs(spark: Spark, one_line_dir: Path, rounds: int) -> list[Row]:
    """Rows 2b, 2c: start-up (SparkContext + SparkEngine vs SparkContext alone) and a job over
    one line, end to end, vs the same on a hand-written RDD."""
    startup = Row.compare(
        "2b",
        "start-up: SparkContext + SparkEngine vs SparkContext alone",
        "s",
        single(spark.context_seconds + spark.engine_seconds),
        single(spark.context_seconds),
    )
    times, _ = alternate(
        {
            "jetspark": lambda: wordcount.count_on_spark_engine(spark.engine, one_line_dir),
            "rdd": lambda: wordcount.count_rdd(spark.context, one_line_dir),
        },
        rounds,
    )
    job = Row.compare(
        "2c",
        "one-line word count end to end: SparkEngine vs RDD flatMap/map/reduceByKey",
        "s",
        times["jetspark"],
        times["rdd"],
    )
    return [startup, job]


@dataclass(frozen=True)
class _Pair:
    """Item n of the shuffle benchmarks: (a word, n), the typical (key, value) item."""

    words: tuple[str, ...]

    def __call__(self, n: int) -> tuple[str, int]:
        return (self.words[n % len(self.words)], n)


def _records(
    mode: str, pair: _Pair, members: int, count: int
) -> Callable[[int, Iterator[Any]], Iterator[Any]]:
    """The map side of a shuffle benchmark: member m's share of the items as records for
    `partitionBy`, one per item ("record"), or one per 1,024-item batch ("msgpack", the codec
    jetspark's batches used before issue 15; "pickle": protocol 5, what `encode_batch` does),
    sent round-robin to the members."""

    def produce(member: int, _: Iterator[Any]) -> Iterator[Any]:
        items = [pair(n) for n in range(member, count, members)]
        if mode == "record":
            yield from ((n % members, item) for n, item in enumerate(items))
            return
        encode = _msgpack_batch if mode == "msgpack" else _pickle_batch
        for n, start in enumerate(range(0, len(items), DEFAULT_QUEUE_SIZE)):
            yield n % members, encode(items[start : start + DEFAULT_QUEUE_SIZE])

    return produce


def _pickle_batch(items: list[Any]) -> bytes:
    return pickle.dumps(items, protocol=5)


def _msgpack_batch(items: list[Any]) -> bytes:
    return msgpack.packb(items, use_bin_type=True)


def _msgpack_items(payload: bytes) -> Any:
    return msgpack.unpackb(payload, use_list=False, raw=False)


def _received(mode: str) -> Callable[[Iterator[Any]], Iterator[int]]:
    """The reduce side: decodes what arrived and counts the items."""

    def count(records: Iterator[Any]) -> Iterator[int]:
        if mode == "record":
            yield sum(1 for _ in records)
        else:
            decode = _msgpack_items if mode == "msgpack" else pickle.loads
            yield sum(len(decode(payload)) for _, payload in records)

    return count


def _shuffle_rdd(spark: Spark, mode: str, pair: _Pair, count: int) -> int:
    members = spark.engine.members
    return int(
        spark.context.parallelize(range(members), members)
        .mapPartitionsWithIndex(_records(mode, pair, members, count))
        .partitionBy(members, _member)
        .mapPartitions(_received(mode))
        .sum()
    )


def _member(key: int) -> int:
    return key


def _shuffle_engine(spark: Spark, pair: _Pair, count: int) -> int:
    """The same items across a distributed (unicast) edge of a SparkEngine job, counted there."""
    dag = DAG("shuffle")
    source = dag.new_vertex("generate", generate_p(count, pair))
    counter = dag.new_vertex("count", aggregate_p(counting()))
    sink = dag.new_vertex("sink", write_list_p("shuffled"))
    dag.edge(between(source, counter).distributed())
    dag.edge(between(counter, sink))
    received = spark.engine.get_list("shuffled")
    received.clear()
    spark.engine.new_job(dag, JobConfig(name="bench shuffle")).join()
    return sum(received)


def shuffle(spark: Spark, words: tuple[str, ...], count: int, rounds: int) -> list[Row]:
    """Row 5: items per second through a Spark shuffle: batched msgpack records, batched pickle
    records (jetspark's codec), and SparkEngine's distributed edge, vs one Spark record per
    item."""
    pair = _Pair(words)
    times, counts = alternate(
        {
            "record": lambda: _shuffle_rdd(spark, "record", pair, count),
            "msgpack": lambda: _shuffle_rdd(spark, "msgpack", pair, count),
            "pickle": lambda: _shuffle_rdd(spark, "pickle", pair, count),
            "engine": lambda: _shuffle_engine(spark, pair, count),
        },
        rounds,
    )
    if set(counts.values()) != {count}:
        raise AssertionError(f"a shuffle lost or duplicated items: {counts}")
    rate = {name: samples.map(lambda s: count / s) for name, samples in times.items()}
    what = f"shuffle {count:,} (word, n) items"
    per_item = rate["record"]
    return [
        Row.compare(
            "5a",
            f"{what}: batched msgpack vs one record per item",
            "items/s",
            rate["msgpack"],
            per_item,
        ),
        Row.compare(
            "5b",
            f"{what}: batched pickle vs one record per item",
            "items/s",
            rate["pickle"],
            per_item,
        ),
        Row.compare(
            "5c",
            f"{what}: SparkEngine distributed edge vs one record per item",
            "items/s",
            rate["engine"],
            per_item,
        ),
    ]


def scaling(spark: Spark, directories: dict[float, Path], rounds: int) -> list[Row]:
    """Row 6a: SparkEngine word count at growing sizes; the exponent k of time ~ size^k, fitted
    per round (least squares on logarithms), must be about 1 or less."""
    times, _ = alternate(
        {
            f"{mb:g}": lambda d=d: wordcount.count_on_spark_engine(spark.engine, d)
            for mb, d in directories.items()
        },
        rounds,
    )
    sizes = list(directories)
    exponents = Samples(
        tuple(
            _slope(
                [math.log(mb) for mb in sizes],
                [math.log(times[f"{mb:g}"].values[r]) for mb in sizes],
            )
            for r in range(rounds)
        )
    )
    smallest, largest = times[f"{sizes[0]:g}"], times[f"{sizes[-1]:g}"]
    title = (
        f"scaling: SparkEngine word count at {'/'.join(f'{mb:g}' for mb in sizes)} MB, "
        f"fitted exponent (jetspark: {sizes[-1]:g} MB, baseline: {sizes[0]:g} MB)"
    )
    per_size = {f"{mb:g} MB": times[f"{mb:g}"].as_json() for mb in sizes}
    return [
        Row(
            "6a",
            title,
            "s",
            largest,
            smallest,
            exponents,
            Goal("<=", 1.1),
            extra={"times": per_size},
        )
    ]


def _slope(xs: list[float], ys: list[float]) -> float:
    x_mean, y_mean = sum(xs) / len(xs), sum(ys) / len(ys)
    covariance = sum((x - x_mean) * (y - y_mean) for x, y in zip(xs, ys, strict=True))
    return covariance / sum((x - x_mean) ** 2 for x in xs)


def members(spark: Spark, directory: Path, megabytes: float, rounds: int) -> list[Row]:
    """Row 6b: SparkEngine word count with 2 members vs 1 on local[2]: the speed-up."""
    from jetspark.core.spark import SparkEngine

    one = SparkEngine(spark=spark.context, members=1)
    times, _ = alternate(
        {
            "1": lambda: wordcount.count_on_spark_engine(one, directory),
            "2": lambda: wordcount.count_on_spark_engine(spark.engine, directory),
        },
        rounds,
    )
    title = (
        f"members: SparkEngine word count {megabytes:.3g} MB, 2 members vs 1 on local[2], "
        "speed-up (jetspark: 2 members, baseline: 1)"
    )
    speedup = times["1"].over(times["2"])
    return [Row("6b", title, "s", times["2"], times["1"], speedup, Goal(">=", 1.5))]


def memory(spark: Spark, directory: Path, megabytes: float) -> list[Row]:
    """Row 7: peak RSS of the driver and of a Python worker during one word count, jetspark vs
    the hand-written RDD job. The kernel's peak is reset before each job (Linux clear_refs), so
    each job's own peak is read with `resource.getrusage`; workers report theirs from a probe
    task run right after the job on the same (reused) workers."""
    peaks: dict[str, tuple[float, float]] = {}
    before: dict[str, float] = {}
    jobs = {
        "jetspark": lambda: wordcount.count_on_spark_engine(spark.engine, directory),
        "rdd": lambda: wordcount.count_rdd(spark.context, directory),
    }
    for name, job in jobs.items():
        before[name] = max(_worker_peaks(spark.context, reset=True).values())
        _reset_peak()
        job()
        driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / _KB
        peaks[name] = (driver, max(_worker_peaks(spark.context, reset=False).values()))
    what = f"peak RSS, word count {megabytes:.3g} MB: SparkEngine vs RDD flatMap/map/reduceByKey"
    idle = {"worker_rss_before_mb": before}
    return [
        Row.compare(
            f"7{n}",
            f"{what}, {side}",
            "MB",
            single(peaks["jetspark"][i]),
            single(peaks["rdd"][i]),
            extra=idle,
        )
        for i, (n, side) in enumerate((("a", "driver"), ("b", "Python worker")))
    ]


def _reset_peak() -> None:
    """Resets this process's peak RSS (Linux); elsewhere the lifetime peak is reported."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
            clear_refs.write("5")
    except OSError:
        pass


def _worker_peaks(context: Any, reset: bool) -> dict[int, float]:
    """Peak RSS in MB per Python worker process, optionally reset first; one task per core,
    held long enough that each runs on its own worker."""

    def probe(_: Iterator[Any]) -> Iterator[tuple[int, float]]:
        if reset:
            _reset_peak()
        time.sleep(0.5)
        yield os.getpid(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / _KB

    cores = context.defaultParallelism
    return dict(context.parallelize(range(cores), cores).mapPartitions(probe).collect())
