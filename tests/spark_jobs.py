"""Jobs the Spark and cluster tests run on several engines, and the verdicts they must give.

A job reads its input from the engine's named stores and returns a JSON-ready *verdict*: its
result, with where items landed already checked against the routing rules for the engine's
member count. A verdict therefore does not depend on the engine, so one equality compares
LocalEngine, SparkEngine on `local[2]` and a real cluster, and `expected(name)` is what every
engine must give.

Only one SparkContext fits a process, so tests that need another master run this file:

    python tests/spark_jobs.py --master local[2,3] --members 2 --workdir DIR retry word_count

It prints one JSON line: `{"verdicts": {job: verdict}, "hash_seeds": n}`, where `n` is how many
different `hash()` functions the executors' Python workers had (PYTHONHASHSEED per worker).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pyspark import SparkContext, TaskContext
from runtime_processors import FlatMap, ListSource, Recorder, ScriptSource, received
from test_local_engine import TEXT, tf_idf_dag, tf_idf_reference, word_count_dag

from jetspark.core import DAG, Job, JobConfig, LocalEngine, Watermark
from jetspark.core.spark import SparkEngine
from jetspark.core.spark.session import create_context
from jetspark.edges import Edge, EdgeConfig, between, from_
from jetspark.partitioning import DEFAULT, global_processor_of_partition
from jetspark.processors import (
    accumulate_by_frame_p,
    combine_to_sliding_window_p,
    entry_key,
    insert_watermarks_p,
    read_list_p,
    write_file_p,
    write_list_p,
)
from jetspark.processors.aggregate import counting
from jetspark.processors.windowing import TimestampKind, limiting_lag, sliding_window_policy

LP = 2
"""Local parallelism of the vertices whose placement the verdicts check."""
JOIN_TIMEOUT = 600.0
"""A guard against a hung job, not a bound on speed: a loaded machine may start executors and
run a job slowly (60 s failed once at load 30-40); the test's own timeout usually ends first."""


class Engine(Protocol):
    """What the jobs need of LocalEngine and SparkEngine alike."""

    members: int

    def new_job(self, dag: DAG, config: JobConfig | None = None) -> Job: ...

    def get_list(self, name: str) -> list[Any]: ...

    def get_map(self, name: str) -> dict[Any, Any]: ...


def execute(engine: Engine, dag: DAG, stores: dict[str, list[Any] | dict[Any, Any]]) -> Job:
    """Sets the named lists (list values) and maps (dict values) to `stores`, then runs `dag`
    to completion: the engine's stores outlive jobs, so every job starts from a known state."""
    for name, content in stores.items():
        if isinstance(content, list):
            engine.get_list(name)[:] = content
        else:
            engine.get_map(name).clear()
            engine.get_map(name).update(content)
    job = engine.new_job(dag, JobConfig(name=dag.name))
    try:
        job.join(timeout=JOIN_TIMEOUT)
    except TimeoutError:
        job.cancel()  # a hung job would hold the shared SparkContext's cores
        raise
    return job


def json_ready(value: Any) -> Any:
    """`value` as JSON gives it back: what a verdict printed by a subprocess looks like."""
    return json.loads(json.dumps(value))


# --- word count and TF-IDF: the manual's DAGs, from test_local_engine --------------------------


def run_word_count(engine: Engine, workdir: Path) -> tuple[Job, Any]:
    """The manual's word count over TEXT: the counts."""
    job = execute(engine, word_count_dag(LP), {"lines": TEXT, "counts": {}})
    return job, dict(sorted(engine.get_map("counts").items()))


def expected_word_count() -> Any:
    """Counted by plain Python, with the DAG's tokenizer."""
    return dict(sorted(Counter(w for t in TEXT for w in re.findall(r"\w+", t.lower())).items()))


TF_IDF_DOCS = {
    doc: "\n".join(
        " ".join(f"w{(doc * 37 + line * 11 + j * 7) % 1500}" for j in range(12))
        for line in range(12)
    )
    for doc in range(400)
}
"""Large enough that a tf -> tf-idf link carries more items than its queue holds (1024), so a
Spark task hangs unless tf-idf gets doc-count's input (priority -1 via a local edge) first."""


def run_tf_idf(engine: Engine, workdir: Path) -> tuple[Job, Any]:
    """The manual's TF-IDF DAG over TF_IDF_DOCS: the inverted index."""
    job = execute(engine, tf_idf_dag(), {"docs": TF_IDF_DOCS, "index": {}})
    return job, dict(sorted(engine.get_map("index").items()))


