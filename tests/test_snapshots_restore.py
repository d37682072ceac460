"""Routing a snapshot into a new plan: keyed entries to their partition's owner, broadcast
entries to all, and which processors are restored as completed."""

from __future__ import annotations

from typing import Any

import pytest

from jetspark.core import DAG, JobConfig, ProcessorSnapshot, Snapshot, SnapshotError
from jetspark.core.runtime import plan_job, route_snapshot
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.runtime.restore import restorable
from jetspark.core.serialization import encode_batch
from jetspark.core.snapshot_keys import broadcast_key
from jetspark.edges import between
from jetspark.partitioning import PartitionAssignment, partition_id
from jetspark.processors import aggregate_by_key_p, read_journal_p, write_map_p
from jetspark.processors.aggregate import counting


def _whole(item: Any) -> Any:
    return item


def plan_dag(source_lp: int = 1, count_lp: int = 1) -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", read_journal_p("in")).local_parallelism(source_lp)
    count = dag.new_vertex("count", aggregate_by_key_p(_whole, counting()))
    count.local_parallelism(count_lp)
    sink = dag.new_vertex("sink", write_map_p("out")).local_parallelism(1)
    dag.edge(between(source, count).distributed().partitioned(_whole))
    dag.edge(between(count, sink))
    return dag


def plan(members: int, source_lp: int, count_lp: int) -> JobPlan:
    return plan_job(plan_dag(source_lp, count_lp), JobConfig(), members, 1)


def saved(entries: list[tuple[Any, Any]], completed: bool = False) -> ProcessorSnapshot:
    return ProcessorSnapshot(encode_batch(entries), completed)


def snapshot_of(
    members: int,
    parallelism: dict[str, int],
    states: dict[tuple[str, int], ProcessorSnapshot],
) -> Snapshot:
    """A snapshot where every processor not in `states` saved nothing and runs on."""
    processors = {
        (name, index): states.get((name, index), saved([]))
        for name, lp in parallelism.items()
        for index in range(members * lp)
    }
    return Snapshot(9, members, parallelism, processors)


LAYOUT = {"source": 2, "count": 2, "sink": 1}


def test_keyed_entries_go_to_the_new_owner_of_their_partition_and_broadcast_ones_to_all():
    keys = [f"key{i}" for i in range(40)]
    old = snapshot_of(
        2,
        LAYOUT,
        {
            ("count", 0): saved([(k, 1) for k in keys[:20]]),
            ("count", 3): saved([(k, 1) for k in keys[20:]] + [(broadcast_key("wm"), 7)]),
        },
    )
    new_plan = plan(3, 1, 3)
    restored = route_snapshot(old, new_plan)
    owners = PartitionAssignment(3, 3)
    for key in keys:
        owner = owners.global_processor(partition_id(key))
        for index in range(9):
            held = (key, 1) in restored[("count", index)].entries
            assert held == (index == owner), (key, index)
    assert all((broadcast_key("wm"), 7) in restored[("count", i)].entries for i in range(9))
    assert len(restored) == 3 + 9 + 3


def test_same_layout_restores_the_completed_processors_as_completed():
    old = snapshot_of(2, LAYOUT, {("source", 1): saved([], completed=True)})
    restored = route_snapshot(old, plan(2, 2, 2))
    assert [restored[("source", i)].completed for i in range(4)] == [False, True, False, False]
    assert not any(restored[("count", i)].completed for i in range(4))


def test_a_fully_completed_vertex_stays_completed_at_any_parallelism():
    done = {("source", i): saved([(broadcast_key(("offset", i)), 9)], True) for i in range(4)}
    restored = route_snapshot(snapshot_of(2, LAYOUT, done), plan(1, 3, 2))
    assert all(restored[("source", i)].completed for i in range(3))
    assert all(len(restored[("source", i)].entries) == 4 for i in range(3))


def test_a_partly_completed_vertex_at_another_parallelism_runs_from_every_final_state():
    old = snapshot_of(2, LAYOUT, {("source", 1): saved([(broadcast_key("x"), 1)], True)})
    restored = route_snapshot(old, plan(2, 3, 2))
    assert not any(restored[("source", i)].completed for i in range(6))
    assert all(restored[("source", i)].entries == [(broadcast_key("x"), 1)] for i in range(6))


def test_a_completed_processor_runs_when_its_feeders_or_keyed_state_need_it():
    owners = PartitionAssignment(2, 2)
    key = next(k for k in map(str, range(100)) if owners.global_processor(partition_id(k)) == 0)
    sources_done = {("source", i): saved([], completed=True) for i in range(4)}
    count_done = {("count", i): saved([], completed=True) for i in (0, 2)}
    running_key = {("count", 1): saved([(key, 3)])}  # a running processor's entry for count#0
    restored = route_snapshot(
        snapshot_of(2, LAYOUT, sources_done | count_done | running_key), plan(2, 2, 2)
    )
    assert [restored[("count", i)].completed for i in range(4)] == [False, False, True, False]
    restored = route_snapshot(snapshot_of(2, LAYOUT, count_done), plan(2, 2, 2))
    assert not restored[("count", 2)].completed, "its sources still run and feed it"


def test_a_snapshot_of_another_dag_or_with_unreadable_state_is_refused():
    other = snapshot_of(1, {"other": 1}, {("other", 0): saved([("k", 1)])})
    dag = plan_dag()
    with pytest.raises(SnapshotError, match="state of vertex 'other', which the DAG"):
        restorable(other, dag, JobConfig())
    restorable(other, dag, JobConfig(ignore_state_of_removed_vertices=True))
    restored = route_snapshot(other, plan(1, 1, 1))
    assert not any(r.entries or r.completed for r in restored.values()), "all start empty"
    broken = snapshot_of(1, {"source": 1, "count": 1, "sink": 1}, {})
    broken.processors[("count", 0)] = ProcessorSnapshot(b"Xnot a batch")  # type: ignore[index]
    with pytest.raises(SnapshotError, match="'count' processor #0 cannot be read"):
        route_snapshot(broken, plan(1, 1, 1))
