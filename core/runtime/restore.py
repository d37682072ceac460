"""Restoring a snapshot into a new plan: which entries each new processor gets, and which ones
had already completed.

Entries are routed by `snapshot_targets` over the new plan's partition assignment, so keyed
state reaches the processor that now owns the key's partition and broadcast entries reach every
processor, whatever the new member count and local parallelism (the same rule as TestSupport's
rescaled restore). After a job upgrade that changed an edge's routing into a vertex, its keyed
entries go where `JobConfig.state_on_routing_change` says (routing_change.py).

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

A snapshot may be of an earlier version of the DAG (a job upgrade): a vertex restores the
state saved under its name (or under its old name, `JobConfig.renamed_vertices`, applied by
`with_renames`), and a vertex the snapshot does not know starts empty and runs.
`restorable`, which the engines call when a job is submitted, refuses a snapshot holding state
of a vertex the DAG no longer has, unless the job's config says to drop it, and one whose state
the DAG would read as something else (definition_change.py) or route to other processors
(routing_change.py).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from jetspark.core.config import JobConfig
from jetspark.core.dag import DAG
from jetspark.core.edge_routing import Routings
from jetspark.core.errors import SnapshotError
from jetspark.core.runtime.definition_change import check_definition_changes
from jetspark.core.runtime.plan import JobPlan, VertexPlan
from jetspark.core.runtime.routing_change import check_routing_changes, restore_targets
from jetspark.core.snapshot_keys import BroadcastKey
from jetspark.core.snapshot_store import ProcessorKey, ProcessorSnapshot, Snapshot

_log = logging.getLogger("jetspark.snapshots")


@dataclass
class RestoredProcessor:
    """What one processor of the new plan restores."""

    entries: list[Any] = field(default_factory=list)
    """The `(key, value)` entries routed to it, in the order the saving processors saved them."""
    completed: bool = False
    """True: restore, then end without `complete()` (see the module docstring)."""


def restorable(snapshot: Snapshot, dag: DAG, config: JobConfig) -> Snapshot:
    """`snapshot` as `dag` restores it, which the engines call when a job is submitted with
    `restore_from`: its vertices renamed (`with_renames`), checked against removed vertices,
    changed state definitions (definition_change.py) and changed routing into keyed state
    (routing_change.py), without the state `config` says to drop. Raises SnapshotError,
    naming the vertices and edges, for what it refuses."""
    snapshot = with_renames(snapshot, dag, config)
    _check_removed_vertices(snapshot, dag, config)
    snapshot = check_definition_changes(snapshot, dag, config)
    check_routing_changes(snapshot, dag, config)
    return snapshot


def with_renames(snapshot: Snapshot, dag: DAG, config: JobConfig) -> Snapshot:
    """`snapshot` with the vertices `config.renamed_vertices` renames under their new names.

    A rename whose new name the snapshot holds already is done (a snapshot taken since, as
    `job.restart()` restores). Raises SnapshotError for a new name `dag` does not have or an
    old name the snapshot does not hold."""
    in_dag = {vertex.name for vertex in dag.vertices()}
    in_snapshot = set(snapshot.local_parallelism)
    new_names: dict[str, str] = {}
    for new, old in config.renamed_vertices.items():
        if new not in in_dag:
            raise SnapshotError(
                f"renamed_vertices renames {old!r} to {new!r}, but the DAG{_of(dag)} has no "
                f"vertex {new!r} (its vertices: {_names(in_dag)})"
            )
        if new in in_snapshot:
            continue
        if old not in in_snapshot:
            raise SnapshotError(
                f"renamed_vertices renames {old!r} to {new!r}, but snapshot "
                f"{snapshot.snapshot_id} holds no vertex {old!r} (its vertices: "
                f"{_names(in_snapshot)})"
            )
        new_names[old] = new
    return snapshot.renamed(new_names) if new_names else snapshot


def _check_removed_vertices(snapshot: Snapshot, dag: DAG, config: JobConfig) -> None:
    planned = {vertex.name for vertex in dag.vertices()}
    removed = sorted(set(snapshot.local_parallelism) - planned)
    if not removed:
        return
    if config.ignore_state_of_removed_vertices:
        _log.warning(
            "restoring snapshot %d without the state of vertices the DAG no longer has: %s",
            snapshot.snapshot_id,
            ", ".join(removed),
        )
        return
    lost = snapshot.vertices_with_entries(removed)
    if lost:
        new = sorted(planned - set(snapshot.local_parallelism))
        raise SnapshotError(
            f"snapshot {snapshot.snapshot_id} holds state of "
            f"{'vertices' if len(lost) > 1 else 'vertex'} "
            f"{_names(lost)}, which the DAG{_of(dag)} does not have (the snapshot was taken of "
            "another DAG, or of an earlier version of this one): restoring it would lose that "
            f"state. {_rename_hint(lost, new)}To upgrade the job and drop that state, pass "
            "JobConfig(ignore_state_of_removed_vertices=True)"
        )


def _rename_hint(lost: list[str], new: list[str]) -> str:
    """The sentence suggesting `renamed_vertices` for the DAG's `new` vertices (none: none)."""
    if not new:
        return ""
    mapping = f"{{{new[0]!r}: {lost[0]!r}}}" if len(new) == len(lost) == 1 else "{'new': 'old'}"
    vertices = "vertex" if len(new) == 1 else "vertices"
    return (
        f"The DAG's new {vertices} (without state in the snapshot): {_names(new)}; if one is a "
        f"removed vertex renamed, pass JobConfig(renamed_vertices={mapping}) to restore its "
        "state. "
    )


