"""The snapshot a Spark job's tasks restore: fixed by the driver, read by each task itself.

The driver never loads a snapshot's state: it ships the manifest's part list, and every task
reads (and authenticates) the parts that hold its own processors' vertices.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from jetspark.core.runtime.plan import JobPlan
from jetspark.core.runtime.restore import RestoredProcessor, completed_without_state, route_entries
from jetspark.core.snapshot_store import (
    DirectorySnapshotStore,
    Held,
    ProcessorKey,
    ProcessorSnapshot,
    Snapshot,
    parts_holding,
)


@dataclass(frozen=True)
class RestoreSpec:
    """Where a job's tasks find the snapshot they restore: plain data, shipped to tasks."""

    snapshot_id: int
    store: DirectorySnapshotStore
    parts: dict[str, tuple[bytes, Held]]
    """Part name -> (tag, the processors it holds), from the snapshot's manifest."""
    completed: dict[ProcessorKey, bool]
    """Which processors of the run's plan are restored as completed (decided on the driver)."""

    def route(self, plan: JobPlan, member: int, vertices: list[str]) -> dict[ProcessorKey, Any]:
        """What each processor of `vertices` on `member` restores: the parts holding those
        vertices are read (and authenticated) by the task itself."""
        saved: dict[str, dict[int, ProcessorSnapshot]] = {name: {} for name in vertices}
        for name, tag in parts_holding(self.parts, vertices).items():
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


def restore_spec(snapshot: Snapshot, plan: JobPlan) -> RestoreSpec:
    """What the tasks of `plan` restore from `snapshot` (a snapshot of a directory store)."""
    assert snapshot.parts is not None and snapshot.store is not None
    return RestoreSpec(
        snapshot_id=snapshot.snapshot_id,
        store=snapshot.store,
        parts=dict(snapshot.parts),
        completed=completed_without_state(snapshot, plan),
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
