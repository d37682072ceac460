"""Job upgrades (issue #26): `restore_from` takes a snapshot of an earlier version of the DAG.

A vertex restores the state saved under its name (a renamed one: under its old name, issue
#35), a new vertex starts empty, state of a removed vertex fails the submission unless the
config drops it, and state the new code cannot restore fails the job naming the vertex and the
key. Every assertion is on snapshot contents and
counts: a job runs until a committed snapshot shows its source read the whole journal.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

import fault_tolerance_jobs as jobs
import pytest

from jetspark.core import (
    DAG,
    AbstractProcessor,
    ExecutionMode,
    JobCancelledError,
    JobConfig,
    JobFailedError,
    ProcessingGuarantee,
    ProcessorSnapshot,
    Snapshot,
    SnapshotError,
)
from jetspark.core.job import Job
from jetspark.core.serialization import encode_batch
from jetspark.core.snapshot_keys import BroadcastKey
from jetspark.edges import between, from_
from jetspark.processors import aggregate_by_key_p, map_p, stream_journal_p
from jetspark.processors.aggregate import counting

pytestmark = pytest.mark.timeout(300)

JOURNAL_PARTITIONS = 16
FIRST = jobs.words(300, seed=11)
LATER = jobs.words(200, seed=12)


def _word(item: str) -> str:
    return item


def upgraded_dag(*counters: str, counter: Any = None, journal: str = "words") -> DAG:
    """`journal` (unbounded) -> one keyed counter vertex per name, each on its own ordinal of
    the source; `counter` replaces the processor of the vertex named "count"."""
    dag = DAG("word-tallies")
    source = dag.new_vertex(
        "source", stream_journal_p(journal, partition_count=JOURNAL_PARTITIONS)
    ).local_parallelism(2)
    for ordinal, name in enumerate(counters):
        supplier = counter if name == "count" and counter is not None else None
        vertex = dag.new_vertex(name, supplier or aggregate_by_key_p(_word, counting()))
        dag.edge(from_(source, ordinal).to(vertex).distributed().partitioned(_word))
    return dag


def items_read(snapshot: Snapshot) -> int:
    """How many journal items the source had read at `snapshot` (from its saved offsets)."""
    offsets: dict[int, int] = {}
    for saved in snapshot.of_vertex("source").values():
        for key, next_offset in saved.entries():
            assert isinstance(key, BroadcastKey)
            offsets[key.key[2]] = next_offset
    return sum((offset - partition) // JOURNAL_PARTITIONS for partition, offset in offsets.items())


def counts_of(snapshot: Snapshot, vertex: str) -> Counter[str]:
    """The per-word counts the processors of `vertex` saved in `snapshot`."""
    counts: Counter[str] = Counter()
    for saved in snapshot.of_vertex(vertex).values():
        for word, count in saved.entries():
            counts[word] += count
    return counts


def run_until_read(job: Job, total: int) -> Snapshot:
    """Waits for a committed snapshot in which the source read `total` items, cancels the job
    and returns the last committed snapshot (the pytest timeout bounds the wait)."""
    store = job.snapshot_store
    assert store is not None
    while _items_read_now(store) < total:
        assert not job.status.is_terminal, job.join(0)
        time.sleep(0.01)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(120)
    final = store.latest()
    assert final is not None and items_read(final) == total
    return final


def _items_read_now(store: Any) -> int:
    """`items_read` of the store's latest snapshot (0 before the first). A directory store's
    snapshot is read lazily: when the job commits a newer one and removes it meanwhile, the
    newer one is read instead."""
    while (latest := store.latest()) is not None:
        try:
            return items_read(latest)
        except FileNotFoundError:
            continue
    return 0


def guaranteed(**settings: Any) -> JobConfig:
    return JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE,
        snapshot_interval_millis=3,
        **settings,
    )


def first_version(engine: Any, *counters: str) -> Snapshot:
    """Runs the DAG with `counters` over FIRST; its last snapshot."""
    engine.get_list("words").extend(FIRST)
    return run_until_read(engine.new_job(upgraded_dag(*counters), guaranteed()), len(FIRST))


def test_a_new_vertex_starts_empty_and_the_old_one_continues_from_its_state() -> None:
    engine = jobs.engine(2)
    before = first_version(engine, "count")
    assert counts_of(before, "count") == Counter(FIRST)
    engine.get_list("words").extend(LATER)
    job = engine.new_job(upgraded_dag("count", "tally"), guaranteed(), restore_from=before)
    after = run_until_read(job, len(FIRST) + len(LATER))
    assert counts_of(after, "count") == Counter(FIRST + LATER)
    assert counts_of(after, "tally") == Counter(LATER)


def test_state_of_a_removed_vertex_fails_the_submission_unless_dropped() -> None:
    engine = jobs.engine(2)
    before = first_version(engine, "count", "tally")
    with pytest.raises(SnapshotError, match="state of vertex 'tally', which the DAG") as refused:
        engine.new_job(upgraded_dag("count"), guaranteed(), restore_from=before)
    assert "ignore_state_of_removed_vertices=True" in str(refused.value)
    engine.get_list("words").extend(LATER)
    job = engine.new_job(
        upgraded_dag("count"),
        guaranteed(ignore_state_of_removed_vertices=True),
        restore_from=before,
    )
    after = run_until_read(job, len(FIRST) + len(LATER))
    assert counts_of(after, "count") == Counter(FIRST + LATER)
    assert set(after.local_parallelism) == {"source", "count"}


def test_a_renamed_vertex_continues_from_the_state_of_its_old_name() -> None:
    engine = jobs.engine(2)
    before = first_version(engine, "count")
    with pytest.raises(SnapshotError) as refused:
        engine.new_job(upgraded_dag("total", "tally"), guaranteed(), restore_from=before)
    message = str(refused.value)
    assert "state of vertex 'count', which the DAG 'word-tallies' does not have" in message
    assert "The DAG's new vertices (without state in the snapshot): 'tally', 'total'" in message
    assert "JobConfig(renamed_vertices={'new': 'old'})" in message
    engine.get_list("words").extend(LATER)
    config = guaranteed(renamed_vertices={"total": "count"})
    job = engine.new_job(upgraded_dag("total", "tally"), config, restore_from=before)
    after = run_until_read(job, len(FIRST) + len(LATER))
    assert set(after.local_parallelism) == {"source", "total", "tally"}
    assert counts_of(after, "total") == Counter(FIRST + LATER)
    assert counts_of(after, "tally") == Counter(LATER)
    # a snapshot taken since the rename holds the new name: the same config restores it
    again = engine.new_job(upgraded_dag("total", "tally"), config, restore_from=after)
    assert run_until_read(again, len(FIRST) + len(LATER)) is not None


def test_the_refusal_suggests_the_one_rename_that_fits() -> None:
    before = first_version(jobs.engine(1), "count")
    with pytest.raises(SnapshotError) as refused:
        jobs.engine(1).new_job(upgraded_dag("total"), guaranteed(), restore_from=before)
    message = str(refused.value)
    assert "The DAG's new vertex (without state in the snapshot): 'total'" in message
    assert "JobConfig(renamed_vertices={'total': 'count'})" in message
    assert "ignore_state_of_removed_vertices=True" in message


def test_a_rename_that_does_not_fit_the_dag_or_the_snapshot_is_refused_at_submission() -> None:
    engine = jobs.engine(1)
    before = first_version(engine, "count")
    dag = upgraded_dag("total")
    unknown_new = guaranteed(renamed_vertices={"totals": "count"})
    with pytest.raises(SnapshotError, match="renames 'count' to 'totals', but the DAG") as e:
        engine.new_job(dag, unknown_new, restore_from=before)
    assert "has no vertex 'totals' (its vertices: 'source', 'total')" in str(e.value)
    unknown_old = guaranteed(renamed_vertices={"total": "counts"})
    with pytest.raises(SnapshotError, match=r"but snapshot \d+ holds no vertex 'counts'") as e:
        engine.new_job(dag, unknown_old, restore_from=before)
    assert "(its vertices: 'count', 'source')" in str(e.value)
    with pytest.raises(ValueError, match="gives vertex 'count' two new names, 'a' and 'b'"):
        JobConfig(renamed_vertices={"a": "count", "b": "count"})
    with pytest.raises(TypeError, match="renamed_vertices must map new vertex names"):
        JobConfig(renamed_vertices={"a": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="renamed_vertices must map new vertex names"):
        JobConfig(renamed_vertices=[("a", "count")])  # type: ignore[arg-type]


def test_a_removed_vertex_that_saved_nothing_needs_no_flag() -> None:
    engine = jobs.engine(1)
    engine.get_list("words").extend(FIRST)
    dag = upgraded_dag("count")
    echo = dag.new_vertex("echo", map_p(_word))
    dag.edge(from_(dag.get_vertex("source"), 1).to(echo))
    dag.edge(between(echo, dag.new_vertex("echoed", aggregate_by_key_p(_word, counting()))))
    before = run_until_read(engine.new_job(dag, guaranteed()), len(FIRST))
    with pytest.raises(SnapshotError, match="vertex 'echoed',") as refused:
        engine.new_job(upgraded_dag("count"), guaranteed(), restore_from=before)
    assert "'echo'" not in str(refused.value)
    without_echo = upgraded_dag("count", "echoed")
    engine.get_list("words").extend(LATER)
    # "echoed" is fed by a partitioned edge now, not echo's unicast one (issue #36, case 3)
    rekeyed = guaranteed(state_on_routing_change="rekey")
    after = run_until_read(
        engine.new_job(without_echo, rekeyed, restore_from=before), len(FIRST) + len(LATER)
    )
    assert counts_of(after, "echoed") == Counter(FIRST + LATER)


class StrictCount(AbstractProcessor):
    """A new version of the counter that cannot read the state saved for one word."""

    def restore_from_snapshot_entry(self, key: Any, value: Any) -> None:
        if key == "w3":
            raise ValueError("this version cannot read the saved count")


def test_state_the_new_code_cannot_restore_fails_naming_the_vertex_and_the_key() -> None:
    engine = jobs.engine(2)
    before = first_version(engine, "count")
    # a processor function: its class is unknown before it runs, so the restore is tried
    job = engine.new_job(
        upgraded_dag("count", counter=lambda: StrictCount()), guaranteed(), restore_from=before
    )
    with pytest.raises(JobFailedError) as failure:
        job.join(30)
    error = failure.value
    assert error.vertex_name == "count" and error.processor_index is not None
    assert "restore_from_snapshot, restoring the entry of key 'w3'" in str(error)
    assert isinstance(error.__cause__, ValueError)


class DrainingCount(AbstractProcessor):
    """Restores through `inbox.drain(fn)`, failing on one word."""

    def restore_from_snapshot(self, inbox: Any) -> None:
        inbox.drain(self._restore)

    def _restore(self, entry: Any) -> None:
        if entry[0] == "w5":
            raise KeyError(entry[0])


def test_the_failing_key_is_named_whichever_way_the_processor_takes_its_entries() -> None:
    engine = jobs.engine(1)
    before = first_version(engine, "count")
    job = engine.new_job(
        upgraded_dag("count", counter=lambda: DrainingCount()), guaranteed(), restore_from=before
    )
    with pytest.raises(JobFailedError, match="restoring the entry of key 'w5': KeyError"):
        job.join(30)


@pytest.mark.spark
@pytest.mark.parametrize("mode", [ExecutionMode.MICRO_BATCH, ExecutionMode.CONTINUOUS])
def test_a_new_vertex_starts_empty_on_spark(
    spark_engine: Any, tmp_path: Any, mode: ExecutionMode
) -> None:
    from jetspark.core import DirectorySnapshotStore
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2, batch_items=100)
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    engine.get_list("words").extend(FIRST)
    config = guaranteed(execution_mode=mode)
    job = engine.new_job(upgraded_dag("count"), config, snapshot_store=store)
    before = run_until_read(job, len(FIRST))
    assert job.execution_mode.value == mode.value
    assert counts_of(before, "count") == Counter(FIRST)
    engine.get_list("words").extend(LATER)
    job = engine.new_job(
        upgraded_dag("count", "tally"), config, snapshot_store=store, restore_from=before
    )
    after = run_until_read(job, len(FIRST) + len(LATER))
    assert counts_of(after, "count") == Counter(FIRST + LATER)
    assert counts_of(after, "tally") == Counter(LATER)


@pytest.mark.spark
def test_a_renamed_vertex_continues_from_its_state_on_spark(
    spark_engine: Any, tmp_path: Any
) -> None:
    from jetspark.core import DirectorySnapshotStore
    from jetspark.core.spark import SparkEngine

    engine = SparkEngine(spark_engine.context, members=2, batch_items=100)
    store = DirectorySnapshotStore(tmp_path / "snapshots")
    engine.get_list("words").extend(FIRST)
    config = guaranteed(execution_mode=ExecutionMode.MICRO_BATCH)
    before = run_until_read(
        engine.new_job(upgraded_dag("count"), config, snapshot_store=store), len(FIRST)
    )
    engine.get_list("words").extend(LATER)
    renamed = guaranteed(
        execution_mode=ExecutionMode.MICRO_BATCH, renamed_vertices={"total": "count"}
    )
    job = engine.new_job(upgraded_dag("total"), renamed, snapshot_store=store, restore_from=before)
    after = run_until_read(job, len(FIRST) + len(LATER))
    assert set(after.local_parallelism) == {"source", "total"}
    assert counts_of(after, "total") == Counter(FIRST + LATER)


def test_the_flag_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="ignore_state_of_removed_vertices must be a bool"):
        JobConfig(ignore_state_of_removed_vertices="yes")  # type: ignore[arg-type]


def test_state_whose_class_is_gone_fails_naming_the_vertex_and_processor(tmp_path: Any) -> None:
    (tmp_path / "old_state.py").write_text(
        "class Tally:\n    def __init__(self, n):\n        self.n = n\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import old_state  # type: ignore[import-not-found]

        data = encode_batch([("w1", old_state.Tally(3))])
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("old_state", None)
    processors = {
        ("count", 0): ProcessorSnapshot(data),
        ("source", 0): ProcessorSnapshot(encode_batch([])),
    }
    snapshot = Snapshot(5, 1, {"source": 1, "count": 1}, processors)
    dag = upgraded_dag("count")
    dag.get_vertex("source").local_parallelism(1)
    job = jobs.engine(1).new_job(dag, guaranteed(), restore_from=snapshot)
    with pytest.raises(
        SnapshotError, match="vertex 'count' processor #0 cannot be read"
    ) as failure:
        job.join(30)
    assert "ModuleNotFoundError: No module named 'old_state'" in str(failure.value)
