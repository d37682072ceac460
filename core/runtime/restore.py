"""Restoring a snapshot into a new plan: which entries each new processor gets, and which ones
had already completed.

Entries are routed by `snapshot_targets` over the new plan's partition assignment, so keyed
state reaches the processor that now owns the key's partition and broadcast entries reach every
processor, whatever the new member count and local parallelism (the same rule as TestSupport's
rescaled restore).

A processor that had completed before the snapshot was taken must not run again: its output is
already part of the downstream state. Its final state was saved when it completed, and the
processor of the new plan in its place is restored from the entries routed to it and then ends
without `complete()`. That is sound only when it will receive no input, so a new processor is
"restored as completed" when:

- every processor of its vertex had completed, or the vertex kept its layout (member count and
  local parallelism) and the processor with its index had completed; and
- none of its entries is keyed state saved by a processor that had not completed; and
- every processor feeding it in the new plan is restored as completed too.

Otherwise it runs normally from the entries routed to it: sources resume from their final
positions and emit nothing more; see docs/fault_tolerance.md for the built-in processors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jetspark.core.errors import SnapshotError
from jetspark.core.runtime.plan import JobPlan, VertexPlan
from jetspark.core.snapshot_keys import BroadcastKey, snapshot_targets
from jetspark.core.snapshot_store import ProcessorKey, ProcessorSnapshot, Snapshot
from jetspark.partitioning import PartitionAssignment


@dataclass
class RestoredProcessor:
    """What one processor of the new plan restores."""

    entries: list[Any] = field(default_factory=list)
    """The `(key, value)` entries routed to it, in the order the saving processors saved them."""
    completed: bool = False
    """True: restore, then end without `complete()` (see the module docstring)."""


def route_snapshot(snapshot: Snapshot, plan: JobPlan) -> dict[ProcessorKey, RestoredProcessor]:
    """Deals the entries of `snapshot` to the processors of `plan` (all members, all vertices)."""
    saved_vertices, planned = set(snapshot.local_parallelism), set(plan.vertices)
    if saved_vertices != planned:
        raise SnapshotError(
            f"snapshot {snapshot.snapshot_id} was taken of another DAG: its vertices "
            f"{sorted(saved_vertices)} differ from the job's {sorted(planned)}"
        )
    restored: dict[ProcessorKey, RestoredProcessor] = {}
    for vertex in plan.vertices.values():  # topological order: feeders are decided first
        _route_vertex(snapshot, plan, vertex, restored)
    return restored


def _route_vertex(
    snapshot: Snapshot,
    plan: JobPlan,
    vertex: VertexPlan,
    restored: dict[ProcessorKey, RestoredProcessor],
) -> None:
    name = vertex.name
    total = vertex.total_parallelism
    assignment = PartitionAssignment(
        plan.member_count, vertex.local_parallelism, plan.config.partition_count
    )
    saved = snapshot.of_vertex(name)
    targets: list[RestoredProcessor] = [RestoredProcessor() for _ in range(total)]
    keyed_from_running = [False] * total
    for index, processor in sorted(saved.items()):
        for key, value in _entries(snapshot, name, index, processor):
            owners = snapshot_targets(key, assignment)
            for target in owners:
                targets[target].entries.append((key, value))
            if not processor.completed and not isinstance(key, BroadcastKey):
                for target in owners:
                    keyed_from_running[target] = True
    all_completed = bool(saved) and all(p.completed for p in saved.values())
    same_layout = (
        snapshot.member_count == plan.member_count
        and snapshot.local_parallelism[name] == vertex.local_parallelism
    )
    feeders = [(edge.source_name, edge.senders()) for edge in vertex.inbound]
    for index, target in enumerate(targets):
        was_completed = all_completed or (same_layout and index in saved and saved[index].completed)
        target.completed = (
            was_completed
            and not keyed_from_running[index]
            and all(
                restored[(source, upstream)].completed
                for source, senders in feeders
                for upstream in senders[index]
            )
        )
        restored[(name, index)] = target


def _entries(snapshot: Snapshot, name: str, index: int, saved: ProcessorSnapshot) -> list[Any]:
    try:
        return saved.entries()
    except ValueError as error:
        raise SnapshotError(
            f"snapshot {snapshot.snapshot_id}: the state of vertex '{name}' processor #{index} "
            f"cannot be read ({error})"
        ) from error
