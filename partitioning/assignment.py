"""Where a partition is processed: partition -> member -> local processor, the same everywhere.

Member ``m`` owns the partitions ``p`` with ``p % member_count == m``. On a distributed edge the
owning member's partitions, in ascending order, are dealt round-robin to its local processors, so
partition ``p`` goes to local processor ``(p // member_count) % local_parallelism`` and to global
processor ``member * local_parallelism + local``. On a local partitioned edge every member has its
own processor for each partition: ``p % local_parallelism``. With ``partition_count >=
member_count * local_parallelism`` every processor gets partitions, and the counts per processor
differ by at most one; with fewer partitions, the surplus processors simply receive no items.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .protocol import DEFAULT_PARTITION_COUNT


def member_of_partition(partition: int, member_count: int) -> int:
    """Return the member that owns ``partition``."""
    return partition % member_count


def local_processor_of_partition(partition: int, member_count: int, local_parallelism: int) -> int:
    """Return the local index, on the owning member, of the processor of ``partition``."""
    return (partition // member_count) % local_parallelism


def global_processor_of_partition(partition: int, member_count: int, local_parallelism: int) -> int:
    """Return the global index (member * local_parallelism + local) of ``partition``'s processor."""
    member = partition % member_count
    return member * local_parallelism + (partition // member_count) % local_parallelism


def local_edge_processor_of_partition(partition: int, local_parallelism: int) -> int:
    """Return the processor of ``partition`` on a local edge (the same index on every member)."""
    return partition % local_parallelism


def partitions_of_global_processor(
    global_index: int, member_count: int, local_parallelism: int, partition_count: int
) -> list[int]:
    """Return the partitions a global processor owns, ascending (routes keyed state on restore)."""
    member, local = divmod(global_index, local_parallelism)
    return list(
        range(member + local * member_count, partition_count, member_count * local_parallelism)
    )


@dataclass(frozen=True)
class PartitionAssignment:
    """The assignment for one vertex shape, with ``partition -> global processor`` precomputed.

    The runtime looks a processor up per item; a tuple index is cheaper than the arithmetic.
    """

    member_count: int
    local_parallelism: int
    partition_count: int = DEFAULT_PARTITION_COUNT
    _global_processors: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Validate the shape and precompute the lookup table."""
        for name in ("member_count", "local_parallelism", "partition_count"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        table = tuple(
            global_processor_of_partition(p, self.member_count, self.local_parallelism)
            for p in range(self.partition_count)
        )
        object.__setattr__(self, "_global_processors", table)

    def global_processor(self, partition: int) -> int:
        """Return the global index of the processor that owns ``partition``."""
        return self._global_processors[partition]

    def member(self, partition: int) -> int:
        """Return the member that owns ``partition``."""
        return partition % self.member_count

    def local_processor(self, partition: int) -> int:
        """Return the local index, on the owning member, of the processor of ``partition``."""
        return (partition // self.member_count) % self.local_parallelism

    def partitions_of(self, global_index: int) -> list[int]:
        """Return the partitions the processor at ``global_index`` owns, ascending."""
        return partitions_of_global_processor(
            global_index, self.member_count, self.local_parallelism, self.partition_count
        )
