"""Stateful mapping in the Pipeline API (Jet 4's `mapStateful`, `filterStateful`,
`flatMapStateful`; issue #43): a state for the whole stage or per key, time-to-live on keyed
streams, and the state exactly-once across a cancel and a restore on another member count."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import fault_tolerance_jobs as jobs
import pytest
from test_pipeline_conformance import NUMBERS, counter_source, jobs_wait_for_commit

from jetspark.core import (
    DagValidationError,
    DirectorySnapshotStore,
    JobCancelledError,
    JobConfig,
    LocalEngine,
    ProcessingGuarantee,
)
from jetspark.core.pipeline import Pipeline, Sinks, Sources

PATIENCE_SECONDS = 120.0


def _new_list() -> list[int]:
    return [0]


def _count(state: list[int], item: Any) -> tuple[Any, int]:
    state[0] += 1
    return item, state[0]


def _count_key(state: list[int], key: Any, item: Any) -> str:
    state[0] += 1
    return f"{key}:{state[0]}"


def _first_time(state: list[int], item: Any) -> bool:
    state[0] += 1
    return state[0] == 1


def _twice_with_count(state: list[int], item: Any) -> list[tuple[Any, int]]:
    state[0] += 1
    return [(item, state[0]), (item, -state[0])]


def _seventh(n: int) -> int:
    return n % 7


def test_an_ungrouped_state_counts_every_item_of_the_stage_once() -> None:
    engine = LocalEngine(members=2)
    engine.get_list("xs")[:] = list(range(100))
    p = Pipeline.create()
    p.draw_from(Sources.list("xs")).map_stateful(_new_list, _count).drain_to(Sinks.list("out"))
    engine.new_job(p).join(60)
    out = list(engine.get_list("out"))
    assert sorted(count for _, count in out) == list(range(1, 101))
    assert sorted(item for item, _ in out) == list(range(100))


def test_a_keyed_state_counts_each_keys_items() -> None:
    engine = LocalEngine(members=3)
    engine.get_list("xs")[:] = list(range(100))
    p = Pipeline.create()
    keyed = p.draw_from(Sources.list("xs")).grouping_key(_seventh)
    keyed.map_stateful(_new_list, _count_key).drain_to(Sinks.list("out"))
    engine.new_job(p).join(60)
    sizes = Counter(n % 7 for n in range(100))
    assert sorted(engine.get_list("out")) == sorted(
        f"{key}:{count}" for key, size in sizes.items() for count in range(1, size + 1)
    )


def test_filter_stateful_keeps_each_keys_first_item_and_flat_map_emits_each_result() -> None:
    engine = LocalEngine(members=2)
    engine.get_list("xs")[:] = [1, 2, 1, 3, 2, 1]
    p = Pipeline.create()
    numbers = p.draw_from(Sources.list("xs"))
    numbers.grouping_key(_identity).filter_stateful(_new_list, _first_time).drain_to(
        Sinks.list("distinct")
    )
    numbers.flat_map_stateful(_new_list, _twice_with_count).drain_to(Sinks.list("twice"))
    engine.new_job(p).join(60)
    assert sorted(engine.get_list("distinct")) == [1, 2, 3]
    twice = list(engine.get_list("twice"))
    assert sorted(abs(count) for _, count in twice) == sorted(list(range(1, 7)) * 2)


def _identity(item: Any) -> Any:
    return item


def _time(event: tuple[str, int]) -> int:
    return event[1]


def _key(event: tuple[str, int]) -> str:
    return event[0]


def _count_event(state: list[int], key: str, event: tuple[str, int]) -> None:
    state[0] += 1


def _evicted(state: list[int], key: str, watermark: int) -> tuple[str, int]:
    return key, state[0]


def test_a_keys_state_expires_after_its_ttl_with_the_eviction_output() -> None:
    """Events of a and b, then one of c far later: its watermark passes a's and b's latest
    event + ttl, so their states are evicted with their counts (c's stays). a's event at 3
    comes behind the watermark b's event at 5 made: late, dropped, not counted (Jet's rule)."""
    engine = LocalEngine()
    engine.get_list("events")[:] = [("a", 1), ("a", 2), ("b", 5), ("a", 3), ("c", 100)]
    p = Pipeline.create()
    keyed = (
        p.draw_from(Sources.stream_journal("events")).add_timestamps(_time, 0).grouping_key(_key)
    )
    keyed.map_stateful(_new_list, _count_event, ttl=10, on_evict_fn=_evicted).drain_to(
        Sinks.list("evicted")
    )
    job = engine.new_job(p)
    deadline = time.monotonic() + PATIENCE_SECONDS
    evicted = engine.get_list("evicted")
    while len(evicted) < 2:
        assert time.monotonic() < deadline and not job.status.is_terminal, list(evicted)
        time.sleep(0.02)
    job.cancel()
    assert sorted(evicted) == [("a", 2), ("b", 1)]


def test_a_ttl_without_timestamps_or_an_eviction_without_a_ttl_is_refused() -> None:
    keyed = Pipeline.create().draw_from(Sources.list("xs")).grouping_key(_seventh)
    with pytest.raises(DagValidationError, match="with a ttl needs timestamps"):
        keyed.map_stateful(_new_list, _count_key, ttl=10)
    with pytest.raises(ValueError, match="on_evict_fn needs a ttl"):
        keyed.map_stateful(_new_list, _count_key, on_evict_fn=_evicted)
    with pytest.raises(TypeError, match=r"stage 'listSource\(xs\)'"):
        keyed.map_stateful(_new_list, "not a function")  # type: ignore[arg-type]


def test_keyed_state_is_exactly_once_across_a_cancel_and_a_restore_on_more_members(
    tmp_path: Any,
) -> None:
    gate, out = str(tmp_path / "gate"), str(tmp_path / "out")
    store = DirectorySnapshotStore(str(tmp_path / "snapshots"))
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=100
    )

    def pipeline() -> Pipeline:
        p = Pipeline.create()
        keyed = p.draw_from(counter_source(gate)).grouping_key(_seventh)
        keyed.map_stateful(_new_list, _count_key).drain_to(Sinks.files_transactional(out))
        return p

    job = LocalEngine(members=2).new_job(pipeline(), config, snapshot_store=store)
    jobs_wait_for_commit(job)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(PATIENCE_SECONDS)
    open(gate, "w").close()
    LocalEngine(members=3).new_job(
        pipeline(), config, snapshot_store=store, restore_from=store.latest()
    ).join(PATIENCE_SECONDS)
    sizes = Counter(n % 7 for n in range(NUMBERS))
    assert jobs.committed_lines(out) == sorted(
        f"{key}:{count}" for key, size in sizes.items() for count in range(1, size + 1)
    )


@pytest.mark.spark
def test_keyed_state_is_exactly_once_across_a_killed_python_worker_in_continuous(
    spark_engine: Any, tmp_path: Any
) -> None:
    """CONTINUOUS on 2 members: a Python worker dies (SIGKILL) at an item after the first
    commit; the job restarts from its snapshot by itself and every key's count is written
    exactly once."""
    import os
    import signal

    from test_continuous import continuous

    from jetspark.core.spark import SparkEngine

    spark = SparkEngine(spark_engine.context, members=2)
    out, snapshots = str(tmp_path / "out"), str(tmp_path / "snapshots")
    gate = os.path.join(snapshots, "snapshot-*", "MANIFEST")  # the second half after a commit
    kill = jobs.SignalOnce(signal.SIGKILL, NUMBERS // 2 + 10, snapshots, str(tmp_path / "killed"))
    p = Pipeline.create()
    keyed = p.draw_from(counter_source(gate)).map(kill).grouping_key(_seventh)
    keyed.map_stateful(_new_list, _count_key).drain_to(Sinks.files_transactional(out))
    job = spark.new_job(p, continuous(interval=5), snapshot_store=DirectorySnapshotStore(snapshots))
    job.join(240)
    assert os.path.exists(tmp_path / "killed")
    assert job.metrics.restarts == 1
    sizes = Counter(n % 7 for n in range(NUMBERS))
    assert jobs.committed_lines(out) == sorted(
        f"{key}:{count}" for key, size in sizes.items() for count in range(1, size + 1)
    )
