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

from jetspark.core.runtime.plan import JobPlan
from jetspark.core.runtime.restore import RestoredProcessor, completed_without_state, route_entries
from jetspark.core.snapshot_keys import snapshot_targets
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
            targets, _ = route_entries(self.snapshot_id, plan, vertex_plan, saved[name], wanted)
            for index in wanted:
                targets[index].completed = self.completed[(name, index)]
                restored[(name, index)] = targets[index]
        return restored


def restore_spec(
    snapshot: Snapshot, plan: JobPlan, readers: Mapping[str, frozenset[int]] | None = None
) -> RestoreSpec:
    """What the tasks of `plan` restore from `snapshot` (a snapshot of a directory store);
    `readers` as RestoreSpec's, when the snapshot was taken at `plan`'s layout."""
    assert snapshot.parts is not None and snapshot.store is not None
    return RestoreSpec(
        snapshot_id=snapshot.snapshot_id,
        store=snapshot.store,
        parts=dict(snapshot.parts),
        completed=completed_without_state(snapshot, plan),
        readers=readers,
    )


def restoring_processors(
    plan: JobPlan, states: Mapping[ProcessorKey, ProcessorSnapshot]
) -> dict[ProcessorKey, frozenset[int]]:
    """Each processor of `states` -> the global indexes of its vertex's processors that restore
    an entry it saved, under `plan`'s layout (the rule of `snapshot_targets`): all of them for
    an entry under a broadcast key, the owner of the key's partition for any other. Decodes the
    entries, unless the vertex has a single processor."""
    restorers: dict[ProcessorKey, frozenset[int]] = {}
    for key, state in states.items():
        vertex = plan.vertices[key[0]]
        everyone = frozenset(range(vertex.total_parallelism))
        if len(everyone) == 1:
            restorers[key] = everyone
            continue
        assignment = PartitionAssignment(
            plan.member_count, vertex.local_parallelism, plan.config.partition_count
        )
        targets: set[int] = set()
        for entry_key, _value in state.entries():
            targets.update(snapshot_targets(entry_key, assignment))
            if len(targets) == len(everyone):
                break
        restorers[key] = frozenset(targets)
    return restorers


def restoring_members(
    plan: JobPlan, restorers: Mapping[ProcessorKey, frozenset[int]]
) -> frozenset[int]:
    """The members whose processors restore an entry of a part, from its `restoring_processors`."""
    return frozenset(
        target // plan.vertices[vertex].local_parallelism
        for (vertex, _), targets in restorers.items()
        for target in targets
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
