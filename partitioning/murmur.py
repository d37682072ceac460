"""The default partitioner: MurmurHash3 over msgpack bytes, the same in every Python process."""

from __future__ import annotations

from typing import Any, ClassVar

import mmh3
import msgpack

from .keys import normalise_key

_FLAT = frozenset({str, bytes, int, type(None)})
_murmur3 = mmh3.hash


class MurmurHashPartitioner:
    """Partition id = unsigned murmur3_32 (seed 0) of the msgpack bytes of the normalised key.

    Unlike ``hash()``, the id does not depend on PYTHONHASHSEED, so it is safe on distributed
    edges. Keys equal in a Python dict get one id (see :func:`normalise_key`); keys that msgpack
    cannot encode deterministically raise :class:`UnpartitionableKeyError` (a ``TypeError``).
    One reused ``msgpack.Packer`` does the encoding (``packb`` builds one per call, 3x slower);
    ``pack`` of a normalised key never calls back into Python, so the GIL keeps it thread-safe.
    """

    __slots__ = ("_pack", "_pack_surrogates")
    deterministic_across_processes: ClassVar[bool] = True

    def __init__(self) -> None:
        """Build the packers: strict UTF-8 for speed, ``surrogatepass`` for lone surrogates."""
        self._pack = msgpack.Packer().pack
        self._pack_surrogates = msgpack.Packer(unicode_errors="surrogatepass").pack

    def partition(self, key: Any, partition_count: int) -> int:
        """Return the partition id of ``key``, in ``range(partition_count)``."""
        kind = type(key)
        if kind is tuple:
            for item in key:
                if type(item) not in _FLAT:
                    key = normalise_key(key)
                    break
        elif kind is not str and kind is not int:
            key = normalise_key(key)
        try:
            try:
                data = self._pack(key)
            except UnicodeEncodeError:  # a lone surrogate, e.g. from os.fsdecode
                data = self._pack_surrogates(key)
        except OverflowError:
            normalise_key(key)  # raises UnpartitionableKeyError naming the out-of-range int
            raise
        return _murmur3(data, 0, False) % partition_count

    def __reduce__(self) -> tuple[type[MurmurHashPartitioner], tuple[()]]:
        """Pickle as a bare constructor call: the packers are rebuilt on the receiving executor."""
        return (MurmurHashPartitioner, ())

    def __eq__(self, other: object) -> bool:
        """Compare equal to every other instance: the partitioner has no settings."""
        return type(other) is MurmurHashPartitioner

    def __hash__(self) -> int:
        """Hash alike for all instances, consistent with ``__eq__``."""
        return hash(MurmurHashPartitioner)

    def __repr__(self) -> str:
        """Show the class name, which is all there is to it."""
        return "MurmurHashPartitioner()"


DEFAULT = MurmurHashPartitioner()
"""The partitioner of a partitioned edge unless the user gives another."""