def expected_tf_idf() -> Any:
    """Computed directly."""
    return dict(sorted(tf_idf_reference(TF_IDF_DOCS).items()))


# --- routing: every policy on a distributed edge, watermarks across the shuffle ---------------

ROUTED = [(f"k{j % 7}", j) for j in range(120)]
"""`(key, timestamp)` items, spread over the source processors by timestamp."""
WATERMARK_STEP = 10
ROUTES: dict[str, Callable[[Edge], Edge]] = {
    "unicast": Edge.unicast,
    "broadcast": Edge.broadcast,
    "partitioned": lambda edge: edge.partitioned(entry_key),
    "all-to-one": Edge.all_to_one,
}


def watermarked(items: Sequence[tuple[str, int]]) -> list[Any]:
    """`items` with Watermark(t) after each block of timestamps below t: the same watermarks
    for every source processor, so every downstream processor must see exactly them."""
    script: list[Any] = []
    for end in range(WATERMARK_STEP, len(ROUTED) + 1, WATERMARK_STEP):
        script += [item for item in items if end - WATERMARK_STEP <= item[1] < end]
        script.append(Watermark(end))
    return script


def routing_dag(members: int) -> DAG:
    """One source, one distributed edge per routing policy to a Recorder vertex of that name."""
    upstreams = members * LP
    scripts = {
        u: watermarked([item for item in ROUTED if item[1] % upstreams == u])
        for u in range(upstreams)
    }
    dag = DAG("routing")
    source = dag.new_vertex("source", lambda: ScriptSource(scripts), LP)
    for ordinal, (name, route) in enumerate(ROUTES.items()):
        sink = dag.new_vertex(name, lambda name=name: Recorder(name), LP)
        dag.edge(route(from_(source, ordinal).to(sink).distributed()))
    return dag


def run_routing(engine: Engine, workdir: Path) -> tuple[Job, Any]:
    """Per policy: what its rule says about where items landed, and the watermarks seen."""
    job = execute(engine, routing_dag(engine.members), {name: [] for name in ROUTES})
    processors = range(engine.members * LP)
    verdict: dict[str, Any] = {}
    for name in ROUTES:
        log = engine.get_list(name)
        got = {index: received(log, index) for index in processors}
        verdict[name] = {
            **_placement(name, got, engine.members),
            "watermarks": sorted({tuple(e[2] for e in log if e[:2] == (i, "wm")) for i in got}),
            "late": _late_items(log),
        }
    return job, verdict


def _placement(policy: str, got: dict[int, list[Any]], members: int) -> dict[str, Any]:
    everything = sorted(item for items in got.values() for item in items)
    if policy == "unicast":
        return {"items": everything, "all_processors_got_some": all(got.values())}
    if policy == "broadcast":
        return {"items_of_each_processor": sorted({tuple(sorted(i)) for i in got.values()})}
    if policy == "partitioned":
        owner = {key: _owner(key, members) for key, _ in ROUTED}
        misplaced = [
            item for index, items in got.items() for item in items if owner[item[0]] != index
        ]
        return {"items": everything, "misplaced": misplaced}
    return {"items": everything, "receivers": sum(1 for items in got.values() if items)}


def _owner(key: str, members: int) -> int:
    """The processor the partition assignment gives `key` (JobConfig's 271 partitions)."""
    return global_processor_of_partition(DEFAULT.partition(key, 271), members, LP)


def _late_items(log: list[Any]) -> list[Any]:
    """Items a processor received after a watermark above their timestamp."""
    late, current = [], {}
    for entry in log:
        if entry[1] == "wm":
            current[entry[0]] = entry[2]
        elif entry[1] == "item" and entry[3][1] < current.get(entry[0], -1):
            late.append(entry[3])
    return late


def expected_routing() -> Any:
    """Every rule kept, and exactly the sources' watermarks everywhere."""
    items = sorted(ROUTED)
    stamps = tuple(range(WATERMARK_STEP, len(ROUTED) + 1, WATERMARK_STEP))
    exact = {"watermarks": [stamps], "late": []}
    return {
        "unicast": {"items": items, "all_processors_got_some": True, **exact},
        "broadcast": {"items_of_each_processor": [tuple(items)], **exact},
        "partitioned": {"items": items, "misplaced": [], **exact},
        "all-to-one": {"items": items, "receivers": 1, **exact},
    }