def _names(names: Iterable[str]) -> str:
    return ", ".join(repr(name) for name in sorted(names))


def _of(dag: DAG) -> str:
    return f" {dag.name!r}" if dag.name else ""


def route_snapshot(snapshot: Snapshot, plan: JobPlan) -> dict[ProcessorKey, RestoredProcessor]:
    """Deals the entries of `snapshot` to the processors of `plan` (all members, all vertices);
    state of vertices the plan does not have is left out (see `restorable`)."""
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
    saved = snapshot.of_vertex(name)
    targets, keyed_from_running = route_entries(
        snapshot.snapshot_id, plan, vertex, saved, snapshot.routing
    )
    all_completed = bool(saved) and all(p.completed for p in saved.values())
    same_layout = _same_layout(snapshot, plan, vertex)
    feeders = [(edge.source_name, edge.senders()) for edge in vertex.inbound]
    for index, target in enumerate(targets):
        was_completed = all_completed or (same_layout and index in saved and saved[index].completed)
        target.completed = (
            was_completed
            and not keyed_from_running[index]
            and _feeders_completed(feeders, index, lambda key: restored[key].completed)
        )
        restored[(name, index)] = target


def route_entries(
    snapshot_id: int,
    plan: JobPlan,
    vertex: VertexPlan,
    saved: dict[int, ProcessorSnapshot],
    routing: Routings | None,
    wanted: set[int] | None = None,
) -> tuple[list[RestoredProcessor], list[bool]]:
    """Deals the saved entries of `vertex` to its processors in `plan` (only to the `wanted`
    global indexes, when given), keyed ones as `restore_targets` says after a change from the
    `routing` the snapshot recorded; also says which processors got keyed state of a processor
    that had not completed."""
    total = vertex.total_parallelism
    targets_of, drop_keyed = restore_targets(plan, vertex, routing)
    targets: list[RestoredProcessor] = [RestoredProcessor() for _ in range(total)]
    keyed_from_running = [False] * total
    for index, processor in sorted(saved.items()):
        for key, value in _entries(snapshot_id, vertex.name, index, processor):
            if drop_keyed and not isinstance(key, BroadcastKey):
                continue
            owners = targets_of(key)
            for target in owners:
                if wanted is None or target in wanted:
                    targets[target].entries.append((key, value))
            if not processor.completed and not isinstance(key, BroadcastKey):
                for target in owners:
                    keyed_from_running[target] = True
    return targets, keyed_from_running


def completed_without_state(
    snapshot: Snapshot, plan: JobPlan, taking_over: Collection[ProcessorKey] = ()
) -> dict[ProcessorKey, bool]:
    """Which processors of `plan` are restored as completed, decided from the snapshot's
    layout and completed flags alone (no state is read): as `route_snapshot`, except that
    after a change of layout a vertex whose processors had not all completed runs again
    (sound: its processors resume from their final positions). `taking_over`: processors
    known to restore keyed entries of a processor that had not completed; they run again,
    and so does what they feed."""
    flags: dict[ProcessorKey, bool] = {}
    saved_flags = snapshot.completed_flags()
    completed = {key for key, done in saved_flags.items() if done}
    for vertex in plan.vertices.values():
        name = vertex.name
        saved = {index for vertex_name, index in saved_flags if vertex_name == name}
        done = {index for vertex_name, index in completed if vertex_name == name}
        all_completed = bool(saved) and saved == done
        same_layout = _same_layout(snapshot, plan, vertex)
        feeders = [(edge.source_name, edge.senders()) for edge in vertex.inbound]
        for index in range(vertex.total_parallelism):
            flags[(name, index)] = (
                (all_completed or (same_layout and index in done))
                and (name, index) not in taking_over
                and _feeders_completed(feeders, index, flags.__getitem__)
            )
    return flags


def _same_layout(snapshot: Snapshot, plan: JobPlan, vertex: VertexPlan) -> bool:
    """True when the vertex ran with the same member count and local parallelism (False for a
    vertex the snapshot does not know)."""
    return (
        snapshot.member_count == plan.member_count
        and snapshot.local_parallelism.get(vertex.name) == vertex.local_parallelism
    )


def _feeders_completed(
    feeders: list[tuple[str, dict[int, list[int]]]],
    index: int,
    completed: Any,
) -> bool:
    return all(
        completed((source, upstream)) for source, senders in feeders for upstream in senders[index]
    )


def _entries(snapshot_id: int, name: str, index: int, saved: ProcessorSnapshot) -> list[Any]:
    try:
        return saved.entries()
    except Exception as error:  # unpickling may raise anything: a class gone, renamed, changed
        raise SnapshotError(
            f"snapshot {snapshot_id}: the state of vertex '{name}' processor #{index} "
            f"cannot be read ({type(error).__name__}: {error})"
        ) from error
