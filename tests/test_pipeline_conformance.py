"""Pipelines give the same committed output on LocalEngine(2) and on SparkEngine (local[2])
in both streaming modes, and a built source with snapshot functions is exactly-once across a
cancel and continue, and across a Python worker killed in a continuous run.

Every assertion is on items, snapshots and restarts, never on how fast the machine is.
"""

from __future__ import annotations

import glob
import os
import signal
from collections import Counter
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
import test_streaming_conformance as conformance
from test_continuous import continuous

from jetspark.core import DirectorySnapshotStore, JobCancelledError, ProcessingGuarantee
from jetspark.core.pipeline import (
    JoinClause,
    Pipeline,
    Sinks,
    SourceBuilder,
    Sources,
    WindowDefinition,
)
from jetspark.processors.aggregate import counting

pytestmark = pytest.mark.spark
guaranteed = conformance.guaranteed


@pytest.fixture(params=conformance.ENGINES)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """LocalEngine(2), or SparkEngine on local[2] as micro-batches or continuously."""
    return conformance.engine_for(request, monkeypatch)


def test_a_word_count_pipeline_is_exact(engine: Any) -> None:
    items = jobs.words(3000)
    engine.get_list("words").extend(items)
    p = Pipeline.create()
    p.draw_from(Sources.list("words")).grouping_key(str).aggregate(counting()).drain_to(
        Sinks.map("counts")
    )
    engine.new_job(p, guaranteed()).join(120)
    assert engine.get_map("counts") == dict(Counter(items))


def test_a_sliding_window_pipeline_is_exact(engine: Any) -> None:
    items = jobs.events(2400)
    engine.get_list("events").extend(items)
    p = Pipeline.create()
    (
        p.draw_from(Sources.journal("events"))
        .add_timestamps(_first, 0)
        .grouping_key(_second)
        .window(WindowDefinition.sliding(12, 4))
        .aggregate(counting(), _window_entry)
        .drain_to(Sinks.map("windows"))
    )
    engine.new_job(p, guaranteed()).join(120)
    assert engine.get_map("windows") == jobs.expected_windows(items)


def test_a_hash_join_pipeline_joins_every_order_once(engine: Any, tmp_path: Any) -> None:
    out = str(tmp_path / "joined")
    p = Pipeline.create()
    customers = p.draw_from(Sources.journal(_customer, count=40))
    orders = p.draw_from(Sources.journal(_order, count=2000))
    orders.hash_join(customers, JoinClause.join_map_entries(_first), _named).drain_to(
        Sinks.files_transactional(out)
    )
    engine.new_job(p, guaranteed()).join(120)
    expected = sorted(str((f"name{n % 40}", n)) for n in range(2000))
    assert jobs.committed_lines(out) == expected


NUMBERS = 1500