# --- priority across shuffles: both ways translate keeps it ------------------------------------

PRIORITY_ITEMS = 300
SMALL_QUEUES = EdgeConfig(queue_size=4)
"""So that an early item stuck behind late ones would stop the stage: a hang, not a pass."""


PRIORITY_SHAPES = ("union", "sort", "resort")


def priority_dag(members: int, shape: str) -> DAG:
    """`merge` (a Recorder) gets `early` on ordinal 1 at priority -2 and `late` on ordinal 0 at
    priority 0, over distributed edges. In shape "union" the two sources are two upstream stages
    (Spark's union keeps the order); in "sort", tied by local edges into one more vertex, they
    are one stage (its sorted shuffle keeps it); "resort" adds `middle` on ordinal 2 at priority
    -1 from a third source in a stage of its own, so that the union of the two upstream stages
    would deliver `late` before `middle` unless Spark sorts it again. Separate source vertices,
    as one vertex feeding two edges of different priorities would hang in Jet too."""
    upstreams = members * LP

    def source(tag: str) -> ScriptSource:
        return ScriptSource(
            {u: [(tag, j) for j in range(u, PRIORITY_ITEMS, upstreams)] for u in range(upstreams)}
        )

    dag = DAG(f"priority-{shape}")
    late = dag.new_vertex("late", lambda: source("late"), LP)
    early = dag.new_vertex("early", lambda: source("early"), LP)
    merge = dag.new_vertex("merge", lambda: Recorder("merged"), LP)
    dag.edge(from_(late).to(merge, 0).distributed().set_config(SMALL_QUEUES))
    dag.edge(from_(early).to(merge, 1).distributed().priority(-2).set_config(SMALL_QUEUES))
    if shape in ("sort", "resort"):
        tie = dag.new_vertex("tie", lambda: FlatMap(_nothing), 1)
        dag.edge(from_(late, 1).to(tie, 0)).edge(from_(early, 1).to(tie, 1))
    if shape == "resort":
        middle = dag.new_vertex("middle", lambda: source("middle"), LP)
        dag.edge(from_(middle).to(merge, 2).distributed().priority(-1).set_config(SMALL_QUEUES))
    return dag


def _nothing(item: Any) -> tuple[()]:
    return ()


def _alone(item: Any) -> list[Any]:
    return [item]


PRIORITY_OF_ORDINAL = {0: 0, 1: -2, 2: -1}
"""merge's inbound priorities."""


def run_priority(shape: str) -> Callable[[Engine, Path], tuple[Job, Any]]:
    """The job of `priority_dag`: every item per ordinal, and the processors that got any item
    after one of a higher priority number."""

    def run(engine: Engine, workdir: Path) -> tuple[Job, Any]:
        dag = priority_dag(engine.members, shape)
        job = execute(engine, dag, {"merged": []})
        log = [entry for entry in engine.get_list("merged") if entry[1] == "item"]
        disorderly = set()
        for index in range(engine.members * LP):
            priorities = [PRIORITY_OF_ORDINAL[entry[2]] for entry in log if entry[0] == index]
            if priorities != sorted(priorities):
                disorderly.add(index)
        by_ordinal = {o: sorted(e[3] for e in log if e[2] == o) for o in {e[2] for e in log}}
        return job, {"items": by_ordinal, "disorderly_processors": sorted(disorderly)}

    return run


def expected_priority(shape: str) -> Callable[[], Any]:
    """Every item once on its ordinal, and no processor out of order."""

    def expected() -> Any:
        tags = ("late", "early", "middle") if shape == "resort" else ("late", "early")
        items = {o: [(tag, j) for j in range(PRIORITY_ITEMS)] for o, tag in enumerate(tags)}
        return {"items": items, "disorderly_processors": []}

    return expected


# --- a local edge between stages: a member-preserving exchange --------------------------------

EXCHANGED = 120


