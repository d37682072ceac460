"""The snapshot a Spark job's tasks restore: fixed by the driver, read by each task itself.

The driver never loads a snapshot's state: it ships the manifest's part list, and every task
reads (and authenticates) the parts that hold entries for its own processors. Which parts those
are is known when the batch that wrote them ran at the same layout (micro-batches of one run):
its tasks reported, per part, the processors that restore an entry of it (every processor of
the vertex for an entry under a broadcast key, the key's owner for any other,
`restoring_processors`), so a task reads only the parts its members' processors restore from;
otherwise every part holding its vertices.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from jetspark.core.edge_routing import Routings
from jetspark.core.runtime.plan import JobPlan
from jetspark.core.runtime.restore import RestoredProcessor, completed_without_state, route_entries
from jetspark.core.snapshot_keys import BroadcastKey, snapshot_targets
from jetspark.core.snapshot_store import (
    DirectorySnapshotStore,
    Held,
    ProcessorKey,
    ProcessorSnapshot,
    Snapshot,
    parts_holding,
)
from jetspark.partitioning import PartitionAssignment


@dataclass(frozen=True)
class RestoreSpec:
    """Where a job's tasks find the snapshot they restore: plain data, shipped to tasks."""

    snapshot_id: int
    store: DirectorySnapshotStore
    parts: dict[str, tuple[bytes, Held]]
    """Part name -> (tag, the processors it holds), from the snapshot's manifest."""
    completed: dict[ProcessorKey, bool]
    """Which processors of the run's plan are restored as completed (decided on the driver)."""
    readers: Mapping[str, frozenset[int]] | None = None
    """Part name -> the members that restore an entry of it, when the snapshot was taken at the
    run's layout (None: unknown, so every part holding a task's vertices is read)."""
    routing: Routings | None = None
    """How the edges routed into each vertex when the snapshot was taken (its manifest's)."""

    def route(self, plan: JobPlan, member: int, vertices: list[str]) -> dict[ProcessorKey, Any]:
        """What each processor of `vertices` on `member` restores: the parts holding entries
        for them are read (and authenticated) by the task itself."""
        saved: dict[str, dict[int, ProcessorSnapshot]] = {name: {} for name in vertices}
        readers = self.readers
        for name, tag in parts_holding(self.parts, vertices).items():
            if readers is not None and name in readers and member not in readers[name]:
                continue
            for (vertex, index), state in self.store.read_part(self.snapshot_id, name, tag).items():
                if vertex in saved:
                    saved[vertex][index] = state
        restored: dict[ProcessorKey, RestoredProcessor] = {}
        for name in vertices:
            vertex_plan = plan.vertices[name]
            lp = vertex_plan.local_parallelism
            wanted = {member * lp + local for local in range(lp)}
            targets, keyed_from_running = route_entries(
                self.snapshot_id, plan, vertex_plan, saved[name], self.routing, wanted
            )
            for index in wanted:
                # the driver knows what moved only within a run: this task sees it always
                targets[index].completed = (
                    self.completed[(name, index)] and not keyed_from_running[index]
                )
                restored[(name, index)] = targets[index]
        return restored


def restore_spec(
    snapshot: Snapshot,
    plan: JobPlan,
    readers: Mapping[str, frozenset[int]] | None = None,
    keyed: Mapping[ProcessorKey, frozenset[int]] | None = None,
) -> RestoreSpec:
    """What the tasks of `plan` restore from `snapshot` (a snapshot of a directory store);
    `readers` as RestoreSpec's and `keyed` as `taking_over`'s, when the snapshot was taken at
    `plan`'s layout by this run."""
    assert snapshot.parts is not None and snapshot.store is not None
    moved = taking_over(snapshot, keyed) if keyed is not None else frozenset()
    return RestoreSpec(
        snapshot_id=snapshot.snapshot_id,
        store=snapshot.store,
        parts=dict(snapshot.parts),
        completed=completed_without_state(snapshot, plan, moved),
        readers=readers,
        routing=snapshot.routing,
    )


@dataclass(frozen=True)
class SavedRouting:
    """Where the entries one processor saved are restored under a plan's layout."""

    keyed: frozenset[int]
    """The global indexes of its vertex's processors that restore its keyed entries (the owner
    of each key's partition, the rule of `snapshot_targets`)."""
    broadcast: bool
    """Whether it saved an entry under a broadcast key, which every processor restores."""


def restoring_processors(
    plan: JobPlan, states: Mapping[ProcessorKey, ProcessorSnapshot]
) -> dict[ProcessorKey, SavedRouting]:
    """Where the entries of each processor of `states` are restored under `plan`'s layout.
    Decodes the entries, unless the vertex has a single processor."""
    routing: dict[ProcessorKey, SavedRouting] = {}
    for key, state in states.items():
        vertex = plan.vertices[key[0]]
        if vertex.total_parallelism == 1:
            routing[key] = SavedRouting(frozenset({0}), broadcast=True)
            continue
        assignment = PartitionAssignment(
            plan.member_count, vertex.local_parallelism, plan.config.partition_count
        )
        keyed: set[int] = set()
        broadcast = False
        for entry_key, _value in state.entries():
            if isinstance(entry_key, BroadcastKey):
                broadcast = True
            else:
                keyed.update(snapshot_targets(entry_key, assignment))
        routing[key] = SavedRouting(frozenset(keyed), broadcast)
    return routing


def restoring_members(
    plan: JobPlan, routing: Mapping[ProcessorKey, SavedRouting]
) -> frozenset[int]:
    """The members whose processors restore an entry of a part, from its `restoring_processors`:
    every member when the part holds a broadcast entry."""
    if any(saved.broadcast for saved in routing.values()):
        return frozenset(range(plan.member_count))
    return frozenset(
        target // plan.vertices[vertex].local_parallelism
        for (vertex, _), saved in routing.items()
        for target in saved.keyed
    )


def taking_over(
    snapshot: Snapshot, keyed: Mapping[ProcessorKey, frozenset[int]]
) -> frozenset[ProcessorKey]:
    """The processors that restore keyed entries a processor of the same vertex saved before it
    completed (`keyed`: each saved processor's `SavedRouting.keyed`): they must run again, even
    if they had completed, or those entries would never be processed."""
    completed = snapshot.completed_flags()
    return frozenset(
        (vertex, target)
        for (vertex, index), targets in keyed.items()
        if not completed.get((vertex, index), False)
        for target in targets
        if target != index
    )


def held_in(store: DirectorySnapshotStore, snapshot: Snapshot | None) -> Snapshot | None:
    """`snapshot` as parts in `store` (a snapshot held elsewhere is copied in first)."""
    if snapshot is None or (
        snapshot.parts is not None
        and snapshot.store is not None
        and os.path.samefile(snapshot.store.directory, store.directory)
    ):
        return snapshot
    copy = replace(snapshot, snapshot_id=store.next_id(), parts=None, store=None)
    store.save(copy)
    return store.latest()
