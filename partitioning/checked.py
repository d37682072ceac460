"""A guard around a user's partitioner: an id outside `range(partition_count)` names the
partitioner and the value, instead of being silently taken (a negative id indexes from the end)
or failing with a bare IndexError deep in routing."""

from __future__ import annotations

import reprlib

from .hashcode import HashCodePartitioner
from .murmur import MurmurHashPartitioner
from .protocol import Partitioner

_BUILT_IN = (MurmurHashPartitioner, HashCodePartitioner)


class CheckedPartitioner:
    """Delegates to `inner` and checks every id it returns."""

    __slots__ = ("inner",)

    def __init__(self, inner: Partitioner) -> None:
        self.inner = inner

    @property
    def deterministic_across_processes(self) -> bool:
        """What the wrapped partitioner declares (trusted when it declares nothing)."""
        return bool(getattr(self.inner, "deterministic_across_processes", True))

    def partition(self, key: object, partition_count: int) -> int:
        """The inner partitioner's id of `key`; ValueError when it is no int in range."""
        result = self.inner.partition(key, partition_count)
        if type(result) is int and 0 <= result < partition_count:
            return result
        raise ValueError(
            f"partitioner {self.inner!r} returned {result!r} for key {reprlib.repr(key)}: a "
            f"partition id must be an int in range({partition_count})"
        )

    def __repr__(self) -> str:
        return f"CheckedPartitioner({self.inner!r})"


def checked_partitioner(partitioner: Partitioner) -> Partitioner:
    """`partitioner` itself when it is a built-in one (its ids are in range by construction),
    else a CheckedPartitioner around it."""
    if type(partitioner) in _BUILT_IN or isinstance(partitioner, CheckedPartitioner):
        return partitioner
    return CheckedPartitioner(partitioner)