def counter_source(gate: str, stop: int = NUMBERS // 2, paused: str | None = None) -> Any:
    """A batch source of 0..NUMBERS-1 that snapshots its offset; it stops after `stop` numbers
    (touching the file `paused`, if given, each time it finds nothing to add) until a file
    matches the pattern `gate`, so a first run can always be stopped there."""
    return (
        SourceBuilder.batch(
            "numbers", lambda context: {"next": 0, "gate": gate, "stop": stop, "paused": paused}
        )
        .fill_buffer_fn(_fill)
        .create_snapshot_fn(lambda state: state["next"])
        .restore_snapshot_fn(_restore)
        .build()
    )


def _fill(state: dict[str, Any], buffer: Any) -> None:
    start = state["next"]
    open_gate = bool(glob.glob(state["gate"]))
    limit = NUMBERS if open_gate else state["stop"]
    if start == limit and not open_gate:
        if state["paused"] is not None:
            open(state["paused"], "a").close()
        return
    end = min(start + 100, limit)
    for n in range(start, end):
        buffer.add(n)
    state["next"] = end
    if end == NUMBERS:
        buffer.close()


def _restore(state: dict[str, Any], saved: list[int]) -> None:
    state["next"] = min(saved)


def test_a_built_source_continues_exactly_once_after_a_cancel(engine: Any, tmp_path: Any) -> None:
    gate, out = str(tmp_path / "gate"), str(tmp_path / "out")
    store = DirectorySnapshotStore(str(tmp_path / "snapshots"))

    def pipeline() -> Pipeline:
        p = Pipeline.create()
        p.draw_from(counter_source(gate)).map(_identity).drain_to(Sinks.files_transactional(out))
        return p

    job = engine.new_job(pipeline(), guaranteed(), snapshot_store=store)
    jobs_wait_for_commit(job)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(120)
    assert len(jobs.committed_lines(out)) <= NUMBERS // 2
    open(gate, "w").close()
    engine.new_job(
        pipeline(), guaranteed(), snapshot_store=store, restore_from=store.latest()
    ).join(120)
    assert jobs.committed_lines(out) == sorted(str(n) for n in range(NUMBERS))


def jobs_wait_for_commit(job: Any) -> None:
    """Waits (bounded only against a hang) until `job` committed a snapshot."""
    import time

    deadline = time.monotonic() + 120
    while job.metrics.snapshot_count < 1:
        assert time.monotonic() < deadline, "no snapshot committed in 120 s"
        time.sleep(0.02)


def test_a_built_source_is_exactly_once_across_a_killed_python_worker(
    spark_engine: Any, tmp_path: Any
) -> None:
    from jetspark.core.spark import SparkEngine

    spark = SparkEngine(spark_engine.context, members=2)
    out, snapshots = str(tmp_path / "out"), str(tmp_path / "snapshots")
    gate = os.path.join(snapshots, "snapshot-*", "MANIFEST")  # the second half after a commit
    kill = jobs.SignalOnce(signal.SIGKILL, NUMBERS // 2 + 10, snapshots, str(tmp_path / "killed"))
    p = Pipeline.create()
    p.draw_from(counter_source(gate)).map(kill).drain_to(Sinks.files_transactional(out))
    job = spark.new_job(p, continuous(interval=5), snapshot_store=DirectorySnapshotStore(snapshots))
    job.join(240)
    assert os.path.exists(tmp_path / "killed")
    assert job.metrics.restarts == 1
    assert jobs.committed_lines(out) == sorted(str(n) for n in range(NUMBERS))


def _identity(item: Any) -> Any:
    return item


def _first(item: Any) -> Any:
    return item[0]


def _second(item: Any) -> Any:
    return item[1]


def _window_entry(start: int, end: int, key: Any, value: Any) -> Any:
    return ((start, end, key), value)


def _customer(offset: int) -> tuple[str, str]:
    return (f"c{offset}", f"name{offset}")


def _order(offset: int) -> tuple[str, int]:
    return (f"c{offset % 40}", offset)


def _named(order: tuple[str, int], name: str) -> tuple[str, int]:
    return (name, order[1])


def test_processing_guarantee_names_are_stable() -> None:
    assert ProcessingGuarantee.EXACTLY_ONCE.name == "EXACTLY_ONCE"


def test_a_spark_stream_source_feeds_a_pipeline_exactly_once(
    spark_engine: Any, tmp_path: Any
) -> None:
    from pyspark.sql import SparkSession
    from test_spark_streams import land, wait_for

    incoming, out = tmp_path / "incoming", tmp_path / "out"
    incoming.mkdir()
    frame = SparkSession(spark_engine.context).readStream.text(str(incoming))
    p = Pipeline.create("landing-lines")
    p.draw_from(Sources.spark_stream(frame, map_fn=lambda row: row.value)).map(str.upper).drain_to(
        Sinks.files_transactional(str(out))
    )
    store = DirectorySnapshotStore(str(tmp_path / "snapshots"))
    job = spark_engine.new_job(p, guaranteed(), snapshot_store=store)
    expected = [f"line {n}" for n in range(40)]
    land(incoming, "first.txt", expected[:20])
    land(incoming, "second.txt", expected[20:])
    # a batch is published when the next one commits: a sentinel file makes the last one go
    wait_for(job, lambda: len(job.metrics.batches) >= 1)
    land(incoming, "sentinel.txt", ["sentinel"])
    wait_for(job, lambda: len(jobs.committed_lines(str(out))) >= len(expected))
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(120)
    committed = [line for line in jobs.committed_lines(str(out)) if line != "SENTINEL"]
    assert committed == sorted(line.upper() for line in expected)
    assert job.execution_mode.value == "micro_batch"