def exchange_dag(members: int) -> DAG:
    """`gather` (a Recorder) gets every item twice: on ordinal 1 from anywhere, through `relay`
    over a distributed edge, so it runs a stage after `source`; on ordinal 0 straight from
    `source` over a local edge, which crosses the stages and must keep items on their member."""
    upstreams = members * LP
    scripts = {u: list(range(u, EXCHANGED, upstreams)) for u in range(upstreams)}
    dag = DAG("exchange")
    source = dag.new_vertex("source", lambda: ScriptSource(scripts), LP)
    relay = dag.new_vertex("relay", lambda: FlatMap(_alone), LP)
    gather = dag.new_vertex("gather", lambda: Recorder("gathered"), LP)
    dag.edge(from_(source, 0).to(gather, 0))
    dag.edge(from_(source, 1).to(relay).distributed())
    dag.edge(from_(relay).to(gather, 1))
    return dag


def run_exchange(engine: Engine, workdir: Path) -> tuple[Job, Any]:
    """The items per ordinal, and those of the local edge that reached another member."""
    job = execute(engine, exchange_dag(engine.members), {"gathered": []})
    log = [entry for entry in engine.get_list("gathered") if entry[1] == "item"]
    upstreams = engine.members * LP
    moved = [j for index, _, o, j in log if o == 0 and (j % upstreams) // LP != index // LP]
    items = {o: sorted(e[3] for e in log if e[2] == o) for o in (0, 1)}
    return job, {"items": items, "moved": moved}


def expected_exchange() -> Any:
    """Every item on both ordinals; none moved."""
    return {"items": {o: list(range(EXCHANGED)) for o in (0, 1)}, "moved": []}


# --- a sliding window over event time: watermarks drive a two-stage aggregation ----------------

EVENTS = [(f"key{i % 5}", 10 * i + (i * 7) % 30) for i in range(600)]
"""`(key, timestamp)`, slightly out of order (less than the lag)."""
WINDOW = sliding_window_policy(200, 50)


def event_key(event: tuple[str, int]) -> str:
    """The grouping key of an event."""
    return event[0]


def event_time(event: tuple[str, int]) -> int:
    """The timestamp of an event."""
    return event[1]


def windowed_count_dag() -> DAG:
    """Counts per key in windows of 200 sliding by 50: frames accumulated where the events are,
    combined into windows after a distributed edge, both stages driven by watermarks."""
    dag = DAG("windowed count")
    source = dag.new_vertex("source", read_list_p("events"), 1)
    stamp = dag.new_vertex(
        "insert-watermarks", insert_watermarks_p(event_time, limiting_lag(50)), 1
    )
    frames = dag.new_vertex(
        "accumulate-by-frame",
        accumulate_by_frame_p(event_key, event_time, TimestampKind.EVENT, WINDOW, counting()),
        LP,
    )
    windows = dag.new_vertex(
        "combine-to-window", combine_to_sliding_window_p(WINDOW, counting()), LP
    )
    sink = dag.new_vertex("sink", write_list_p("windows"), 1)
    dag.edge(between(source, stamp))
    dag.edge(between(stamp, frames).partitioned(event_key))
    dag.edge(between(frames, windows).distributed().partitioned(entry_key))
    dag.edge(between(windows, sink))
    return dag


def run_windowed_count(engine: Engine, workdir: Path) -> tuple[Job, Any]:
    """The `(start, end, key, count)` window results, sorted."""
    job = execute(engine, windowed_count_dag(), {"events": EVENTS, "windows": []})
    return job, sorted(tuple(result) for result in engine.get_list("windows"))


def expected_windowed_count() -> Any:
    """Every window holding an event of the key, counted directly."""
    ends = range(
        WINDOW.higher_frame_ts(min(map(event_time, EVENTS))),
        max(map(event_time, EVENTS)) + WINDOW.window_size + 1,
        WINDOW.frame_size,
    )
    counts = Counter(
        (end - WINDOW.window_size, end, key)
        for key, time in EVENTS
        for end in ends
        if end - WINDOW.window_size <= time < end
    )
    return sorted((*window, count) for window, count in counts.items())


# --- Spark retries a failed task: a file sink neither loses nor duplicates lines ---------------


class FailsOnFirstAttempt(FlatMap):
    """Passes items on; on the first attempt of its Spark task raises in `complete()`, once it
    passed every item to the sink, and leaves a mark file in `marks` (outside Spark: never)."""

    def __init__(self, marks: str) -> None:
        super().__init__(_alone)
        self.marks = marks

    def complete(self) -> bool:
        task = TaskContext.get()
        if task is not None and task.attemptNumber() == 0:
            mark = Path(self.marks, f"{task.stageId()}-{task.partitionId()}")
            mark.touch()
            raise RuntimeError(f"the first attempt of task {mark.name} fails")
        return True


def run_retry(engine: Engine, workdir: Path) -> tuple[Job, Any]:
    """TEXT through a first-attempt failure into `write_file_p`: the lines of its files, any
    temporary file left, and how many task attempts failed."""
    out, marks = workdir / "out", workdir / "marks"
    marks.mkdir(parents=True)
    dag = DAG("retry")
    source = dag.new_vertex("source", lambda: ListSource("lines"), 1)
    relay = dag.new_vertex("fails-on-first-attempt", lambda: FailsOnFirstAttempt(str(marks)), LP)
    sink = dag.new_vertex("sink", write_file_p(str(out)), 1)
    dag.edge(between(source, relay).distributed())
    dag.edge(between(relay, sink))
    job = execute(engine, dag, {"lines": TEXT})
    files = sorted(out.iterdir())
    verdict = {
        "lines": sorted(
            line for f in files if not f.name.startswith(".") for line in f.read_text().splitlines()
        ),
        "temporary_files": [f.name for f in files if f.name.startswith(".")],
        "failed_attempts": len(list(marks.iterdir())),
    }
    return job, verdict


def expected_retry() -> Any:
    """Every line once, no temporary file (`failed_attempts` depends on the engine: popped)."""
    return {"lines": sorted(TEXT), "temporary_files": []}


# --- the catalogue, the runner and its subprocess ----------------------------------------------


@dataclass(frozen=True)
class JobCase:
    """A job of this module: `run(engine, workdir)` gives (job, verdict); `expected()` the
    verdict every engine must give."""

    run: Callable[[Engine, Path], tuple[Job, Any]]
    expected: Callable[[], Any]


JOBS = {
    "word_count": JobCase(run_word_count, expected_word_count),
    "tf_idf": JobCase(run_tf_idf, expected_tf_idf),
    "routing": JobCase(run_routing, expected_routing),
    **{
        f"priority_{shape}": JobCase(run_priority(shape), expected_priority(shape))
        for shape in PRIORITY_SHAPES
    },
    "exchange": JobCase(run_exchange, expected_exchange),
    "windowed_count": JobCase(run_windowed_count, expected_windowed_count),
    "retry": JobCase(run_retry, expected_retry),
}


SHARED_JOBS = [name for name in JOBS if name != "retry"]
"""The jobs every engine runs (retry needs Spark's task retries)."""


def run_job(name: str, engine: Engine, workdir: Path) -> tuple[Job, Any]:
    """Runs job `name` on `engine`, files in `workdir/name`; returns (job, JSON-ready verdict)."""
    job, verdict = JOBS[name].run(engine, workdir / name)
    return job, json_ready(verdict)


def expected(name: str) -> Any:
    """The JSON-ready verdict job `name` must give on every engine."""
    return json_ready(JOBS[name].expected())


@functools.cache
def local_verdict(name: str) -> Any:
    """The verdict of job `name` on LocalEngine(members=3), the reference: once per process."""
    with tempfile.TemporaryDirectory() as workdir:
        return run_job(name, LocalEngine(members=3), Path(workdir))[1]


def hash_seeds(context: SparkContext, tasks: int = 8) -> int:
    """How many different str hash functions the executors' Python workers have."""
    return (
        context.parallelize(range(tasks), tasks).map(lambda _: hash("jetspark")).distinct().count()
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Runs the named jobs on a fresh SparkContext for `--master`; prints their verdicts."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--master", required=True)
    parser.add_argument("--members", type=int, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("jobs", nargs="+", choices=sorted(JOBS))
    args = parser.parse_args(argv)
    context = create_context(
        args.master, "jetspark-test-jobs", settings={"spark.executor.memory": "512m"}
    )
    try:
        engine = SparkEngine(spark=context, members=args.members)
        verdicts = {name: run_job(name, engine, args.workdir)[1] for name in args.jobs}
        output = {"verdicts": verdicts, "hash_seeds": hash_seeds(context)}
    finally:
        context.stop()
    print(json.dumps(output))


def run_subprocess(
    master: str,
    members: int,
    jobs: Sequence[str],
    workdir: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 240,
) -> dict[str, Any]:
    """Runs `main` in a new Python process (its own SparkContext); returns what it printed."""
    command = [sys.executable, __file__, "--master", master, "--members", str(members)]
    command += ["--workdir", str(workdir), *jobs]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed:\n{result.stderr[-5000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
