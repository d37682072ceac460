"""The hash-code partitioner: Python's ``hash()``, fast but safe on local edges only."""

from __future__ import annotations

from typing import ClassVar


class HashCodePartitioner:
    """Partition id = ``hash(key) % partition_count``.

    ``hash()`` of str and bytes is salted per process (PYTHONHASHSEED), so two processes can send
    one key to two partitions: use it on local edges only; it declares
    ``deterministic_across_processes = False`` so distributed edges can refuse it.
    """

    __slots__ = ()
    deterministic_across_processes: ClassVar[bool] = False

    def partition(self, key: object, partition_count: int) -> int:
        """Return ``hash(key) % partition_count``."""
        return hash(key) % partition_count

    def __eq__(self, other: object) -> bool:
        """Compare equal to every other instance: the partitioner has no settings."""
        return type(other) is HashCodePartitioner

    def __hash__(self) -> int:
        """Hash alike for all instances, consistent with ``__eq__``."""
        return hash(HashCodePartitioner)

    def __repr__(self) -> str:
        """Show the class name, which is all there is to it."""
        return "HashCodePartitioner()"


HASH_CODE = HashCodePartitioner()
"""The hash-code partitioner instance to give a local partitioned edge."""
