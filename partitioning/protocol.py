"""The partitioner contract shared by edges, the member runtime and the Spark engine."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

DEFAULT_PARTITION_COUNT = 271
"""Jet's default partition count: many more partitions than processors keeps the load even."""


@runtime_checkable
class Partitioner(Protocol):
    """Maps a key to a partition id in ``range(partition_count)``; equal keys get equal ids."""

    def partition(self, key: object, partition_count: int) -> int:
        """Return the partition id of ``key``, in ``range(partition_count)``."""
        ...


def is_deterministic_across_processes(partitioner: Partitioner) -> bool:
    """Tell whether ``partitioner`` gives every process the same ids, as distributed edges need.

    A partitioner declares this with a ``deterministic_across_processes`` attribute; a custom
    partitioner that declares nothing is trusted to be deterministic.
    """
    return bool(getattr(partitioner, "deterministic_across_processes", True))
