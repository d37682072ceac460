"""Snapshot keys: which restored processors receive a saved `(key, value)` state entry.

A processor behind a partitioned edge sees only the keys of its partitions, so it saves its state
keyed by those keys; on restore an entry goes to the one processor that owns the partition of its
key, whatever the new parallelism. State that every processor needs (or that is not per key) is
saved under `broadcast_key(k)` and restored into every processor (Jet's `broadcastKey()`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jetspark.partitioning import DEFAULT, PartitionAssignment, Partitioner


@dataclass(frozen=True, slots=True)
class BroadcastKey:
    """A snapshot key whose entry is restored into every processor instead of one owner."""

    key: Any


def broadcast_key(key: Any) -> BroadcastKey:
    """Marks `key` as broadcast: its snapshot entry is restored into every processor."""
    return BroadcastKey(key)


def snapshot_targets(
    key: Any, assignment: PartitionAssignment, partitioner: Partitioner = DEFAULT
) -> range:
    """The global indexes of the processors that restore an entry saved under `key`."""
    if isinstance(key, BroadcastKey):
        return range(assignment.member_count * assignment.local_parallelism)
    owner = assignment.global_processor(partitioner.partition(key, assignment.partition_count))
    return range(owner, owner + 1)
