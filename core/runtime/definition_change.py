"""A job upgrade that changes what a vertex's saved state means.

A window processor's state is accumulators per frame of its window, made by its aggregate
operation, under the keys its key function gave. Restored into another window definition,
aggregate operation, key function or processor class, the same entries mean something else:
frames fall between the new windows and are never emitted, accumulators are combined with
functions that did not make them, keys are never looked up again. So
`check_definition_changes`, which the engines call when a job is submitted with `restore_from`,
compares the definition each vertex's state had when the snapshot was taken (its manifest's,
state_definition.py) with the new DAG's, and refuses a change in a vertex that saved state,
naming the vertex and both definitions, unless `JobConfig.state_on_definition_change` is
"drop": then those vertices restore nothing and start empty, as a vertex new to the DAG does.

Only vertices whose definition is known on both sides are compared; a vertex that saved no
entry (a stateless one) may change freely. A snapshot that recorded no definitions (a
manifest before version 4, or a snapshot made by hand) cannot be checked: one warning says so.
"""

from __future__ import annotations

import logging

from jetspark.core.config import JobConfig
from jetspark.core.dag import DAG
from jetspark.core.errors import SnapshotError
from jetspark.core.snapshot_store import Snapshot
from jetspark.core.state_definition import StateDefinition, definitions_of

_log = logging.getLogger("jetspark.snapshots")


def check_definition_changes(snapshot: Snapshot, dag: DAG, config: JobConfig) -> Snapshot:
    """`snapshot` when no vertex of `dag` with state in it changed its definition; without
    the state of those that did when `config.state_on_definition_change` is "drop" (logging a
    warning naming them); else raises SnapshotError naming each vertex and what changed."""
    saved = snapshot.definitions
    if saved is None:
        _log.warning(
            "snapshot %d does not record what defined its vertices' state (it was taken by a "
            "jetspark before snapshot manifest version 4, or made by hand): a change of a "
            "window, aggregate operation, key function or processor class cannot be "
            "detected, and the state is restored as it was saved",
            snapshot.snapshot_id,
        )
        return snapshot
    new = definitions_of(dag.vertices())
    changed = sorted(
        vertex for vertex, definition in new.items() if saved.get(vertex, definition) != definition
    )
    stateful = snapshot.vertices_with_entries(changed)
    if not stateful:
        return snapshot
    described = "; ".join(
        f"vertex {vertex!r}: {describe_change(saved[vertex], new[vertex])}" for vertex in stateful
    )
    if config.state_on_definition_change is None:
        raise SnapshotError(
            f"snapshot {snapshot.snapshot_id} holds state that the DAG{_of(dag)} would read "
            f"as something else: {described}. Restored, its entries would be misread or "
            "never used (a frame between the new windows is never emitted, an accumulator is "
            "combined by functions that did not make it, offsets are applied to another "
            "journal). Restore the snapshot into the definitions it was taken with, or "
            'pass JobConfig(state_on_definition_change="drop") to start '
            f"{'these vertices' if len(stateful) > 1 else 'this vertex'} without its state"
        )
    _log.warning(
        "restoring snapshot %d without the state of %s, as state_on_definition_change='drop' "
        "says: %s",
        snapshot.snapshot_id,
        ", ".join(repr(vertex) for vertex in stateful),
        described,
    )
    return snapshot.without(stateful)


def describe_change(old: StateDefinition, new: StateDefinition) -> str:
    """`window was tumbling(size=100), now tumbling(size=200)`, one clause per aspect."""
    before, after = dict(old), dict(new)
    clauses = [
        f"{aspect} was {before.get(aspect, '(none)')}, now {after.get(aspect, '(none)')}"
        for aspect in sorted(before.keys() | after.keys())
        if before.get(aspect) != after.get(aspect)
    ]
    return "; ".join(clauses)


def _of(dag: DAG) -> str:
    return f" {dag.name!r}" if dag.name else ""
