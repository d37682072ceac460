"""Partitioning: key -> partition id (the same in every process) -> member -> processor."""

from __future__ import annotations

from .assignment import (
    PartitionAssignment,
    global_processor_of_partition,
    local_edge_processor_of_partition,
    local_processor_of_partition,
    member_of_partition,
    partitions_of_global_processor,
)
from .checked import CheckedPartitioner, checked_partitioner
from .hashcode import HASH_CODE, HashCodePartitioner
from .keys import UnpartitionableKeyError, normalise_key
from .murmur import DEFAULT, MurmurHashPartitioner
from .protocol import DEFAULT_PARTITION_COUNT, Partitioner, is_deterministic_across_processes


def partition_id(
    key: object,
    partition_count: int = DEFAULT_PARTITION_COUNT,
    partitioner: Partitioner = DEFAULT,
) -> int:
    """Return the partition id of ``key``: the one call for code outside the routing hot path."""
    if partition_count < 1:
        raise ValueError(f"partition_count must be >= 1, got {partition_count!r}")
    return partitioner.partition(key, partition_count)


__all__ = [
    "DEFAULT",
    "DEFAULT_PARTITION_COUNT",
    "HASH_CODE",
    "CheckedPartitioner",
    "HashCodePartitioner",
    "MurmurHashPartitioner",
    "PartitionAssignment",
    "Partitioner",
    "UnpartitionableKeyError",
    "checked_partitioner",
    "global_processor_of_partition",
    "is_deterministic_across_processes",
    "local_edge_processor_of_partition",
    "local_processor_of_partition",
    "member_of_partition",
    "normalise_key",
    "partition_id",
    "partitions_of_global_processor",
]
