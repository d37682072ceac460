"""Tests of jetspark.core.serialization: items come back exactly as they left, whichever codec."""

from __future__ import annotations

import dataclasses
import enum
import fractions
import math
import pickle
import struct
from collections import OrderedDict, namedtuple

import msgpack
import pytest

from jetspark.core.serialization import CHUNK_ITEMS, decode_batch, encode_batch, roundtrip


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


Pair = namedtuple("Pair", "key value")


class Colour(enum.Enum):
    RED = "red"


class Word(str):
    pass


def assert_identical(actual, expected):
    """Equal, with the same type at every level (a list is not a tuple, True is not 1)."""
    assert type(actual) is type(expected)
    if isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(actual)
    elif isinstance(expected, float):
        assert (actual, math.copysign(1, actual)) == (expected, math.copysign(1, expected))
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            assert_identical(a, e)
    else:
        assert actual == expected


SCALARS_AND_TUPLES = [
    "word",
    "",
    "naïve ünïcode ✓",
    b"\x00\xffbytes",
    b"",
    0,
    -1,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    1.5,
    -0.0,
    float("inf"),
    float("nan"),
    True,
    False,
    None,
    (),
    ("word", 1),
    (1, (2.5, (b"x", None, (True,))), "deep"),
]

OTHER_ITEMS = [
    [1, "a"],
    [],
    ([1], 2),
    {"a": 1, "b": [2]},
    {(1, "a"): {2, 3}},
    {1, 2, 3},
    frozenset({"x"}),
    Point(1, 2),
    Pair("k", 1),
    Colour.RED,
    Word("subclassed str"),
    fractions.Fraction(1, 3),
    OrderedDict(a=1),
    bytearray(b"ab"),
    2**64,
    -(2**63) - 1,
    2**200,
    -(2**100),
    (1, 2**70),
]


@pytest.mark.parametrize("item", SCALARS_AND_TUPLES + OTHER_ITEMS, ids=repr)
def test_an_item_comes_back_equal_and_of_the_same_type(item):
    assert_identical(roundtrip(item), item)


@pytest.mark.parametrize("item", SCALARS_AND_TUPLES, ids=repr)
def test_msgpack_batches_of_earlier_versions_are_still_read(item):
    packed = b"M" + msgpack.packb([item], use_bin_type=True)
    assert_identical(decode_batch(packed), [item])


@pytest.mark.parametrize("item", [2**64, 2**64 + 1, -(2**63) - 1, 10**40], ids=repr)
def test_ints_beyond_64_bits_survive(item):
    assert_identical(roundtrip(item), item)
    assert_identical(roundtrip((item, "key")), (item, "key"))


@pytest.mark.parametrize(
    "batch",
    [[], SCALARS_AND_TUPLES, OTHER_ITEMS, [("k", 1), ["k", 1], ("k", 1)]],
    ids=["empty", "scalars and tuples", "others", "mixed"],
)
def test_a_batch_round_trips_in_order(batch):
    decoded = decode_batch(encode_batch(iter(batch)))
    assert isinstance(decoded, list)
    assert_identical(decoded, list(batch))


def generator():
    yield 1


@pytest.mark.parametrize(
    ("item", "type_name"),
    [(lambda: 1, "function"), (generator(), "generator"), ([1, lambda: 2], "list")],
    ids=["lambda", "generator", "lambda in a list"],
)
def test_an_unserializable_item_raises_type_error_naming_its_type(item, type_name):
    with pytest.raises(TypeError, match=f"cannot serialize item of type {type_name} ") as raised:
        encode_batch(["fine", item, ("also", "fine")])
    assert "picklable" in str(raised.value)


def test_classes_pickle_cannot_find_by_name_travel_by_value_between_members():
    """A class defined in a function stands for one of the driver's script or of a module
    shipped by value: items crossing members carry it along; snapshots refuse it."""

    @dataclasses.dataclass(frozen=True)
    class Local:
        value: int

    batch = [Local(1), "plain", Local(2)]
    decoded = decode_batch(encode_batch(batch, classes_by_value=True))
    assert [type(item) for item in decoded] == [Local, str, Local]  # the same class object
    assert decoded == batch
    with pytest.raises(TypeError, match="cannot serialize item of type Local "):
        encode_batch(batch)


def test_objects_no_pickler_takes_fail_even_with_classes_by_value():
    with pytest.raises(TypeError, match="cannot serialize item of type generator "):
        encode_batch([1, generator()], classes_by_value=True)


def test_a_batch_of_more_than_chunk_items_comes_back_in_order_from_its_chunks():
    shared = [1, 2]
    batch = [(n, {"n": n, "shared": shared}) for n in range(3 * CHUNK_ITEMS + 5)]
    data = encode_batch(batch)
    assert data[:1] == b"C"
    back = decode_batch(data)
    assert back == batch
    # an object held twice comes back shared within a chunk, as equal copies across chunks
    assert back[0][1]["shared"] is back[CHUNK_ITEMS - 1][1]["shared"]
    assert back[0][1]["shared"] is not back[CHUNK_ITEMS][1]["shared"]
    assert encode_batch(batch[:CHUNK_ITEMS])[:1] == b"P"


def test_every_chunk_is_read_with_the_loads_given():
    chunks = []

    def loads(payload: memoryview) -> object:
        chunks.append(len(payload))
        return pickle.loads(payload)

    batch = list(range(2 * CHUNK_ITEMS + 1))
    assert decode_batch(encode_batch(batch), loads) == batch
    assert len(chunks) == 3


@pytest.mark.parametrize(
    "data",
    [
        *(b"", b"X123", b"M", b"M\xc1", b"M\x92", b"M\x05", b"P", b"Pgarbage", b"P\x80\x05K"),
        *(b"C", b"C\x05", b"C" + struct.pack("<Q", 100) + pickle.dumps([1])),
        b"C" + struct.pack("<Q", 4) + b"\x80\x05K\x01",  # a chunk cut short
        b"C" + struct.pack("<Q", 5) + b"\x80\x05K\x01.",  # a chunk holding no batch
    ],
    ids=repr,
)
def test_decoding_garbage_raises_value_error(data):
    with pytest.raises(ValueError, match="jetspark batch"):
        decode_batch(data)
