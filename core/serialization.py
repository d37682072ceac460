"""Bytes for whatever leaves a processor's memory: items crossing members, snapshot state.

A batch is msgpack when every item round-trips exactly through it (scalars and tuples of them,
the common case of words and (key, value) pairs), and pickle (protocol 5) otherwise, so a list
never comes back as a tuple and no object is silently changed. The first byte says which. A str
holding a lone surrogate (`os.fsdecode` of a file name that is not UTF-8) is no UTF-8, so its
batch goes to pickle as well, which keeps such strs exactly.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterable
from typing import Any

import msgpack

_MSGPACK = b"M"
_PICKLE = b"P"
_SCALARS = frozenset({str, bytes, float, bool, type(None), int})
"""Types msgpack (unpacked with use_list=False) gives back equal and of the same type; ints only
within 64 bits, which `packb` checks itself (OverflowError)."""


def _all_msgpack_exact(items: list[Any]) -> bool:
    """True when every item is a scalar of `_SCALARS` or a tuple of such (nested alike).

    One level at a time, in passes over the whole batch that run in C (the set of the items'
    types, then the tuples' elements chained together), not a Python call per item.
    """
    kinds = set(map(type, items))
    if tuple not in kinds:
        return kinds <= _SCALARS
    kinds.discard(tuple)
    if not kinds <= _SCALARS:
        return False
    tuples = items if not kinds else [item for item in items if type(item) is tuple]
    return _all_msgpack_exact(list(itertools.chain.from_iterable(tuples)))


def encode_batch(items: Iterable[Any]) -> bytes:
    """Encodes a batch of items; raises TypeError naming the first item that cannot be encoded."""
    items = list(items)
    if _all_msgpack_exact(items):
        try:
            return _MSGPACK + msgpack.packb(items, use_bin_type=True)
        except (OverflowError, UnicodeEncodeError):
            pass  # an int beyond 64 bits or a lone surrogate: pickle keeps it exactly
    try:
        return _PICKLE + pickle.dumps(items, protocol=5)
    except (pickle.PicklingError, TypeError, AttributeError) as error:
        culprit = next((i for i in items if not _picklable(i)), None)
        raise TypeError(
            f"cannot serialize item of type {type(culprit).__name__} ({culprit!r:.80}): items "
            "that leave a processor (distributed edges, snapshots) must be msgpack scalars/tuples "
            f"or picklable objects ({error})"
        ) from error


def decode_batch(data: bytes) -> list[Any]:
    """Decodes what `encode_batch` produced; raises ValueError when `data` is not such a batch."""
    kind, payload = data[:1], memoryview(data)[1:]
    if kind not in (_MSGPACK, _PICKLE):
        raise ValueError(f"not a jetspark batch (leading byte {bytes(kind)!r})")
    try:
        if kind == _MSGPACK:
            items = msgpack.unpackb(payload, use_list=False, raw=False, strict_map_key=False)
        else:
            items = pickle.loads(payload)
    except (ValueError, EOFError, pickle.UnpicklingError, msgpack.UnpackException) as error:
        raise ValueError(f"corrupt jetspark batch ({type(error).__name__}: {error})") from error
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"corrupt jetspark batch: holds a {type(items).__name__}, not a batch")
    return list(items)


def roundtrip(item: Any) -> Any:
    """The item as another process would see it after serialization."""
    return decode_batch(encode_batch([item]))[0]


def _picklable(item: Any) -> bool:
    try:
        pickle.dumps(item, protocol=5)
    except Exception:
        return False
    return True
