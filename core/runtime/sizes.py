"""Cheap estimates of the memory items take, for the byte bounds of a member's queues and outboxes.

Nothing here walks an item: the queues and outboxes look at one item now and then (a sample) and
take its estimate for its neighbours', so the usual stream of small items pays for a few calls
per thousand items, not one per item.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Sequence
from typing import Any

_getsizeof = sys.getsizeof

_SCALARS = frozenset({int, float, bool, complex, type(None)})
_SCALAR_BYTES = 32
"""What a number takes, about (`sys.getsizeof` itself costs more than the estimate is worth)."""
_BYTES_HEADER = 33
_SEQUENCE_HEADER = 56
"""A tuple's or list's own bytes besides a pointer per element, about."""
_ELEMENTS_SAMPLED = 8
"""Elements of a container whose sizes are looked at; the others are taken to be like them."""


def estimated_size(item: Any) -> int:
    """The bytes `item` takes, estimated: its own size (`len` of bytes, `sys.getsizeof` of a str
    and of most objects, `nbytes` when larger: a memoryview, a numpy or pyarrow array), plus,
    for a tuple, list or dict and for an object's attributes, the own sizes of up to eight
    elements scaled to all of them. Bulk nested deeper is not seen (the item counts of the
    queues still bound it)."""
    if isinstance(item, (tuple, list)):
        count = len(item)
        sample = item if count <= _ELEMENTS_SAMPLED else item[:_ELEMENTS_SAMPLED]
        return _SEQUENCE_HEADER + 8 * count + _scaled(sample, count)
    size = _own_size(item)
    if type(item) in _SCALARS or type(item) is str or type(item) is bytes:
        return size
    if isinstance(item, dict):
        pairs = list(itertools.islice(item.items(), _ELEMENTS_SAMPLED))
        return size + _scaled(itertools.chain.from_iterable(pairs), 2 * len(item))
    attributes = getattr(item, "__dict__", None)
    if type(attributes) is dict:
        values = list(itertools.islice(attributes.values(), _ELEMENTS_SAMPLED))
        return size + _getsizeof(attributes) + _scaled(values, len(attributes))
    return size


def updated_estimate(previous: int, item: Any) -> int:
    """The bytes per item after sampling `item`: its estimated size, or half of `previous` when
    that is more (a decaying maximum: a large item counts at once, smaller ones bring the
    estimate down over a few samples); at least 1."""
    return max(estimated_size(item), previous >> 1, 1)


def _own_size(item: Any) -> int:
    kind = type(item)
    if kind is bytes or kind is bytearray:
        return _BYTES_HEADER + len(item)
    if kind in _SCALARS:
        return _SCALAR_BYTES
    if kind is str:
        return _getsizeof(item)
    own = _getsizeof(item, 0)
    nbytes = getattr(item, "nbytes", None)
    return max(own, nbytes) if type(nbytes) is int else own


def _scaled(sample: Sequence[Any] | Iterable[Any], count: int) -> int:
    """The own sizes of the elements sampled, scaled to `count` elements."""
    total = seen = 0
    for element in sample:
        total += _own_size(element)
        seen += 1
    return total * count // seen if seen else 0
